// The one decision event per connection or request, rendered from an Outcome, plus the proxy's metrics.
// Metric labels come only from closed sets (adapter, verdict, reason); never a host, path or address.

import { Counter, Gauge, type Registry } from 'prom-client';
import { type Adapter, DECISION_REASONS } from '../policy/types.js';
import type { AuditEvent, AuditSink, Engine, Severity } from '../telemetry/event.js';
import { formatAuthority } from '../net/host.js';

/** Outcomes that are not policy decisions, named once for events and metric labels. */
export const OUTCOME_REASONS = [
  'ssrf-denied',
  'resolve-failed',
  'dial-failed',
  'upstream-failed',
  'tls-unavailable',
  'authority-mismatch',
  'bad-request',
  'head-too-large',
  'unsupported-l7-protocol',
  'unsupported-scheme',
  'policy-changed',
  'too-many-connections',
  'sni-mismatch',
  'tls-handshake-failed',
  'client-closed',
  'uninspected-credentials',
  'credential-endpoint-mismatch',
  'credential-unavailable',
  'credential-body-too-large',
  'websocket-binary-credentialed',
  'websocket-protocol-error',
  'websocket-timeout',
] as const;
export type OutcomeReason = (typeof OUTCOME_REASONS)[number];
export const ALL_REASONS: readonly string[] = [...DECISION_REASONS, ...OUTCOME_REASONS];

export const OUTCOME_VERDICTS = ['allow', 'audit', 'deny', 'fail'] as const;
export type OutcomeVerdict = (typeof OUTCOME_VERDICTS)[number];

/** What one connection or request came to; filled in as it progresses, emitted once from a finally block. */
export interface Outcome {
  adapter: Adapter;
  /** `net` for CONNECT (Network Activity), `http` for forward and L7 requests (HTTP Activity). */
  kind: 'net' | 'http';
  method: string;
  host: string | undefined;
  port: number | undefined;
  /** Canonical path without the query (http only). */
  path: string | undefined;
  verdict: OutcomeVerdict;
  reason: string;
  engine: Engine;
  detail: string;
  policy: string | undefined;
  generation: number | undefined;
  policyHash: string | undefined;
  srcIp: string | undefined;
  srcPort: number | undefined;
  status: number | undefined;
  /** Extra fields under `unmapped` (rule, endpoint id, plan, check, dropped addresses, ...). */
  extra: Record<string, unknown> | undefined;
  /** Overrides the verdict's default severity (a credential binding mismatch is HIGH). */
  severity?: Severity;
}

export function beginOutcome(adapter: Adapter, kind: 'net' | 'http', src: { remoteAddress?: string | undefined; remotePort?: number | undefined }): Outcome {
  return {
    adapter,
    kind,
    method: kind === 'net' ? 'CONNECT' : 'UNKNOWN',
    host: undefined,
    port: undefined,
    path: undefined,
    verdict: 'deny',
    reason: 'bad-request',
    engine: kind === 'net' ? 'opa' : 'l7',
    detail: 'request was not understood',
    policy: undefined,
    generation: undefined,
    policyHash: undefined,
    srcIp: src.remoteAddress,
    srcPort: src.remotePort,
    status: undefined,
    extra: undefined,
  };
}

export interface ProxyMetrics {
  readonly decisions: Counter<'adapter' | 'verdict' | 'reason'>;
  /** decisions.inc({ adapter, verdict, reason }) for the per-request path: counted here and added to the
   *  counter when it is collected (a scrape), instead of hashing a label object per request. */
  readonly countDecision: (adapter: string, verdict: string, reason: string) => void;
  readonly refusedConnections: Counter<'reason'>;
  readonly clientErrors: Counter<'reason'>;
  readonly connections: Gauge;
  readonly tunnels: Gauge;
  readonly reloadClosed: Counter;
}

