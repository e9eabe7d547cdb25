// Transparent capture (docs/destinations.md#transparent-capture): a connection accepted on (synthetic IP, port) is named by its local
// address, re-decided against the current policy, and dialled to the mapping's pinned real addresses only,
// then run as a CONNECT tunnel would be. Never resolves a name; the SNI never picks the destination.

import type { Socket } from 'node:net';
import { formatAuthority } from '../net/host.js';
import { validateDestination } from '../net/ssrf.js';
import type { Mapping, MappingRoute, SyntheticLookup, SyntheticPool } from '../net/synthetic.js';
import { decide } from '../policy/decide.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { Decision, Endpoint, Policy } from '../policy/types.js';
import type { AuditEvent } from '../telemetry/event.js';
import { failOpening, type Opened, startTunnel, stillCurrent } from './connect.js';
import { decisionNeedsInspection, type ProxyContext } from './context.js';
import { credentialRoute } from './credential-injection.js';
import { dialPinned, recordDialFailure } from './dial.js';
import { identityFields, identityFinding } from './identity-gate.js';
import { beginOutcome, findingEvent, type Outcome, type OutcomeReason, outcomeEvent, type ReasonCode, settle } from './events.js';
import { sniGatedRelay } from './sni-gate.js';

/** `status_detail` of the one NET:OPEN (or NET:FAIL) event per captured connection. */
const CAPTURE_DETAILS = [
  'transparent_tcp_allowed',
  'transparent_tcp_mapping_missing',
  'transparent_tcp_mapping_expired',
  'transparent_tcp_stale_policy',
  'transparent_tcp_port_mismatch',
  'transparent_tcp_destination_denied',
  'transparent_tcp_dial_failed',
] as const;
type CaptureDetail = (typeof CAPTURE_DETAILS)[number];

/** Metric `reason` labels capture adds to the proxy's closed sets. */
export const CAPTURE_REASONS = ['mapping-missing', 'mapping-expired', 'stale-policy', 'port-mismatch', 'destination-denied'] as const satisfies readonly OutcomeReason[];

type CaptureCheck =
  | { readonly ok: true; readonly mapping: Mapping; readonly route: MappingRoute; readonly decision: Decision; readonly endpoint: Endpoint }
  | {
      readonly ok: false;
      readonly detail: CaptureDetail;
      readonly reason: ReasonCode;
      readonly message: string;
      readonly mapping?: Mapping;
      readonly decision?: Decision;
    };

/**
 * Steps 1-4 of docs/destinations.md#transparent-capture, pure: the mapping the local address names, and whether the current policy still
 * allows (name, port) through an endpoint that made the name eligible. A mapping from an older policy
 * generation stays usable exactly as long as the new policy allows it.
 */
export function checkCapture(policy: Policy, found: SyntheticLookup, port: number, identity?: IdentityClaim): CaptureCheck {
  if (found.state === 'missing') {
    return { ok: false, detail: 'transparent_tcp_mapping_missing', reason: 'mapping-missing', message: 'no synthetic mapping for this address in this epoch' };
  }
  const { mapping } = found;
  if (found.state === 'expired') {
    return { ok: false, detail: 'transparent_tcp_mapping_expired', reason: 'mapping-expired', message: `mapping for ${mapping.name} expired`, mapping };
  }
  const route = mapping.routes.find((r) => r.port === port);
  if (route === undefined) {
    return { ok: false, detail: 'transparent_tcp_port_mismatch', reason: 'port-mismatch', message: `port ${port} is not in the mapping of ${mapping.name}`, mapping };
  }
  const decision = decide(policy, { adapter: 'capture', host: mapping.name, port, identity });
  const inSet = (e: Endpoint | undefined): e is Endpoint => e !== undefined && route.endpointIds.includes(e.id);
  const endpoint = decision.verdict === 'deny' ? undefined : inSet(decision.endpoint) ? decision.endpoint : decision.endpoints.find(inSet);
  if (endpoint === undefined) {
    const stale = mapping.policyGeneration !== policy.generation;
    return {
      ok: false,
      detail: stale ? 'transparent_tcp_stale_policy' : 'transparent_tcp_destination_denied',
      reason: stale ? 'stale-policy' : decision.verdict === 'deny' ? decision.reason : 'destination-denied',
      message: decision.verdict === 'deny' ? decision.detail : `no endpoint of the decision made ${mapping.name} eligible (DNS correlation)`,
      mapping,
      decision,
    };
  }
  return { ok: true, mapping, route, decision, endpoint };
}

