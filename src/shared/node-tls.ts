// node:tls's functions, loaded with require. An ESM import of node:tls fills in the module's whole namespace, and
// its `rootCertificates` getter then decodes Node's ~150 built-in roots into strings held for the life of the
// process: heap in every sidecar, whether or not it ever verifies an upstream (docs/benchmarks.md#idle-memory).
// Types still come from `import type ... from 'node:tls'`.

import { createRequire } from 'node:module';
import type { TLSSocket as NodeTLSSocket } from 'node:tls';

const tls = createRequire(import.meta.url)('node:tls') as typeof import('node:tls');

export const { checkServerIdentity, connect, createSecureContext } = tls;
export const TLSSocket = tls.TLSSocket;
export type TLSSocket = NodeTLSSocket;

/** The `ca` of a context that trusts Node's built-in roots and, when given, the anchors of `extraPem` beside them. */
export function nodeRootsWith(extraPem: string | undefined): string[] {
  return extraPem === undefined ? [...tls.rootCertificates] : [...tls.rootCertificates, extraPem];
}
