// The one decision event per connection or request, rendered from an Outcome, plus the proxy's metrics.
// Metric labels come only from closed sets (adapter, verdict, reason); never a host, path or address.

import { type Adapter, DECISION_REASONS, type DecisionReason } from '../policy/types.js';
import type { AuditEvent, AuditSink, Engine, Severity } from '../telemetry/event.js';
import { formatAuthority } from '../net/host.js';
import type { MiddlewareInvocation } from '../middleware/outcome.js';
import { createEventTexts, target } from './event-texts.js';
import { middlewareFindingEvents } from './middleware-findings.js';
import type { ProxyMetrics } from '../proxy/metrics.js';
import type { ReplayFields } from '../telemetry/replay.js';

/** Outcomes that are not policy decisions, named once for events and metric labels. */
const OUTCOME_REASONS = [
  'ssrf-denied',
  'resolve-failed',
  // The lookup gate (net/lookup-gate.ts) kept the name from the upstream resolver.
  'lookup-rate-limited',
  'lookup-tunnel-suspected',
  'dial-failed',
  // The corporate upstream proxy failed the dial (docs/running.md#corporate-upstream-proxy).
  'upstream-proxy-refused',
  'upstream-proxy-unreachable',
  'upstream-proxy-timeout',
  'upstream-proxy-malformed',
  'upstream-failed',
  // The upstream answered, but broke HTTP/1.1 framing or HTTP/2's rules (UPSTREAM_PROTOCOL_ERROR).
  'upstream-protocol-error',
  // docs/credentials.md#client-certificates: the origin refused the client certificate boundary presented (or required
  // one where none is bound), or two are bound to one authority.
  'client-certificate-rejected',
  'client-certificate-ambiguous',
  'tls-unavailable',
  'authority-mismatch',
  'bad-request',
  'head-too-large',
  'framing-header-lookalike',
  'method-override-invalid',
  // docs/policy.md#one-reading: a request boundary and the origin could read differently, refused before policy.
  'graphql-ambiguous',
  'json-duplicate-key',
  // docs/policy.md#mcp-protocol-revisions: an MCP request's revision could not be selected, is not allowed, or the
  // request is not one of that revision; refused before policy, under audit too.
  'mcp-protocol-version-header-invalid',
  'mcp-protocol-version-unsupported',
  'mcp-protocol-version-not-allowed',
  'mcp-http-method-not-allowed',
  'mcp-request-invalid',
  'mcp-request-metadata-invalid',
  'unsupported-l7-protocol',
  'unsupported-scheme',
  'policy-changed',
  'too-many-connections',
  'too-many-connections-from-source',
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
  // Transparent capture (capture.ts CAPTURE_REASONS): why a captured connection was refused before any dial.
  'mapping-missing',
  'mapping-expired',
  'stale-policy',
  'port-mismatch',
  'destination-denied',
  // Network middlewares (docs/policy.md#network-middlewares): a stage denied, failed under fail_closed, had no turn,
  // or could not see the traffic at all.
  'middleware-denied',
  'middleware-failed',
  'middleware-capacity',
  'middleware-uninspectable',
] as const;
export type OutcomeReason = (typeof OUTCOME_REASONS)[number];

/** Every `Outcome.reason`: the decision's own reason, or why the proxy ended it otherwise. Event `reason_code`
 *  and the decisions metric's `reason` label both come from this one set. */
export const REASON_CODES = [...DECISION_REASONS, ...OUTCOME_REASONS] as const;
export type ReasonCode = DecisionReason | OutcomeReason;

/**
 * What made each outcome, rendered as the event's `engine` (docs/events.md#engines): one entry per reason code, so a
 * new reason names its engine. `decision`: the engine of the decision that let the request go (a client that left).
 */
