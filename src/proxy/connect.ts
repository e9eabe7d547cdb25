// The CONNECT adapter (docs/destinations.md#connect): the connection chain decides and dials (chain/connection-chain.ts),
// this answers `200` or the refusal, then runs the tunnel, shared with transparent capture: raw relay, TLS termination
// or a plaintext HTTP relay whose every request runs the request chain. One NET event per CONNECT, plus NET:CLOSE /
// NET:RESET when its tunnel ends on the idle timeout or a reset.

import type { H1IncomingRequest } from '../http1/h1-server.js';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { connectionOutcome } from '../chain/event.js';
import type { ConnectionChain } from '../chain/connection-chain.js';
import { ConnectionRequest } from '../chain/connection.js';
import { refusal, type Refusal } from '../chain/stage.js';
import { formatAuthority } from '../net/host.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { Decision } from '../policy/types.js';
import type { AuditEvent } from '../telemetry/event.js';
import type { ProxyContext, TunnelScope } from './context.js';
import { renderDenial, writeBareStatusToSocket, writeDenialToSocket } from './answer.js';
import { unsupportedL7Denial } from '../chain/denials.js';
import { emitOutcome, findingEvent, type Outcome, relayClosedEvent } from '../chain/events.js';
import { type TerminationFailure, terminateTls } from '../tls/intercept.js';
import { decisionNeedsInspection } from '../chain/inspection.js';
import { uninspectableAllowed, uninspectableFindingEvent } from '../chain/middleware-route.js';
import type { RawRelay } from './sni-gate.js';
import { sniff } from '../tls/sniff.js';
import { relayRaw, type TunnelEndCause } from './tunnel.js';

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

/**
 * Failed terminations that are no attack, below the finding's HIGH: a client without the CA bundle is a setup
 * problem with a known fix (the hint is the detail); a client that left mid-handshake is most often one that gave up.
 */
const TERMINATION_FINDINGS: Readonly<Partial<Record<TerminationFailure, Pick<AuditEvent, 'severity' | 'statusDetail'>>>> = {
  'client-rejected-ca': { severity: 'MED', statusDetail: 'tls_client_rejected_ca' },
  'tls-client-closed': { severity: 'LOW', statusDetail: 'tls_client_closed' },
};

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
  /**
   * Inspected only because network middlewares select the host, each allowing what it cannot read: bytes that are
   * not TLS or HTTP are relayed raw with a finding instead of refused.
   */
  readonly rawFallback: boolean;
}

/** What the connection chain opened. */
export function openedOf(c: ConnectionRequest): Opened {
  const host = c.host as string;
  const decision = c.decision!;
  const onlyMiddleware = c.middlewareRoute === 'inspect' && !decisionNeedsInspection(decision) && c.credentialRoute !== 'inspect';
  const rawFallback = onlyMiddleware && uninspectableAllowed(c.policy!, host);
  return { host, port: c.port as number, addresses: c.addresses, decision, inspect: c.inspect, upstream: c.upstream!, identity: c.identity, rawFallback };
}

/** A finding for a connection relayed past the middlewares that select it (tls: skip, raw TCP). */
export function uninspectedRelayFinding(ctx: ProxyContext, c: ConnectionRequest, o: Outcome): void {
  if (c.middlewareRoute !== 'relay-uninspected') return;
  ctx.sink.emit(uninspectableFindingEvent(o, `${formatAuthority(c.host as string, c.port as number)} relayed without network middleware: its endpoint cannot be inspected`));
}

/** Runs a connection chain; an unexpected error fails that one connection only (RX-15), recorded as its result. */
export function runConnectionChain(ctx: ProxyContext, chain: ConnectionChain, c: ConnectionRequest, what: string): Promise<Refusal | undefined> {
  const failed = (err: unknown): Refusal => {
    ctx.logger.warn({ err }, what);
    const refused = refusal('fail', 'upstream-failed', err instanceof Error ? err.message : String(err), undefined);
    c.upstream?.destroy();
    c.settle(refused);
    c.socket.destroy();
    return refused;
  };
  try {
    return Promise.resolve(chain.run(c)).catch(failed);
  } catch (err) {
    return Promise.resolve(failed(err));
  }
}

/** The 'connect' handler of the shared HTTP server. */
export function createConnectHandler(ctx: ProxyContext) {
  return function handleConnect(req: H1IncomingRequest, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const c = new ConnectionRequest({ adapter: 'connect', socket, url: req.url ?? '', rawHeaders: req.rawHeaders });
    void runConnectionChain(ctx, ctx.connectChain, c, 'CONNECT failed').then((refused) => {
      if (refused === undefined) {
        socket.write(ESTABLISHED);
        const decision = c.decision!;
        c.allow('allow', decision.reason, decision.detail, 200);
      } else if (refused.denial !== undefined) writeDenialToSocket(socket, refused.denial, ctx.peerPolicyHeader);
      else if (refused.status !== undefined) writeBareStatusToSocket(socket, refused.status);
      const o = connectionOutcome(c);
      emitOutcome(ctx.sink, ctx.metrics, o);
      if (refused?.finding !== undefined) ctx.sink.emit(findingEvent(o, refused.finding));
      if (refused !== undefined) return;
      uninspectedRelayFinding(ctx, c, o);
      startTunnel(ctx, socket, head, openedOf(c), o);
    });
  };
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
  if (kind === 'unknown' && opened.rawFallback) {
    // Not HTTP: middleware cannot read it, and every entry selecting the host lets such traffic through.
    // sniff() put the bytes it read (the CONNECT's own head included) back on the socket: the relay sends them first.
    ctx.sink.emit(uninspectableFindingEvent(o, `bytes to ${formatAuthority(host, port)} are not HTTP; relayed without network middleware`));
    relayRaw(socket, upstream, ctx.tunnelIdleTimeoutMs, done);
    return;
  }
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
      ctx.sink.emit({ ...finding, ...TERMINATION_FINDINGS[terminated.failure] });
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
    dst: { host, port },
    src: { ...(o.srcIp === undefined ? {} : { ip: o.srcIp }), ...(o.srcPort === undefined ? {} : { port: o.srcPort }) },
    message: `tunnel to ${formatAuthority(host, port)} closed: ${cause}`,
    detail: cause,
    ...(o.generation === undefined ? {} : { generation: o.generation }),
    ...(o.policyHash === undefined ? {} : { policyHash: o.policyHash }),
    unmapped: { adapter: o.adapter, reason_code: cause },
  };
}
