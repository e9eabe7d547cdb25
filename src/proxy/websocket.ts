// WebSocket upgrades (forward and inside tunnels): the same evaluator decides the handshake; an allowed one
// is written to a pinned upstream connection and, after a 101, relayed. On a websocket endpoint or a
// credentialed route the client's frames are inspected (ws-relay.ts); otherwise the bytes are relayed raw.

import type { H1IncomingRequest } from '../http1/h1-server.js';
import type { Socket } from 'node:net';
import { requestOutcome } from '../chain/event.js';
import { ChainRequest } from '../chain/request.js';
import type { Refusal } from '../chain/stage.js';
import { credentialRefusal } from '../chain/stages/credentials.js';
import { redactPlaceholders } from '../credentials/placeholder.js';
import { decide } from '../policy/decide.js';
import type { Decision, Policy } from '../policy/types.js';
import type { ProxyContext } from './context.js';
import { staleRevision } from '../chain/credential-injection.js';
import { writeBareStatusToSocket, writeDenialToSocket } from './answer.js';
import { destroyAfterLinger } from './linger.js';
import { dialPinned } from '../chain/dial.js';
import { emitOutcome, findingEvent, relayClosedEvent } from '../chain/events.js';
import { BOUNDARY_HEADER_PREFIX } from '../http1/headers.js';
import { type PinnedTunnel, relayRaw } from './tunnel.js';
import { CLOSE_CODES } from '../websocket/ws-frames.js';
import { relayWebSocket, type WsSession } from './ws-relay.js';
import { failed, upstreamFailure } from './relay-request.js';

/** The upstream's handshake answer must fit in this. */
const MAX_UPGRADE_RESPONSE_HEAD_BYTES = 16_384;

function answer(ctx: ProxyContext, socket: Socket, r: ChainRequest, refused: Refusal): void {
  if (refused.denial === undefined) writeBareStatusToSocket(socket, refused.status ?? 400);
  else writeDenialToSocket(socket, refused.denial, ctx.peerPolicyHeader);
  if (refused.finding !== undefined) ctx.sink.emit(findingEvent(requestOutcome(r), refused.finding));
}

export function createUpgradeHandler(ctx: ProxyContext) {
  return function handleUpgrade(req: H1IncomingRequest, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const scope = ctx.scopes.get(socket);
    const hooks = { continueBody: () => undefined, goingUpstream: () => false };
    const r = new ChainRequest({
      adapter: scope === undefined ? 'forward' : 'l7',
      wire: req,
      hooks,
      tunnel: scope,
      src: socket,
      method: req.method ?? 'UNKNOWN',
      h2: false,
      upgradable: true,
      body: req,
    });
    upgrade(ctx, r, socket, head)
      .catch((err: unknown) => {
        failed(r, err);
        socket.destroy();
      })
      .finally(() => emitOutcome(ctx.sink, ctx.metrics, requestOutcome(r)));
  };
}

/** Reads the upstream's response head; resolves with it and any bytes after it. */
function readResponseHead(upstream: Socket): Promise<{ head: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const cleanup = (): void => {
      upstream.removeListener('data', onData);
      upstream.removeListener('end', onEnd);
      upstream.removeListener('error', onEnd);
    };
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end >= 0) {
        cleanup();
        upstream.pause();
        resolve({ head: buffered.toString('latin1', 0, end), rest: buffered.subarray(end + 4) });
      } else if (buffered.length > MAX_UPGRADE_RESPONSE_HEAD_BYTES) {
        cleanup();
        reject(new Error('upstream upgrade response head too large'));
      }
    };
    const onEnd = (): void => {
      cleanup();
      reject(new Error('upstream closed during the upgrade handshake'));
    };
    upstream.on('data', onData);
    upstream.once('end', onEnd);
    upstream.once('error', onEnd);
  });
}

