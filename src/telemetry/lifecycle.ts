// Lifecycle events (docs/events.md#lifecycle): stopping on a signal, drained, credentials loaded. Pure builders; the
// composition root emits them through the same sink as every other event. Counts only: never a provider or key name.

import type { AuditEvent } from './event.js';

/** CONFIG:STOPPING: a stop was asked for (SIGTERM/SIGINT, or a caller's close()); listeners stop, requests drain. */
export function stoppingEvent(signal: string | undefined): AuditEvent {
  const why = signal === undefined ? 'close requested' : `${signal} received`;
  return {
    class: 'CONFIG',
    activity: 'STOPPING',
    severity: 'INFO',
    statusDetail: 'boundary_stopping',
    message: `${why}: draining connections`,
    unmapped: { signal: signal ?? null },
  };
}

/** CONFIG:STOPPED: every listener closed and in-flight work drained (or cut at its grace), `elapsedMs` after STOPPING. */
export function drainedEvent(signal: string | undefined, elapsedMs: number): AuditEvent {
  return {
    class: 'CONFIG',
    activity: 'STOPPED',
    severity: 'INFO',
    statusDetail: 'boundary_drained',
    message: `drained in ${elapsedMs} ms`,
    unmapped: { signal: signal ?? null, drain_ms: elapsedMs },
  };
}

/** CONFIG:LOADED for a credential revision: how many providers and keys, never which. */
export function credentialsLoadedEvent(set: { readonly revision: number; readonly providers: ReadonlyMap<string, unknown>; readonly keys: readonly string[] }): AuditEvent {
  const providers = set.providers.size;
  const keys = set.keys.length;
  return {
    class: 'CONFIG',
    activity: 'LOADED',
    severity: 'INFO',
    engine: 'credentials',
    statusDetail: 'credentials_loaded',
    message: `credentials loaded: ${providers} provider${providers === 1 ? '' : 's'}, ${keys} key${keys === 1 ? '' : 's'} (revision ${set.revision})`,
    unmapped: { providers, keys, credential_revision: set.revision },
  };
}

/** NET:LISTEN once the proxy accepts connections, with the policy it starts on. */
export function proxyListeningEvent(bound: { readonly host: string; readonly port: number }, policy: { readonly generation: number; readonly hash: string }): AuditEvent {
  return {
    class: 'NET',
    activity: 'LISTEN',
    severity: 'INFO',
    dst: { ip: bound.host, port: bound.port },
    message: `proxy listening on ${bound.host}:${bound.port}`,
    generation: policy.generation,
    policyHash: policy.hash,
  };
}
