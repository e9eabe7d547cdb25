// The one decision event of a request or connection, built once from what its stages recorded (request.ts): the verdict that
// stands, the policy and rule it rests on, the identity it was made with, what the upstream answered. Nothing else
// writes a request's event fields. Rendered by proxy/events.ts outcomeEvent as HTTP Activity.

import { formatAuthority } from '../net/host.js';
import type { Mapping } from '../net/synthetic.js';
import { addIdentityFields } from './identity-gate.js';
import { callEventFields } from './jsonrpc-denial.js';
import { lookupFields } from './lookup-refusal.js';
import { tunnelTargetOf } from './dial.js';
import { invocationFields } from '../middleware/outcome.js';
import { engineOf, NOT_UNDERSTOOD_DETAIL, type Outcome, outcomeEvent, type ReasonCode } from './events.js';
import type { AuditEvent } from '../telemetry/event.js';
import type { ConnectionRequest } from './connection.js';
import type { ChainRequest } from './request.js';

const H2_VERSION = '2';

/** Whether `o` has an own key, without a list of its keys (one event per request). */
function hasKeys(o: Record<string, unknown>): boolean {
  for (const key in o) if (Object.hasOwn(o, key)) return true;
  return false;
}

/** The request's Outcome for outcomeEvent and the proxy's metrics; call once, when the request is over. */
export function requestOutcome(r: ChainRequest): Outcome {
  const decision = r.decided ? r.decision : undefined;
  const settled = r.settled;
  const extra: Record<string, unknown> = {};
  if (decision !== undefined) {
    extra.rule = decision.rule;
    extra.endpoint = decision.endpoint?.id;
    addIdentityFields(extra, decision, r.identity);
    if (r.overrideMethod !== undefined) extra.method_override = r.overrideMethod;
    if (decision.calls !== undefined && decision.calls.length > 0) Object.assign(extra, callEventFields(decision.calls));
  }
  if (r.mcp !== undefined) {
    extra.mcp_protocol_version = r.mcp.revision;
    if (r.mcp.fallback) extra.mcp_protocol_version_fallback = true;
    if (r.mcpBootstrap) extra.mcp_bootstrap = true;
  }
  const dest = r.destinationFacts;
  if (dest !== undefined) {
    if (dest.plan !== undefined) extra.plan = dest.plan;
    if (dest.check !== undefined) extra.check = dest.check;
    extra.dropped = dest.dropped;
  }
  if (r.lookupRefusal !== undefined) Object.assign(extra, lookupFields(r.lookupRefusal));
  if (r.sigv4 !== undefined) extra.sigv4 = r.sigv4;
  if (r.upstream.dialFailure !== undefined) extra.dial_failure = r.upstream.dialFailure;
  if (r.upstream.proxyStatus !== undefined) extra.upstream_proxy_status = r.upstream.proxyStatus;
  if (r.credentialReason !== undefined) extra.credential_reason = r.credentialReason;
  if (r.credentialResponse !== undefined) extra.credential_response = r.credentialResponse;
  if (r.h2) extra.http_version = H2_VERSION;
  // One record per network middleware entry run (or passed over): key, implementation, decision, transformed, failure.
  if (r.middleware !== undefined) extra.middlewares = r.middleware.map(invocationFields);
  if (r.parserError !== undefined) extra.parser_error = r.parserError;
  const reason = settled?.reason ?? decision?.reason ?? 'bad-request';
  const ssrf = reason === 'ssrf-denied';
  const verdict = settled?.verdict ?? decision?.verdict ?? 'deny';
  const o: Outcome = {
    adapter: r.adapter,
    kind: 'http',
    method: r.method,
    host: r.host,
    port: r.port,
    path: r.path,
    verdict,
    reason,
    engine: engineOf(reason, (decision ?? r.l4)?.layer),
    detail: settled?.detail ?? decision?.detail ?? NOT_UNDERSTOOD_DETAIL,
    policy: ssrf ? undefined : decision?.policy,
    generation: r.policy?.generation,
    policyHash: r.policy?.hash,
    srcIp: r.src.ip,
    srcPort: r.src.port,
    status: settled === undefined ? r.upstream.status : settled.status,
    extra: hasKeys(extra) ? extra : undefined,
    scheme: r.scheme,
  };
  if (r.severity !== undefined) o.severity = r.severity;
  if (r.queryKeys !== undefined) o.queryKeys = r.queryKeys;
  if (r.middleware !== undefined) o.middlewares = r.middleware;
  return o;
}

/** docs/dns.md#correlation-fields: what ties a captured connection to the DNS answer that made it possible. */
function mappingFields(c: ConnectionRequest, m: Mapping): Record<string, unknown> {
  return {
    mapping_id: m.id,
    mapping_generation: m.mappingGeneration,
    mapping_policy_generation: m.policyGeneration,
    normalized_domain: m.name,
    address_family: m.family === 4 ? 'ipv4' : 'ipv6',
    approved_real_ip_candidates: m.addresses,
    allowed_ports: m.ports,
    logical_destination: formatAuthority(m.name, c.syntheticPort),
  };
}