async function upgrade(ctx: ProxyContext, r: ChainRequest, socket: Socket, head: Buffer): Promise<void> {
  const refused = await ctx.chain.run(r);
  if (refused !== undefined) {
    answer(ctx, socket, r, refused);
    return;
  }
  const host = r.host as string;
  const port = r.port as number;
  const { addresses, tls } = r.destination!;
  const decision = r.decision!;
  const endpoint = decision.endpoint;
  const upstreamHead = r.head!;
  const inspect = r.websocketInspected;
  const credentialed = upstreamHead.scope.boundKeys.length > 0;
  const headers = r.upstreamHeaders!;
  let upstream: Socket;
  try {
    const raw = await dialPinned({ addresses, port, name: host, dial: ctx.dial, timeoutMs: ctx.connectTimeoutMs, metrics: ctx.metrics });
    upstream = tls ? await ctx.upstreams.secureSocket(raw, { host, port }) : raw;
  } catch (err) {
    const refused = upstreamFailure(r, err instanceof Error ? err : new Error(String(err)), false);
    if (refused !== undefined) answer(ctx, socket, r, refused);
    return;
  }
  upstream.on('error', () => upstream.destroy());
  // The dial was awaited: the revision guard (docs/credentials.md#revision-guard) is checked again right before the write.
  const stale = staleRevision(upstreamHead);
  if (stale !== undefined) {
    upstream.destroy();
    const refused = credentialRefusal(r, stale);
    r.settle(refused);
    answer(ctx, socket, r, refused);
    return;
  }
  let text = `${r.method} ${upstreamHead.target} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  upstream.write(`${text}\r\n`);
  // Bytes the client sent with the handshake are frames: raw relays pass them now, inspected ones parse them.
  if (head.length > 0 && !inspect) upstream.write(head);
  const response = await readResponseHead(upstream);
  const lines = response.head.split('\r\n');
  const status = Number((lines[0] ?? '').split(' ')[1]);
  r.upstream.status = Number.isInteger(status) ? status : 502;
  // CR-03: upstream cannot speak as boundary. An inspected relay offered no extension, so none is accepted.
  const kept = lines.filter(
    (line, i) => i === 0 || !(line.toLowerCase().startsWith(BOUNDARY_HEADER_PREFIX) || (inspect && /^sec-websocket-extensions\s*:/i.test(line))),
  );
  socket.write(`${kept.join('\r\n')}\r\n\r\n`);
  if (response.rest.length > 0 && !(inspect && status === 101)) socket.write(response.rest);
  if (status !== 101) {
    // Refused handshake: pass the answer on, one way only. Nothing more from the client goes upstream: it is read and
    // dropped, so the client's FIN is seen, and the answer then gets the linger to finish rather than wait for an
    // origin that keeps its connection.
    upstream.pipe(socket);
    upstream.resume();
    socket.resume();
    socket.once('end', () => destroyAfterLinger(socket));
    socket.setTimeout(ctx.tunnelIdleTimeoutMs, () => socket.destroy());
    socket.once('close', () => upstream.destroy());
    return;
  }
  ctx.metrics.tunnels.inc();
  let removed = false;
  const done = (): void => {
    if (removed) return;
    removed = true;
    remove();
    ctx.metrics.tunnels.dec();
  };
  const target = r.target;
  const q = target.indexOf('?');
  const session: WsSession = {
    adapter: r.adapter,
    host,
    port,
    scheme: r.scheme,
    path: r.path ?? '/',
    query: q < 0 ? '' : redactPlaceholders(target.slice(q + 1)),
    endpoint,
    decideText: endpoint?.protocol === 'websocket',
    scope: upstreamHead.scope,
    credentialed,
    src: { remoteAddress: socket.remoteAddress, remotePort: socket.remotePort },
    identity: r.identity,
    middlewares: r.websocketMiddlewares ?? [],
  };
  const pinned = pinnedDecisions(ctx.store.current(), session, r.method, decision);
  let closeRelay: ((reason: string) => void) | undefined;
  const tunnel: PinnedTunnel = {
    host,
    port,
    addresses,
    endpointId: endpoint?.id,
    inspect: r.tunnel !== undefined,
    identity: session.identity,
    // docs/destinations.md#reloads: the relay survives a reload unless the upgrade's or its text frames' decision changed.
    recheck: (policy) => sameDecisions(pinned, pinnedDecisions(policy, session, r.method, undefined)),
    close(reason) {
      if (reason === 'policy-changed') ctx.metrics.reloadClosed.inc({});
      const code = reason === 'policy-changed' ? CLOSE_CODES.serviceRestart : CLOSE_CODES.goingAway;
      ctx.sink.emit(
        relayClosedEvent(ctx.store.current(), {
          what: 'websocket',
          host,
          port,
          reason,
          unmapped: { reason_code: reason, ...(closeRelay === undefined ? {} : { close_code: code }) },
        }),
      );
      if (closeRelay !== undefined) closeRelay(reason);
      else {
        socket.destroy();
        upstream.destroy();
      }
    },
  };
  const remove = ctx.tunnels.add(tunnel);
  if (!inspect) {
    relayRaw(socket, upstream, ctx.tunnelIdleTimeoutMs, done);
    return;
  }
  const relay = relayWebSocket(ctx, { client: socket, upstream, session, clientHead: head, upstreamHead: response.rest, onClosed: done });
  // On shutdown (`final`) nothing may outlive the drain: the relay's upstream goes as soon as its client has.
  closeRelay = (reason) =>
    reason === 'policy-changed'
      ? relay.close(CLOSE_CODES.serviceRestart, 'policy changed')
      : relay.close(CLOSE_CODES.goingAway, 'proxy shutting down', { final: reason === 'shutdown' });
  // A reload that landed during the dial or handshake found no relay to re-evaluate: check it here.
  const now = ctx.store.current();
  if (now.generation !== r.policy?.generation && !sameDecisions(pinned, pinnedDecisions(now, session, r.method, undefined))) {
    remove();
    tunnel.close('policy-changed');
  }
}

interface PinnedDecisions {
  readonly upgrade: Decision;
  readonly text: Decision | undefined;
  /** The network middlewares the host selects, by fingerprint: a reload that changes them closes the relay. */
  readonly middlewares: string;
}

/** The upgrade's decision and (on a websocket endpoint) its text frames' decision under `policy`. */
function pinnedDecisions(policy: Policy, session: WsSession, method: string, upgrade: Decision | undefined): PinnedDecisions {
  const { adapter, host, port, path, query, identity } = session;
  return {
    upgrade: upgrade ?? decide(policy, { adapter, host, port, method, path, query, identity }),
    text: session.decideText ? decide(policy, { adapter, host, port, method: 'WEBSOCKET_TEXT', path, query, identity }) : undefined,
    middlewares: policy
      .middlewaresFor(host)
      .map((m) => m.fingerprint)
      .join('\n'),
  };
}

/** Same verdict by the same endpoint, inspected the same way (an id is a position, so the fields count too). */
function sameDecision(a: Decision | undefined, b: Decision | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.verdict === b.verdict &&
    a.layer === b.layer &&
    a.endpoint?.id === b.endpoint?.id &&
    a.endpoint?.protocol === b.endpoint?.protocol &&
    a.endpoint?.websocketCredentialRewrite === b.endpoint?.websocketCredentialRewrite
  );
}

function sameDecisions(a: PinnedDecisions, b: PinnedDecisions): boolean {
  return sameDecision(a.upgrade, b.upgrade) && sameDecision(a.text, b.text) && a.middlewares === b.middlewares;
}