/** One label combination's count not yet added to the counter. */
interface PendingCount {
  readonly labels: { adapter: string; verdict: string; reason: string };
  count: number;
}

export function createProxyMetrics(registry: Registry): ProxyMetrics {
  const registers = [registry];
  // adapter -> verdict -> reason: three lookups with the caller's strings, no key or label object built.
  // Bounded by the label sets themselves, as the counter's own series are.
  const pending = new Map<string, Map<string, Map<string, PendingCount>>>();
  const decisions: Counter<'adapter' | 'verdict' | 'reason'> = new Counter({
    name: 'boundary_proxy_decisions_total',
    help: 'Connections and requests by adapter, final verdict and reason',
    labelNames: ['adapter', 'verdict', 'reason'],
    registers,
    collect() {
      for (const verdicts of pending.values()) {
        for (const reasons of verdicts.values()) {
          for (const entry of reasons.values()) {
            if (entry.count === 0) continue;
            decisions.inc(entry.labels, entry.count);
            entry.count = 0;
          }
        }
      }
    },
  });
  function countDecision(adapter: string, verdict: string, reason: string): void {
    let verdicts = pending.get(adapter);
    if (verdicts === undefined) {
      verdicts = new Map();
      pending.set(adapter, verdicts);
    }
    let reasons = verdicts.get(verdict);
    if (reasons === undefined) {
      reasons = new Map();
      verdicts.set(verdict, reasons);
    }
    const entry = reasons.get(reason);
    if (entry === undefined) reasons.set(reason, { labels: { adapter, verdict, reason }, count: 1 });
    else entry.count++;
  }
  return {
    decisions,
    countDecision,
    refusedConnections: new Counter({
      name: 'boundary_proxy_refused_connections_total',
      help: 'Connections refused before any request was read',
      labelNames: ['reason'],
      registers,
    }),
    clientErrors: new Counter({
      name: 'boundary_proxy_client_errors_total',
      help: 'Request heads rejected by the parser (malformed, oversized, timed out)',
      labelNames: ['reason'],
      registers,
    }),
    connections: new Gauge({ name: 'boundary_proxy_connections', help: 'Open client connections', registers }),
    tunnels: new Gauge({ name: 'boundary_proxy_tunnels', help: 'Open CONNECT tunnels', registers }),
    reloadClosed: new Counter({
      name: 'boundary_proxy_reload_closed_total',
      help: 'Tunnels closed because a policy reload changed their decision',
      registers,
    }),
  };
}

const ACTION = { allow: 'ALLOWED', audit: 'ALLOWED', deny: 'DENIED', fail: undefined } as const;
const STATUS_WORD = { allow: 'allowed', audit: 'audit', deny: 'denied', fail: 'failed' } as const;
const LABELS = ['CONNECT', 'CONNECT_L7', 'FORWARD', 'L7_REQUEST'] as const;
/** `<label> <status word>` by label and verdict, made once: every event then carries the same string, which
 *  the audit sink's memo compares by identity and the renderers find already hashed. */
const STATUS_DETAILS: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map(
  LABELS.map((label) => [label, new Map(OUTCOME_VERDICTS.map((verdict) => [verdict, `${label} ${STATUS_WORD[verdict]}`]))]),
);

function target(host: string | undefined, port: number | undefined): string {
  if (host === undefined) return '-';
  const shown = host.includes(':') ? `[${host}]` : host;
  return port === undefined ? shown : `${shown}:${port}`;
}

