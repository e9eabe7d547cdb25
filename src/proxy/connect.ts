// CONNECT host:port (docs/destinations.md#connect): strict authority, L4 decision, one resolution + SSRF validation, the
// CA check for inspected routes, a pinned dial, then `200` and the tunnel: raw relay, TLS termination or a
// plaintext HTTP relay, each request then going through the shared evaluator. One NET event per CONNECT,
// plus NET:CLOSE / NET:RESET when its tunnel ends on the idle timeout or a reset.

import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { isLookupRefused, isResolveFailure } from '../net/destination.js';
import { formatAuthority, parseAuthority } from '../net/host.js';
import { timedDecide } from './metrics.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { Decision, Policy } from '../policy/types.js';
import type { AuditEvent } from '../telemetry/event.js';
import { decisionNeedsInspection, destination, type ProxyContext, type TunnelScope } from './context.js';
import {
  connectPolicyDenial,
  policyChangedDenial,
  ssrfDenial,
  tlsUnavailableDenial,
  uninspectedCredentialsDenial,
  unsupportedL7Denial,
  upstreamUnreachableDenial,
  renderDenial,
  writeBareStatusToSocket,
  writeDenialToSocket,
} from './deny.js';
import { credentialRoute } from './credential-injection.js';
import { refuseLookup } from './lookup-refusal.js';
import { dialPinned, recordDialFailure } from './dial.js';
import { identityFields, identityFinding } from './identity-gate.js';
import { beginOutcome, emitOutcome, findingEvent, NOT_UNDERSTOOD_DETAIL, type Outcome, relayClosedEvent, settle } from './events.js';
import { MAX_HEADER_COUNT } from '../http1/framing.js';
import { terminateTls } from '../tls/intercept.js';
import type { RawRelay } from './sni-gate.js';
import { sniff } from '../tls/sniff.js';
import { type PinnedTunnel, relayRaw, type TunnelEndCause } from './tunnel.js';

/** docs/destinations.md#limits: a CONNECT head beyond this is a 431. */
const MAX_CONNECT_HEAD_BYTES = 8_192;

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

function headBytes(req: IncomingMessage): number {
  let n = (req.method?.length ?? 0) + (req.url?.length ?? 0) + 12;
  for (const part of req.rawHeaders) n += part.length + 2;
  return n + 2;
}

/** An authorised, dialled connection (CONNECT or transparent capture), ready for startTunnel. */
export interface Opened {
  readonly host: string;
  readonly port: number;
  readonly addresses: readonly string[];
  readonly decision: Decision;
  readonly inspect: boolean;
  readonly upstream: Socket;
  /** The claim it was decided with; its requests and any reload are decided with the same one. */
  readonly identity: IdentityClaim | undefined;
}

/** The 'connect' handler of the shared HTTP server. */
/** An unexpected error while opening a tunnel fails that one connection only (RX-15), recorded on its outcome. */
export function failOpening(ctx: ProxyContext, o: Outcome, socket: Socket, what: string): (err: unknown) => undefined {
  return (err) => {
    ctx.logger.warn({ err }, what);
    settle(o, 'fail', 'upstream-failed', err instanceof Error ? err.message : String(err), o.status);
    socket.destroy();
    return undefined;
  };
}

export function createConnectHandler(ctx: ProxyContext) {
  return function handleConnect(req: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const o = beginOutcome('connect', 'net', socket);
    open(ctx, req, socket, o)
      .catch(failOpening(ctx, o, socket, 'CONNECT failed'))
      .then((opened) => {
        emitOutcome(ctx.sink, ctx.metrics, o);
        if (opened !== undefined) startTunnel(ctx, socket, head, opened, o);
      });
  };
}