const REASON_ENGINES: Readonly<Record<ReasonCode, Engine | 'decision'>> = {
  'endpoint-allowed': 'policy',
  'rule-allowed': 'l7',
  'preset-allowed': 'l7',
  'no-policy': 'policy',
  'no-endpoint-matched': 'policy',
  'binary-not-allowed': 'policy',
  'identity-unavailable': 'identity',
  'deny-rule-matched': 'l7',
  'no-rule-matched': 'l7',
  'unsupported-l7-protocol': 'l7',
  'graphql-rejected': 'l7',
  'jsonrpc-rejected': 'l7',
  'ip-literal-name': 'dns',
  'local-name': 'dns',
  'metadata-name': 'dns',
  'ssrf-denied': 'ssrf',
  'resolve-failed': 'dns',
  'lookup-rate-limited': 'dns',
  'lookup-tunnel-suspected': 'dns',
  'dial-failed': 'upstream',
  'upstream-proxy-refused': 'upstream',
  'upstream-proxy-unreachable': 'upstream',
  'upstream-proxy-timeout': 'upstream',
  'upstream-proxy-malformed': 'upstream',
  'upstream-failed': 'upstream',
  'upstream-protocol-error': 'upstream',
  'client-certificate-rejected': 'tls',
  'client-certificate-ambiguous': 'tls',
  'tls-unavailable': 'tls',
  'middleware-denied': 'middleware',
  'middleware-failed': 'middleware',
  'middleware-capacity': 'middleware',
  'middleware-uninspectable': 'middleware',
  'authority-mismatch': 'protocol',
  'bad-request': 'protocol',
  'head-too-large': 'protocol',
  'framing-header-lookalike': 'protocol',
  'method-override-invalid': 'protocol',
  'graphql-ambiguous': 'protocol',
  'json-duplicate-key': 'protocol',
  // An MCP revision that cannot be selected, or headers that say another thing than the body: read two ways.
  'mcp-protocol-version-header-invalid': 'protocol',
  'mcp-protocol-version-unsupported': 'protocol',
  'mcp-http-method-not-allowed': 'protocol',
  'mcp-request-metadata-invalid': 'protocol',
  // The endpoint's mcp.versions, and a body its rules cannot read under the revision.
  'mcp-protocol-version-not-allowed': 'l7',
  'mcp-request-invalid': 'l7',
  'unsupported-scheme': 'protocol',
  'policy-changed': 'policy',
  'too-many-connections': 'admission',
  'too-many-connections-from-source': 'admission',
  'sni-mismatch': 'tls',
  'tls-handshake-failed': 'tls',
  'client-closed': 'decision',
  'uninspected-credentials': 'credentials',
  'credential-endpoint-mismatch': 'credential-binding',
  'credential-unavailable': 'credentials',
  'credential-body-too-large': 'credentials',
  'websocket-binary-credentialed': 'credentials',
  'websocket-protocol-error': 'protocol',
  'websocket-timeout': 'protocol',
  'mapping-missing': 'dns',
  'mapping-expired': 'dns',
  'stale-policy': 'policy',
  'port-mismatch': 'policy',
  'destination-denied': 'policy',
};

/** The engine of an outcome with this reason; `layer` is the standing decision's, for a request a client left. */
export function engineOf(reason: ReasonCode, layer: 'l4' | 'l7' | undefined): Engine {
  const engine = REASON_ENGINES[reason];
  if (engine !== 'decision') return engine;
  return layer === undefined ? 'protocol' : layer === 'l7' ? 'l7' : 'policy';
}

export const OUTCOME_VERDICTS = ['allow', 'audit', 'deny', 'fail'] as const;
export type OutcomeVerdict = (typeof OUTCOME_VERDICTS)[number];

/** The detail an outcome carries until it is settled: nothing about the request was understood yet. */
export const NOT_UNDERSTOOD_DETAIL = 'request was not understood';

/** What one connection or request came to: its context is filled in as it progresses, its result (verdict,
 *  reason, detail, status) only through settle(); emitted once from a finally block. */
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
  /** Closed code (event `reason_code`, metric label); the sentence goes in `detail`. */
  reason: ReasonCode;
  engine: Engine;
  /** One human sentence for the event's detail; never a query string or credential. */
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
  /** `https` after TLS termination (http only): the event's URL and a denial's `unmapped.replay.scheme`; default `http`. */
  scheme?: 'http' | 'https';
  /** The request's query keys, never its values (telemetry/replay.ts replayQueryKeys); set on a denial. */
  queryKeys?: { readonly keys: readonly string[]; readonly truncated: boolean };
  /** The network middleware entries run: each of their findings is a FINDING beside the decision event. */
  middlewares?: readonly MiddlewareInvocation[];
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
    engine: 'protocol',
    detail: NOT_UNDERSTOOD_DETAIL,
    policy: undefined,
    generation: undefined,
    policyHash: undefined,
    srcIp: src.remoteAddress,
    srcPort: src.remotePort,
    status: undefined,
    extra: undefined,
  };
}

/**
 * Settles the outcome: verdict, closed reason, the sentence for the event and the status sent, together and
 * only here. Mutates `o` (one object per request, no settlement object built). `status` is explicit: pass
 * `o.status` to keep one already recorded (an upstream's answer), `undefined` when nothing was sent.
 */
export function settle(o: Outcome, verdict: OutcomeVerdict, reason: ReasonCode, detail: string, status: number | undefined): void {
  o.verdict = verdict;
  o.reason = reason;
  // A client that left keeps the engine of the decision that let its request go.
  if (REASON_ENGINES[reason] !== 'decision') o.engine = engineOf(reason, undefined);
  o.detail = detail;
  o.status = status;
}

/** Why the HTTP parser rejected a request head: the client-errors metric's closed `reason` set. */
export const CLIENT_ERROR_REASONS = ['head-too-large', 'timeout', 'reset', 'malformed'] as const;
export type ClientErrorReason = (typeof CLIENT_ERROR_REASONS)[number];

/** Why a connection was refused before any request was read (proxy/admission.ts). */
export const REFUSED_CONNECTION_REASONS = ['too-many-connections', 'too-many-connections-from-source'] as const;
export type RefusedConnectionReason = (typeof REFUSED_CONNECTION_REASONS)[number];

