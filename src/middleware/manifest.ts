// The Describe handshake's answer, checked (docs/policy.md#external-middleware-services): protocol major 1, the
// contract capability on both sides, and for each binding boundary runs its phase, payload limit and timeout. What
// boundary keeps of a service is its profile: per binding, the payload limit and timeout it will use. Pure.

import type { MiddlewareBinding } from './outcome.js';
import { CONTRACT_CAPABILITY, PROTOCOL_MAJOR, WEBSOCKET_UNARY_CAPABILITY } from './proto.js';
import { MAX_MIDDLEWARE_PAYLOAD_BYTES, MAX_MIDDLEWARE_TIMEOUT_MS, MIN_MIDDLEWARE_TIMEOUT_MS, type MiddlewareRegistration } from './registrations.js';

export interface BindingProfile {
  /** The smallest of the platform's, the registration's and the service's limits. */
  readonly maxPayloadBytes: number;
  /** The registration's timeout, or the binding's when it is shorter. */
  readonly timeoutMs: number;
}

export type ServiceProfile = ReadonlyMap<MiddlewareBinding, BindingProfile>;

/** The operation and phase pairs boundary runs; any other a service lists is not used. */
const BINDINGS: Readonly<Record<string, MiddlewareBinding>> = {
  'SUPERVISOR_MIDDLEWARE_OPERATION_HTTP_REQUEST/SUPERVISOR_MIDDLEWARE_PHASE_PRE_CREDENTIALS': 'http-request',
  'SUPERVISOR_MIDDLEWARE_OPERATION_HTTP_RESPONSE/SUPERVISOR_MIDDLEWARE_PHASE_PRE_RETURN': 'http-response',
  'SUPERVISOR_MIDDLEWARE_OPERATION_WEBSOCKET_MESSAGE/SUPERVISOR_MIDDLEWARE_PHASE_PRE_CREDENTIALS': 'websocket-message',
};

interface RawManifest {
  readonly bindings?: readonly RawBinding[];
  readonly extension?: {
    readonly protocol_version?: { readonly major?: number } | null;
    readonly supported_capabilities?: readonly string[];
    readonly required_capabilities?: readonly string[];
  } | null;
}

interface RawBinding {
  readonly operation?: string;
  readonly phase?: string;
  readonly max_payload_bytes?: number;
  readonly request_timeout?: { readonly seconds?: number; readonly nanos?: number } | null;
}

/** The service's profile, or why it cannot be used (in boundary's words, never the service's). */
export function profileOf(raw: RawManifest, registration: MiddlewareRegistration): ServiceProfile | string {
  const extension = raw.extension;
  if (extension === null || extension === undefined) return 'the manifest has no protocol metadata';
  if (extension.protocol_version?.major !== PROTOCOL_MAJOR) return `the service speaks protocol ${extension.protocol_version?.major ?? 'none'}, not ${PROTOCOL_MAJOR}`;
  if (!(extension.supported_capabilities ?? []).includes(CONTRACT_CAPABILITY)) return `the service does not advertise ${CONTRACT_CAPABILITY}`;
  if ((extension.required_capabilities ?? []).some((c) => c !== CONTRACT_CAPABILITY)) return 'the service requires a capability boundary does not have';
  const profile = new Map<MiddlewareBinding, BindingProfile>();
  // Text messages are asked one call each, which only a service that says so answers (not a session stream).
  const unaryText = (extension.supported_capabilities ?? []).includes(WEBSOCKET_UNARY_CAPABILITY);
  for (const binding of raw.bindings ?? []) {
    const kind = BINDINGS[`${binding.operation}/${binding.phase}`];
    if (kind === undefined || (kind === 'websocket-message' && !unaryText)) continue;
    const advertised = binding.max_payload_bytes ?? 0;
    if (advertised < 1) return `the ${kind} binding has no max_payload_bytes`;
    if (registration.maxPayloadBytes > advertised) {
      return `the registration's max_payload_bytes (${registration.maxPayloadBytes}) is more than the ${kind} binding takes (${advertised})`;
    }
    let timeoutMs = registration.timeoutMs;
    const own = binding.request_timeout;
    if (own !== null && own !== undefined) {
      const ms = (own.seconds ?? 0) * 1000 + Math.ceil((own.nanos ?? 0) / 1e6);
      if (ms < MIN_MIDDLEWARE_TIMEOUT_MS || ms > MAX_MIDDLEWARE_TIMEOUT_MS) return `the ${kind} binding's request_timeout is outside 10 ms to 30 s`;
      timeoutMs = Math.min(timeoutMs, ms);
    }
    profile.set(kind, { maxPayloadBytes: Math.min(registration.maxPayloadBytes, MAX_MIDDLEWARE_PAYLOAD_BYTES), timeoutMs });
  }
  return profile.size === 0 ? 'the service declares no binding boundary runs (HTTP_REQUEST, HTTP_RESPONSE, or WEBSOCKET_MESSAGE with the unary capability)' : profile;
}