async function open(ctx: ProxyContext, req: IncomingMessage, socket: Socket, o: Outcome): Promise<Opened | undefined> {
  // A CONNECT inside a tunnel would nest tunnels with no decision of their own.
  if (ctx.scopes.has(socket) || headBytes(req) > MAX_CONNECT_HEAD_BYTES || req.rawHeaders.length / 2 > MAX_HEADER_COUNT) {
    const status = ctx.scopes.has(socket) ? 400 : 431;
    settle(o, 'deny', status === 431 ? 'head-too-large' : 'bad-request', NOT_UNDERSTOOD_DETAIL, status);
    writeBareStatusToSocket(socket, status);
    return undefined;
  }
  const auth = parseAuthority(req.url ?? '', { hosts: ctx.hosts });
  if (!auth.ok) {
    settle(o, 'deny', 'bad-request', `bad CONNECT target: ${auth.message}`, 400);
    writeBareStatusToSocket(socket, 400);
    return undefined;
  }
  const { host, port, kind } = auth;
  const target = formatAuthority(host, port);
  o.host = host;
  o.port = port;
  const policy = ctx.store.current();
  o.generation = policy.generation;
  o.policyHash = policy.hash;
  // docs/identity.md: looked up only when an endpoint at host:port lists binaries; one lookup for the whole tunnel.
  const identity = await ctx.identity?.forDestination(socket, policy, host, port);
  const decision = timedDecide(ctx.metrics, policy, { adapter: 'connect', host, port, identity });
  o.policy = decision.policy;
  o.extra = { endpoint: decision.endpoint?.id, ...identityFields(decision, identity) };
  if (decision.verdict === 'deny') {
    settle(o, 'deny', decision.reason, decision.detail, 403);
    writeDenialToSocket(socket, connectPolicyDenial(host, port, target, decision, { policy, adapter: 'connect' }));
    const finding = identityFinding(decision);
    if (finding !== undefined) ctx.sink.emit(findingEvent(o, finding));
    return undefined;
  }
  // A credentialed route is terminated even on an L4 endpoint, so placeholders are rewritten (or refused)
  // per request; one that cannot be inspected is refused below, after the SSRF and CA checks (docs/destinations.md#connect step 7).
  const route = credentialRoute(ctx.credentials, decision, host, port);
  const inspect = decisionNeedsInspection(decision) || route === 'inspect';
  o.extra.inspect = inspect;
  const dest = await destination(ctx, { host, kind, port, endpoint: decision.endpoint, endpoints: decision.endpoints });
  if (isLookupRefused(dest)) {
    writeDenialToSocket(socket, refuseLookup(o, target, dest.refusal));
    return undefined;
  }
  if (isResolveFailure(dest)) {
    settle(o, 'fail', 'resolve-failed', dest.message, 502);
    writeDenialToSocket(socket, upstreamUnreachableDenial(target, dest.failure));
    return undefined;
  }
  if (!dest.ok) {
    // SSRF wins over a missing CA (CP-17): checked first.
    o.engine = 'ssrf';
    o.policy = undefined;
    settle(o, 'deny', 'ssrf-denied', dest.message, 403);
    o.extra = { ...o.extra, plan: dest.plan, check: dest.check, dropped: dest.dropped.map((d) => `${d.ip} ${d.class}`) };
    writeDenialToSocket(socket, ssrfDenial(target, dest.check, dest.message));
    return undefined;
  }
  if (dest.dropped.length > 0) o.extra.dropped = dest.dropped.map((d) => `${d.ip} ${d.class}`);
  if (inspect && !ctx.interception.ready()) {
    o.engine = 'tls';
    settle(o, 'deny', 'tls-unavailable', `${target} needs inspection but the interception CA is unavailable`, 503);
    writeDenialToSocket(socket, tlsUnavailableDenial(target));
    return undefined;
  }
  if (route === 'refuse') {
    o.engine = 'credentials';
    settle(o, 'deny', 'uninspected-credentials', `${target} carries credentials but its route is not inspected`, 403);
    writeDenialToSocket(socket, uninspectedCredentialsDenial(target));
    ctx.sink.emit(findingEvent(o, 'uninspected-credentials'));
    return undefined;
  }
  let upstream: Socket;
  try {
    upstream = await dialPinned({ addresses: dest.addresses, port, dial: ctx.dial, timeoutMs: ctx.connectTimeoutMs, metrics: ctx.metrics });
  } catch (err) {
    // docs/destinations.md#connect step 8: a CONNECT dial failure closes the socket with no HTTP response.
    recordDialFailure(o, target, err);
    socket.destroy();
    return undefined;
  }
  // A reload that landed while resolving or dialling: the new generation decides again, exactly as it does for
  // the tunnels already open, and only a changed decision (denied, other endpoint or inspection, addresses no
  // longer valid) refuses; a reload of unrelated endpoints does not.
  const pinned = { host, port, addresses: dest.addresses, endpointId: decision.endpoint?.id, inspect, identity };
  if (!stillCurrent(ctx, policy, pinned)) {
    upstream.destroy();
    settle(o, 'deny', 'policy-changed', 'policy changed while connecting', 403);
    writeDenialToSocket(socket, policyChangedDenial(target));
    return undefined;
  }
  if (socket.destroyed) {
    upstream.destroy();
    settle(o, 'fail', 'client-closed', 'client closed before the tunnel opened', undefined);
    return undefined;
  }
  socket.write(ESTABLISHED);
  settle(o, 'allow', decision.reason, decision.detail, 200);
  o.extra.addresses = dest.addresses;
  return { host, port, addresses: dest.addresses, decision, inspect, upstream, identity };
}

/** Whether the connection pinned under `policy` may open under the store's current policy (docs/destinations.md#connect). */
export function stillCurrent(ctx: ProxyContext, policy: Policy, pinned: Omit<PinnedTunnel, 'close'>): boolean {
  const current = ctx.store.current();
  if (current.generation === policy.generation) return true;
  return ctx.tunnels.survives(current, pinned, { allowLoopback: ctx.allowLoopback, selfAddresses: ctx.selfAddresses() });
}

/**
 * Registers the tunnel (closed when a reload changes its decision) and runs it: `relay` for uninspected
 * routes, TLS termination or plaintext HTTP otherwise. Shared with transparent capture (capture.ts).
 */
