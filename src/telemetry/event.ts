// The audit event as every component emits it: a plain value. telemetry/ocsf.ts renders it as an
// OCSF JSON line and as the one-line shorthand. Never put a secret, placeholder or query string here.

export const EVENT_CLASSES = ['NET', 'HTTP', 'CONFIG', 'FINDING', 'DNS'] as const;
export type EventClass = (typeof EVENT_CLASSES)[number];

export const SEVERITIES = ['INFO', 'LOW', 'MED', 'HIGH', 'CRIT', 'FATAL'] as const;
export type Severity = (typeof SEVERITIES)[number];

/**
 * What made an event's outcome (docs/events.md#engines): `policy` the connection-level decision (host, port,
 * binaries), `l7` request rules, `identity` a process that could not be identified, `ssrf` destination validation,
 * `dns` policy DNS and the lookup gate, `tls` interception, `credentials` and `credential-binding` placeholders,
 * `protocol` a request refused as it was read (framing, parser, authority), `upstream` an upstream that failed,
 * `admission` the connection limits, `control` the control channel, `middleware` a network middleware.
 */
export const ENGINES = [
  'policy',
  'l7',
  'identity',
  'ssrf',
  'dns',
  'tls',
  'credentials',
  'credential-binding',
  'protocol',
  'upstream',
  'admission',
  'control',
  'middleware',
] as const;
export type Engine = (typeof ENGINES)[number];

export interface AuditEvent {
  readonly class: EventClass;
  /** NET: OPEN|CLOSE|FAIL|REFUSE|LISTEN|OTHER; HTTP: the method; CONFIG: LOADED|DETECTED|PUBLISHED|...;
   *  FINDING: BLOCKED; DNS: QUERY. */
  readonly activity: string;
  readonly severity: Severity;
  readonly action?: 'ALLOWED' | 'DENIED';
  readonly engine?: Engine;
  /** Policy key that decided, or undefined (`-` in shorthand). */
  readonly policy?: string;
  readonly dst?: { readonly host?: string; readonly ip?: string; readonly port?: number };
  readonly src?: { readonly ip?: string; readonly port?: number };
  /** URL without query string (`https://h/p`, `http://h:8080/p`). */
  readonly http?: { readonly method: string; readonly url: string };
  readonly statusDetail?: string;
  readonly message: string;
  /** One human sentence on why (the decision's detail, a failure's cause); rendered as OCSF `unmapped.reason`
   *  and shorthand `[reason:...]`. A closed code goes in `unmapped.reason_code`, never here. */
  readonly detail?: string;
  readonly generation?: number;
  readonly policyHash?: string;
  /** boundary's own fields beyond OCSF (ruleId, addressClass, mapping ids, dns rcode, ...). */
  readonly unmapped?: Readonly<Record<string, unknown>>;
}

export interface AuditSink {
  emit(event: AuditEvent): void;
}

/**
 * `sink`, with `observe` shown every event after the sink took it (the composition root's metrics and denial ring).
 * Keeps `subscribe` reachable when `sink` has one: attached mode forwards events through it (control/attached.ts).
 * An observer that throws loses that event; the emitter never sees the error.
 */
export function observedSink(sink: AuditSink, observe: (event: AuditEvent) => void): AuditSink {
  function emit(event: AuditEvent): void {
    sink.emit(event);
    try {
      observe(event);
    } catch {
      // The sink already has the event; only this observer's view of it is lost.
    }
  }
  const subscribe = (sink as { subscribe?: unknown }).subscribe;
  return typeof subscribe === 'function' ? ({ emit, subscribe: subscribe.bind(sink) } as AuditSink) : { emit };
}
