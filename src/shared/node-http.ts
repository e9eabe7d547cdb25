// node:http's functions, loaded with require. An ESM import of node:http makes Node 22 fill in the module's whole
// namespace, whose lazy WebSocket getters load undici and node:http2: resident memory in every sidecar that none of
// boundary uses (docs/benchmarks.md#idle-memory). Types still come from `import type ... from 'node:http'`.

import { createRequire } from 'node:module';

const http = createRequire(import.meta.url)('node:http') as typeof import('node:http');

export const { createServer, request, STATUS_CODES } = http;