export function startTunnel(ctx: ProxyContext, socket: Socket, head: Buffer, opened: Opened, o: Outcome, relay: RawRelay = relayRaw): void {
  const { host, port, addresses, decision, inspect, upstream, identity } = opened;
  ctx.metrics.tunnels.inc();
  let removed = false;
  const sockets: Socket[] = [socket, upstream];
  const remove = ctx.tunnels.add({
    host,
    port,
    addresses,
    endpointId: decision.endpoint?.id,
    inspect,
    identity,
    close(reason) {
      if (reason === 'policy-changed') ctx.metrics.reloadClosed.inc({});
      ctx.sink.emit(relayClosedEvent(ctx.store.current(), { what: 'tunnel', host, port, reason }));
      for (const s of sockets) s.destroy();
    },
  });
  const done = (cause?: TunnelEndCause): void => {
    if (removed) return;
    removed = true;
    remove();
    ctx.metrics.tunnels.dec();
    // A clean close on both sides is not worth a line; an idle timeout or a reset is (RX-05, RX-10).
    if (cause !== undefined) ctx.sink.emit(tunnelEndEvent(o, host, port, cause));
  };
  upstream.on('error', () => upstream.destroy());
  if (!inspect) {
    if (head.length > 0) upstream.write(head);
    relay(socket, upstream, ctx.tunnelIdleTimeoutMs, done);
    return;
  }
  inspectTunnel(ctx, socket, head, opened, o, sockets, done).catch((err: unknown) => {
    ctx.logger.warn({ err }, 'tunnel inspection failed');
    for (const s of sockets) s.destroy();
    done();
  });
}

async function inspectTunnel(ctx: ProxyContext, socket: Socket, head: Buffer, opened: Opened, o: Outcome, sockets: Socket[], done: (cause?: TunnelEndCause) => void): Promise<void> {
  const { host, port, addresses, upstream, identity } = opened;
  let idle = false;
  socket.setTimeout(ctx.tunnelIdleTimeoutMs, () => {
    idle = true;
    socket.destroy();
  });
  const kind = await sniff(socket, head);
  if (kind !== 'tls' && kind !== 'http' && kind !== 'h2') {
    upstream.destroy();
    if (kind === 'unknown') {
      // docs/destinations.md#connect step 9: unsupported bytes on an L7 route get a 403, never a raw relay.
      socket.end(renderDenial(unsupportedL7Denial('unrecognised bytes on an inspected route')));
      ctx.sink.emit(findingEvent({ ...o, engine: 'l7', detail: `${kind} bytes on an inspected route` }, 'unsupported-l7-protocol'));
    } else socket.destroy();
    done(idle ? 'idle-timeout' : undefined);
    return;
  }
  let inner: Socket = socket;
  if (kind === 'tls') {
    const terminated = await terminateTls(ctx, socket, host);
    if (!terminated.ok) {
      upstream.destroy();
      const finding = findingEvent({ ...o, engine: 'tls', detail: terminated.detail }, terminated.failure);
      // A client without the CA bundle is a setup problem with a known fix, not an attack: MED, with the hint as detail.
      ctx.sink.emit(terminated.failure === 'client-rejected-ca' ? { ...finding, severity: 'MED', statusDetail: 'tls_client_rejected_ca' } : finding);
      done();
      return;
    }
    inner = terminated.socket;
    sockets.push(inner);
  }
  // docs/destinations.md#http2: ALPN h2 after termination, or the cleartext preface (prior knowledge): each stream is
  // one request. The dialled upstream may end up in a session other tunnels share, so closing this one leaves it.
  if (kind === 'h2' || (inner as TLSSocket).alpnProtocol === 'h2') {
    sockets.splice(sockets.indexOf(upstream), 1);
    const target = { host, port, tls: kind === 'tls', addresses, identity, socket };
    ctx.serveH2(inner, { target, upstream, src: socket }, () => done(idle ? 'idle-timeout' : undefined));
    return;
  }
  const client = ctx.upstreams.tunnelClient({ host, port, addresses, tls: kind === 'tls' }, upstream);
  const scope: TunnelScope = { host, port, tls: kind === 'tls', addresses, client, identity, socket };
  ctx.scopes.set(inner, scope);
  inner.once('close', () => {
    client.destroy();
    upstream.destroy();
    done(idle ? 'idle-timeout' : undefined);
  });
  ctx.serveHttp(inner);
}

/** NET:CLOSE (idle timeout) or NET:RESET (a side reset or failed) for a tunnel that ended abnormally. */
function tunnelEndEvent(o: Outcome, host: string, port: number, cause: TunnelEndCause): AuditEvent {
  return {
    class: 'NET',
    activity: cause === 'idle-timeout' ? 'CLOSE' : 'RESET',
    severity: cause === 'idle-timeout' ? 'INFO' : 'LOW',
    engine: 'opa',
    dst: { host, port },
    src: { ...(o.srcIp === undefined ? {} : { ip: o.srcIp }), ...(o.srcPort === undefined ? {} : { port: o.srcPort }) },
    message: `tunnel to ${formatAuthority(host, port)} closed: ${cause}`,
    detail: cause,
    ...(o.generation === undefined ? {} : { generation: o.generation }),
    ...(o.policyHash === undefined ? {} : { policyHash: o.policyHash }),
    unmapped: { adapter: o.adapter, reason_code: cause },
  };
}
