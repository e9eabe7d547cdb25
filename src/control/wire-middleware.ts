// Middleware service registrations as the supervisor delivers them, checked into registrations with the rules of
// `--middleware-config` (middleware/registrations.ts): a bad one throws CONFIG_INVALID and nothing is registered.

import { type MiddlewareRegistration, parseRegistrations } from '../middleware/registrations.js';
import type { WireMiddlewareService } from './messages.js';

export function registrationsFromWire(services: readonly WireMiddlewareService[], source: string): readonly MiddlewareRegistration[] {
  const cas = new Map<number, string>();
  const raw = services.map((service, index) => {
    if (service.caPem !== undefined) cas.set(index, service.caPem);
    return {
      name: service.name,
      grpc_endpoint: service.grpcEndpoint,
      max_payload_bytes: service.maxPayloadBytes,
      // The file's form, so the same bounds apply: a number the file could not hold is refused here too.
      timeout: `${service.timeoutMs}ms`,
      ...(service.allowInsecureTransport === undefined ? {} : { allow_insecure_transport: service.allowInsecureTransport }),
    };
  });
  return parseRegistrations(raw, source, cas);
}