/** Renders the outcome as an AuditEvent (docs/events.md#what-is-emitted). Never includes a query string. */
export function outcomeEvent(o: Outcome): AuditEvent {
  const action = ACTION[o.verdict];
  const severity = o.severity ?? (o.verdict === 'deny' ? 'MED' : o.verdict === 'fail' ? 'LOW' : 'INFO');
  const where = target(o.host, o.port);
  const unmapped: Record<string, unknown> = { adapter: o.adapter, verdict: o.verdict, reason_code: o.reason };
  if (o.status !== undefined) unmapped.status_code = o.status;
  if (o.extra !== undefined) Object.assign(unmapped, o.extra);
  // Built by assignment, not object spreads: one of these is made per request.
  const dst: { host?: string; port?: number } = {};
  if (o.host !== undefined) dst.host = o.host;
  if (o.port !== undefined) dst.port = o.port;
  const src: { ip?: string; port?: number } = {};
  if (o.srcIp !== undefined) src.ip = o.srcIp;
  if (o.srcPort !== undefined) src.port = o.srcPort;
  const net = o.kind === 'net' || o.verdict === 'fail';
  const label = net ? (o.adapter === 'connect' ? (o.extra?.inspect === true ? 'CONNECT_L7' : 'CONNECT') : 'FORWARD') : o.adapter === 'forward' ? 'FORWARD' : 'L7_REQUEST';
  const statusDetail = STATUS_DETAILS.get(label)?.get(o.verdict) ?? `${label} ${STATUS_WORD[o.verdict]}`;
  const event: {
    -readonly [K in keyof AuditEvent]: AuditEvent[K];
  } = {
    class: net ? 'NET' : 'HTTP',
    activity: net ? (o.verdict === 'fail' ? 'FAIL' : 'OPEN') : o.method,
    statusDetail,
    message: net ? `${statusDetail} ${where}` : `${statusDetail} ${o.method} ${where}${o.path ?? ''}`,
    severity,
    engine: o.engine,
    dst,
    src,
    reason: o.detail,
    unmapped,
  };
  if (action !== undefined) event.action = action;
  if (o.policy !== undefined) event.policy = o.policy;
  if (o.generation !== undefined) event.generation = o.generation;
  if (o.policyHash !== undefined) event.policyHash = o.policyHash;
  if (!net) {
    // docs/events.md#shorthand-line: the scheme is http even after TLS termination; the port is printed unless 80.
    event.http = { method: o.method, url: `http://${o.port === 80 || o.port === undefined ? target(o.host, undefined) : where}${o.path ?? ''}` };
  }
  return event;
}

export function emitOutcome(sink: AuditSink, metrics: ProxyMetrics, o: Outcome): void {
  metrics.countDecision(o.adapter, o.verdict, o.reason);
  sink.emit(outcomeEvent(o));
}

/** FINDING:BLOCKED beside the decision event (authority mismatch, SNI mismatch). */
export function findingEvent(o: Outcome, finding: string): AuditEvent {
  return {
    class: 'FINDING',
    activity: 'BLOCKED',
    severity: 'HIGH',
    engine: o.engine,
    dst: { ...(o.host === undefined ? {} : { host: o.host }), ...(o.port === undefined ? {} : { port: o.port }) },
    message: `${finding}: ${o.detail}`,
    reason: o.detail,
    ...(o.generation === undefined ? {} : { generation: o.generation }),
    ...(o.policyHash === undefined ? {} : { policyHash: o.policyHash }),
    unmapped: { finding, adapter: o.adapter },
  };
}

/** NET:CLOSE for a relay (tunnel or WebSocket) that boundary ended, stamped with the policy now in force. */
export function relayClosedEvent(
  policy: { readonly generation: number; readonly hash: string },
  relay: { what: 'tunnel' | 'websocket'; host: string; port: number; reason: string; unmapped?: Readonly<Record<string, unknown>> },
): AuditEvent {
  return {
    class: 'NET',
    activity: 'CLOSE',
    severity: 'INFO',
    engine: 'opa',
    dst: { host: relay.host, port: relay.port },
    message: `${relay.what} to ${formatAuthority(relay.host, relay.port)} closed: ${relay.reason}`,
    reason: relay.reason,
    generation: policy.generation,
    policyHash: policy.hash,
    ...(relay.unmapped === undefined ? {} : { unmapped: relay.unmapped }),
  };
}
