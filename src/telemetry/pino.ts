// pino, loaded through require rather than an ESM import of the CommonJS package: measured in a bare node,
// import('pino') costs 50.5 MB of RSS and require('pino') 49.7 MB (issue 15; dns-packet shows the same at 9 MB).

import { createRequire } from 'node:module';
import type * as Pino from 'pino';

export const pino: typeof Pino.pino = (createRequire(import.meta.url)('pino') as typeof Pino).pino;
