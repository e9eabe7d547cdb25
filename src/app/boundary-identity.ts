// Binary identity for the composition root (boundary.ts, which stays under its size cap): the IdentitySource the
// flags name, the identity server's socket (--identity-socket) or /proc read by boundary itself, or one a test
// injects; none in endpoint-only mode, where nothing is ever looked up (docs/identity.md#where-lookups-run).

import type { Deps } from './boundary-types.js';
import type { Config } from './config.js';
import { createProcIdentitySource } from '../identity/proc-source.js';
import { createSocketIdentitySource } from '../identity/socket-source.js';
import type { IdentitySource } from '../identity/source.js';

export function openIdentitySource(config: Config, deps: Pick<Deps, 'identity' | 'now'>): IdentitySource | undefined {
  if (config.binaryIdentity === 'endpoint-only') return undefined;
  if (deps.identity !== undefined) return deps.identity;
  if (config.identitySocket !== undefined) return createSocketIdentitySource({ socketPath: config.identitySocket });
  return createProcIdentitySource({ now: deps.now });
}