/** A connection's Outcome (Network Activity) for outcomeEvent and the proxy's metrics; call once, when it opened or was refused. */
export function connectionOutcome(c: ConnectionRequest): Outcome {
  const capture = c.adapter === 'capture';
  const extra: Record<string, unknown> = {};
  if (capture) {
    extra.synthetic_ip = c.syntheticIp;
    extra.synthetic_destination = formatAuthority(c.syntheticIp, c.syntheticPort);
    if (c.policy !== undefined) extra.authorization_policy_generation = c.policy.generation;
    if (c.mapping !== undefined) Object.assign(extra, mappingFields(c, c.mapping));
  }
  const decision = c.decision;
  if (decision !== undefined) {
    if (!capture || c.endpoint !== undefined) extra.endpoint = c.endpoint?.id ?? decision.endpoint?.id;
    addIdentityFields(extra, decision, c.identity);
    if (c.settled?.reason !== decision.reason || decision.verdict !== 'deny') extra.inspect = c.inspect;
  }
  const dest = c.destinationFacts;
  if (dest !== undefined) {
    if (dest.plan !== undefined) extra.plan = dest.plan;
    if (dest.check !== undefined) extra.check = dest.check;
    if (!capture || dest.dropped.length > 0) extra.dropped = dest.dropped;
  }
  if (c.lookupRefusal !== undefined) Object.assign(extra, lookupFields(c.lookupRefusal));
  if (c.dialFailure !== undefined) extra.dial_failure = c.dialFailure;
  if (c.proxyStatus !== undefined) extra.upstream_proxy_status = c.proxyStatus;
  const settled = c.settled;
  const opened = settled !== undefined && (settled.verdict === 'allow' || settled.verdict === 'audit');
  if (opened && !capture) extra.addresses = c.addresses;
  // Through the upstream proxy the socket's peer is the proxy; the tunnel's target is the address reached.
  const tunnel = opened && c.upstream !== undefined ? tunnelTargetOf(c.upstream) : undefined;
  if (opened && capture && c.upstream !== undefined) {
    const peer = formatAuthority(c.upstream.remoteAddress ?? '', c.upstream.remotePort ?? (c.port as number));
    extra.connected_real_destination = tunnel === undefined ? peer : formatAuthority(tunnel.host, tunnel.port);
    extra.upstream_socket_peer = peer;
  }
  if (opened && c.upstream !== undefined && (capture || tunnel !== undefined)) extra.dial_mode = tunnel === undefined ? 'direct' : 'upstream-proxy';
  const reason = settled?.reason ?? 'bad-request';
  return {
    adapter: c.adapter,
    kind: 'net',
    method: 'CONNECT',
    host: c.host ?? (capture ? c.syntheticIp : undefined),
    port: c.port,
    path: undefined,
    verdict: settled?.verdict ?? 'deny',
    reason,
    engine: engineOf(reason, decision?.layer),
    detail: settled?.detail ?? NOT_UNDERSTOOD_DETAIL,
    policy: reason === 'ssrf-denied' ? undefined : decision?.policy,
    generation: c.policy?.generation,
    policyHash: c.policy?.hash,
    srcIp: c.src.ip,
    srcPort: c.src.port,
    status: settled?.status,
    extra,
  };
}

/** `status_detail` of the one NET:OPEN (or NET:FAIL) event per captured connection. */
const CAPTURE_DETAILS: Readonly<Partial<Record<ReasonCode, string>>> = {
  'mapping-missing': 'transparent_tcp_mapping_missing',
  'mapping-expired': 'transparent_tcp_mapping_expired',
  'stale-policy': 'transparent_tcp_stale_policy',
  'policy-changed': 'transparent_tcp_stale_policy',
  'port-mismatch': 'transparent_tcp_port_mismatch',
  'dial-failed': 'transparent_tcp_dial_failed',
  'upstream-proxy-refused': 'transparent_tcp_dial_failed',
  'upstream-proxy-unreachable': 'transparent_tcp_dial_failed',
  'upstream-proxy-timeout': 'transparent_tcp_dial_failed',
  'upstream-proxy-malformed': 'transparent_tcp_dial_failed',
};

/** A captured connection's one event: Network Activity with capture's own status detail and message. */
export function captureEvent(c: ConnectionRequest): AuditEvent {
  const o = connectionOutcome(c);
  const base = outcomeEvent(o);
  const word = o.verdict === 'fail' ? 'failed' : o.verdict === 'deny' ? 'denied' : 'allowed';
  const detail = word === 'allowed' ? 'transparent_tcp_allowed' : (CAPTURE_DETAILS[o.reason] ?? 'transparent_tcp_destination_denied');
  const logical = c.mapping === undefined ? '' : ` -> ${formatAuthority(c.mapping.name, c.syntheticPort)}`;
  return { ...base, statusDetail: detail, message: `TRANSPARENT ${word} ${formatAuthority(c.syntheticIp, c.syntheticPort)}${logical}` };
}