/** The ports of a mapping that the policy still allows: the listeners that should exist. */
export function allowedPorts(policy: Policy, mapping: Mapping): number[] {
  return mapping.ports.filter((port) => checkCapture(policy, { state: 'live', mapping }, port).ok);
}

/** docs/dns.md#correlation-fields: what ties a captured connection to the DNS answer that made it possible. */
function mappingFields(m: Mapping, port: number): Record<string, unknown> {
  return {
    mapping_id: m.id,
    mapping_generation: m.mappingGeneration,
    mapping_policy_generation: m.policyGeneration,
    normalized_domain: m.name,
    address_family: m.family === 4 ? 'ipv4' : 'ipv6',
    approved_real_ip_candidates: m.addresses,
    allowed_ports: m.ports,
    logical_destination: formatAuthority(m.name, port),
  };
}

function captureEvent(o: Outcome, detail: CaptureDetail): AuditEvent {
  const base = outcomeEvent(o);
  const synthetic = o.extra?.synthetic_destination;
  const logical = o.extra?.logical_destination;
  const word = o.verdict === 'fail' ? 'failed' : o.verdict === 'deny' ? 'denied' : 'allowed';
  return { ...base, statusDetail: detail, message: `TRANSPARENT ${word} ${String(synthetic)}${logical === undefined ? '' : ` -> ${String(logical)}`}` };
}

interface CaptureHandlerOptions {
  readonly ctx: ProxyContext;
  readonly pool: SyntheticPool;
}

/** The connection handler of every capture listener. */
export function createCaptureHandler(options: CaptureHandlerOptions) {
  const { ctx } = options;
  return function handleCapture(socket: Socket): void {
    socket.on('error', () => socket.destroy());
    const o = beginOutcome('capture', 'net', socket);
    let detail: CaptureDetail = 'transparent_tcp_destination_denied';
    const setDetail = (next: CaptureDetail): void => {
      detail = next;
    };
    admit(options, socket, o, setDetail)
      .catch(failOpening(ctx, o, socket, 'transparent capture failed'))
      .then((opened) => {
        ctx.metrics.countDecision('capture', o.verdict, o.reason);
        ctx.sink.emit(captureEvent(o, detail));
        if (opened === undefined) return;
        const refuseSni = (problem: string): void => {
          ctx.sink.emit(findingEvent({ ...o, engine: 'tls', detail: problem }, 'sni-mismatch'));
        };
        startTunnel(ctx, socket, Buffer.alloc(0), opened, o, opened.inspect ? undefined : sniGatedRelay(opened.host, refuseSni));
      });
  };
}

