// pino, loaded through require rather than an ESM import of the CommonJS package: measured in a bare node,
// import('pino') costs 50.5 MB of RSS and require('pino') 49.7 MB (issue 15; dns-packet shows the same at 9 MB).
// A module `require` of this form is what scripts/bundle.ts lets the image's bundle carry the package in.

import { createRequire } from 'node:module';
import type * as Pino from 'pino';

const require = createRequire(import.meta.url);
export const pino: typeof Pino.pino = (require('pino') as typeof Pino).pino;