/** The listeners a connection is admitted by: the proxy's, or the transparent capture listeners together. */
export const ADMISSION_LISTENERS = ['proxy', 'transparent'] as const;
export type AdmissionListener = (typeof ADMISSION_LISTENERS)[number];

const ACTION = { allow: 'ALLOWED', audit: 'ALLOWED', deny: 'DENIED', fail: undefined } as const;
const STATUS_WORD = { allow: 'allowed', audit: 'audit', deny: 'denied', fail: 'failed' } as const;
const LABELS = ['CONNECT', 'CONNECT_L7', 'FORWARD', 'L7_REQUEST'] as const;
/** `<label> <status word>` by label and verdict, made once: every event then carries the same string, which
 *  the audit sink's memo compares by identity and the renderers find already hashed. */
const STATUS_DETAILS: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map(
  LABELS.map((label) => [label, new Map(OUTCOME_VERDICTS.map((verdict) => [verdict, `${label} ${STATUS_WORD[verdict]}`]))]),
);

const requestTexts = createEventTexts();

/** Renders the outcome as an AuditEvent (docs/events.md#what-is-emitted). Never includes a query string. */
export function outcomeEvent(o: Outcome): AuditEvent {
  const action = ACTION[o.verdict];
  const severity = o.severity ?? (o.verdict === 'deny' ? 'MED' : o.verdict === 'fail' ? 'LOW' : 'INFO');
  // With its status in the literal: the extra fields then fit the first property store added to it.
  const unmapped: Record<string, unknown> =
    o.status === undefined
      ? { adapter: o.adapter, verdict: o.verdict, reason_code: o.reason }
      : { adapter: o.adapter, verdict: o.verdict, reason_code: o.reason, status_code: o.status };
  if (o.extra !== undefined) Object.assign(unmapped, o.extra);
  if (o.verdict === 'deny' && o.host !== undefined && o.port !== undefined) unmapped.replay = replayOf(o, o.host, o.port);
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
  const host = o.host;
  // A request's texts are the strings made for the last one with the same parts (event-texts.ts).
  const texts = net || host === undefined ? undefined : requestTexts(statusDetail, o.method, host, o.port, o.path ?? '', o.scheme ?? 'http');
  const cls = net ? 'NET' : 'HTTP';
  const activity = net ? (o.verdict === 'fail' ? 'FAIL' : 'OPEN') : o.method;
  const message = texts === undefined ? (net ? `${statusDetail} ${target(host, o.port)}` : `${statusDetail} ${o.method} -${o.path ?? ''}`) : texts.message;
  const { engine, detail, policy, generation, policyHash } = o;
  // An allowed request has every field: one literal, in the key order the assignments below give.
  if (action !== undefined && policy !== undefined && generation !== undefined && policyHash !== undefined && texts !== undefined) {
    const http = { method: o.method, url: texts.url };
    return { class: cls, activity, statusDetail, message, severity, engine, dst, src, detail, unmapped, action, policy, generation, policyHash, http };
  }
  const event: {
    -readonly [K in keyof AuditEvent]: AuditEvent[K];
  } = { class: cls, activity, statusDetail, message, severity, engine, dst, src, detail, unmapped };
  if (action !== undefined) event.action = action;
  if (o.policy !== undefined) event.policy = o.policy;
  if (o.generation !== undefined) event.generation = o.generation;
  if (o.policyHash !== undefined) event.policyHash = o.policyHash;
  if (texts !== undefined) event.http = { method: o.method, url: texts.url };
  return event;
}

/** What explain needs to ask the same question again (docs/events.md#replaying-a-denial); denials only. */
function replayOf(o: Outcome, host: string, port: number): ReplayFields {
  // The executable the denial was decided for (docs/identity.md#explain): explain asks with it again.
  const binary = typeof o.extra?.binary === 'string' ? { binary: o.extra.binary } : {};
  if (o.kind === 'net' || o.path === undefined) return { host, port, ...binary };
  const queryKeys = o.queryKeys === undefined || o.queryKeys.keys.length === 0 ? {} : { query_keys: o.queryKeys.keys };
  const truncated = o.queryKeys?.truncated === true ? { query_keys_truncated: true as const } : {};
  return { scheme: o.scheme ?? 'http', method: o.method, host, port, path: o.path, ...queryKeys, ...truncated, ...binary };
}

export function emitOutcome(sink: AuditSink, metrics: ProxyMetrics, o: Outcome): void {
  metrics.countOutcome(o);
  sink.emit(outcomeEvent(o));
  if (o.middlewares !== undefined) for (const event of middlewareFindingEvents(o, o.middlewares)) sink.emit(event);
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
    detail: o.detail,
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
    // A reload's decision closed it; a shutdown is no engine's.
    ...(relay.reason === 'policy-changed' ? { engine: 'policy' as const } : {}),
    dst: { host: relay.host, port: relay.port },
    message: `${relay.what} to ${formatAuthority(relay.host, relay.port)} closed: ${relay.reason}`,
    detail: relay.reason,
    generation: policy.generation,
    policyHash: policy.hash,
    ...(relay.unmapped === undefined ? {} : { unmapped: relay.unmapped }),
  };
}