async function admit(options: CaptureHandlerOptions, socket: Socket, o: Outcome, setDetail: (d: CaptureDetail) => void): Promise<Opened | undefined> {
  const { ctx, pool } = options;
  const ip = socket.localAddress ?? '';
  const port = socket.localPort ?? 0;
  const fields: Record<string, unknown> = { synthetic_ip: ip, synthetic_destination: formatAuthority(ip, port) };
  o.extra = fields;
  o.host = ip;
  o.port = port;
  const policy = ctx.store.current();
  o.generation = policy.generation;
  o.policyHash = policy.hash;
  fields.authorization_policy_generation = policy.generation;
  const deny = (detail: CaptureDetail, reason: ReasonCode, message: string): undefined => {
    setDetail(detail);
    settle(o, 'deny', reason, message, undefined);
    // docs/destinations.md#transparent-capture: a refused capture is closed with no reply; the client sees the connection drop.
    socket.destroy();
    return undefined;
  };
  const found = pool.lookup(ip);
  // docs/identity.md: the process behind a live mapping's connection, when an endpoint of its name lists binaries.
  const identity = found.state === 'live' ? await ctx.identity?.forDestination(socket, policy, found.mapping.name, port) : undefined;
  const check = checkCapture(policy, found, port, identity);
  if (check.mapping !== undefined) {
    o.host = check.mapping.name;
    Object.assign(fields, mappingFields(check.mapping, port));
  }
  if (check.decision !== undefined) {
    o.policy = check.decision.policy;
    Object.assign(fields, identityFields(check.decision, identity));
  }
  if (!check.ok) {
    deny(check.detail, check.reason, check.message);
    const finding = check.decision === undefined ? undefined : identityFinding(check.decision);
    if (finding !== undefined) ctx.sink.emit(findingEvent(o, finding));
    return undefined;
  }
  const { mapping, route, decision, endpoint } = check;
  const host = mapping.name;
  o.policy = decision.policy;
  fields.endpoint = endpoint.id;
  const credentials = credentialRoute(ctx.credentials, decision, host, port);
  const inspect = decisionNeedsInspection(decision) || credentials === 'inspect';
  fields.inspect = inspect;
  // Pinned at DNS time and re-validated against the endpoint now; a real address inside our own window
  // would lead straight back into capture.
  const dest = validateDestination({
    endpoint,
    host,
    port,
    addresses: route.addresses.filter((a) => !pool.contains(a)),
    allowLoopback: ctx.allowLoopback,
    selfAddresses: ctx.selfAddresses(),
  });
  if (!dest.ok) {
    o.engine = 'ssrf';
    fields.check = dest.check;
    return deny('transparent_tcp_destination_denied', 'ssrf-denied', dest.message);
  }
  if (inspect && !ctx.interception.ready()) {
    o.engine = 'tls';
    return deny('transparent_tcp_destination_denied', 'tls-unavailable', `${formatAuthority(host, port)} needs inspection but the interception CA is unavailable`);
  }
  if (credentials === 'refuse') {
    o.engine = 'credentials';
    deny('transparent_tcp_destination_denied', 'uninspected-credentials', `${formatAuthority(host, port)} carries credentials but its route is not inspected`);
    ctx.sink.emit(findingEvent(o, 'uninspected-credentials'));
    return undefined;
  }
  let upstream: Socket;
  try {
    upstream = await dialPinned({ addresses: dest.addresses, port, dial: ctx.dial, timeoutMs: ctx.connectTimeoutMs, metrics: ctx.metrics });
  } catch (err) {
    setDetail('transparent_tcp_dial_failed');
    recordDialFailure(o, formatAuthority(host, port), err);
    socket.destroy();
    return undefined;
  }
  // As for CONNECT: a reload while dialling refuses only if it would have closed this connection once open.
  if (!stillCurrent(ctx, policy, { host, port, addresses: dest.addresses, endpointId: decision.endpoint?.id, inspect, identity })) {
    upstream.destroy();
    return deny('transparent_tcp_stale_policy', 'policy-changed', 'policy changed while connecting');
  }
  if (socket.destroyed) {
    upstream.destroy();
    settle(o, 'fail', 'client-closed', 'client closed before the upstream connection opened', undefined);
    return undefined;
  }
  setDetail('transparent_tcp_allowed');
  settle(o, decision.verdict === 'audit' ? 'audit' : 'allow', decision.reason, decision.detail, undefined);
  fields.connected_real_destination = formatAuthority(upstream.remoteAddress ?? '', upstream.remotePort ?? port);
  fields.upstream_socket_peer = fields.connected_real_destination;
  fields.dial_mode = 'direct';
  return { host, port, addresses: dest.addresses, decision, inspect, upstream, identity };
}
