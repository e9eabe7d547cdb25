// `--middleware-config`: the external middleware services the supervisor registers on every attached boundary,
// read at start with the rules of `boundary run --middleware-config` and sent with their CAs as PEM text.

import type { WireMiddlewareService } from '../control/messages.js';
import { loadRegistrationsFile } from '../middleware/registrations.js';

export async function loadMiddlewareServices(path: string): Promise<readonly WireMiddlewareService[]> {
  const registrations = await loadRegistrationsFile(path);
  return registrations.map((r) => ({
    name: r.name,
    grpcEndpoint: r.endpoint,
    maxPayloadBytes: r.maxPayloadBytes,
    timeoutMs: r.timeoutMs,
    ...(r.tls ? {} : { allowInsecureTransport: true }),
    ...(r.caPem === undefined ? {} : { caPem: r.caPem }),
  }));
}
