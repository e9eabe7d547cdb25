// WebSocket upgrades (forward and inside tunnels): the same evaluator decides the handshake; an allowed one
// is written to a pinned upstream connection and, after a 101, relayed. On a websocket endpoint or a
// credentialed route the client's frames are inspected (ws-relay.ts); otherwise the bytes are relayed raw.

import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { formatAuthority } from '../net/host.js';
import { type RewriteRefusal, refuse } from '../credentials/outcome.js';
import { redactPlaceholders } from '../credentials/placeholder.js';
import { decide } from '../policy/decide.js';
import type { Decision, Policy } from '../policy/types.js';
import { needsInspection, type ProxyContext } from './context.js';
import { credentialHead, credentialRefusal } from './credential-injection.js';
import { unsupportedL7Denial, upstreamUnreachableDenial, writeBareStatusToSocket, writeDenialToSocket } from './deny.js';
import { dialPinned } from './dial.js';
import { beginOutcome, emitOutcome, findingEvent, type Outcome, relayClosedEvent, settle } from './events.js';
import { BOUNDARY_HEADER_PREFIX, hostHeader, upstreamRequestHeaders } from '../http1/headers.js';
import { evaluateRequest } from './l7.js';
import { type PinnedTunnel, relayRaw } from './tunnel.js';
import { CLOSE_CODES } from '../websocket/ws-frames.js';
import { relayWebSocket, type WsSession } from './ws-relay.js';
import { signedRequest, withoutAwsAuth } from './sigv4-request.js';
import { identityCheck, requestIdentity } from './identity-gate.js';

/** The upstream's handshake answer must fit in this. */
const MAX_UPGRADE_RESPONSE_HEAD_BYTES = 16_384;

function refuseUpgrade(ctx: ProxyContext, socket: Socket, o: Outcome, refusal: RewriteRefusal): void {
  const { denial, finding } = credentialRefusal(o, refusal);
  writeDenialToSocket(socket, denial);
  if (finding !== undefined) ctx.sink.emit(findingEvent(o, finding));
}

export function createUpgradeHandler(ctx: ProxyContext) {
  return function handleUpgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const scope = ctx.scopes.get(socket);
    const o = beginOutcome(scope === undefined ? 'forward' : 'l7', 'http', socket);
    o.method = req.method ?? 'UNKNOWN';
    upgrade(ctx, req, socket, head, o)
      .catch((err: unknown) => {
        settle(o, 'fail', 'upstream-failed', err instanceof Error ? err.message : String(err), o.status);
        socket.destroy();
      })
      .finally(() => emitOutcome(ctx.sink, ctx.metrics, o));
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

async function upgrade(ctx: ProxyContext, req: IncomingMessage, socket: Socket, head: Buffer, o: Outcome): Promise<void> {
  const scope = ctx.scopes.get(socket);
  await identityCheck(ctx, req, scope);
  const evaluation = await evaluateRequest(ctx, req, scope, o);
  // 'body' is never asked for an upgrade (inspected-body.ts withoutBody); 400 if it ever were.
  if (evaluation.kind === 'bare' || evaluation.kind === 'body') {
    writeBareStatusToSocket(socket, evaluation.kind === 'bare' ? evaluation.status : 400);
    return;
  }
  if (evaluation.kind === 'deny') {
    writeDenialToSocket(socket, evaluation.denial);
    if (evaluation.finding !== undefined) ctx.sink.emit(findingEvent(o, evaluation.finding));
    return;
  }
  const { host, port, target, addresses, tls, decision, framing } = evaluation;
  const endpoint = decision.endpoint;
  if (framing.upgrade !== 'websocket' || (endpoint !== undefined && needsInspection(endpoint) && endpoint.protocol !== 'websocket')) {
    const detail = `upgrade to ${framing.upgrade ?? '-'} is not allowed on this endpoint`;
    settle(o, 'deny', 'unsupported-l7-protocol', detail, 403);
    writeDenialToSocket(socket, unsupportedL7Denial(detail));
    return;
  }
  // The handshake head is rewritten like any request, before the dial: a refusal sends nothing upstream.
  const upstreamHeaders = upstreamRequestHeaders(req.rawHeaders, { host: hostHeader(host, port, tls), upgrade: 'websocket' });
  // A signing endpoint: the workload's own (placeholder-key) signature goes before the rewrite sees it.
  const signing = endpoint?.credentialSigning === undefined ? undefined : endpoint;
  const prepared = credentialHead({
    source: ctx.credentials,
    host,
    port,
    method: o.method,
    target,
    headers: signing === undefined ? upstreamHeaders : withoutAwsAuth(upstreamHeaders),
    endpoint,
  });
  if (!prepared.ok) {
    refuseUpgrade(ctx, socket, o, prepared);
    return;
  }
  // docs/credentials.md#inspectable-routes-only: a route that binds credentials is a credentialed upgrade, whether or not this
  // handshake used one; its frames are inspected even on an L4 endpoint. Plain L4 upgrades stay raw.
  const credentialed = prepared.head.scope.boundKeys.length > 0;
  const inspect = endpoint?.protocol === 'websocket' || credentialed;
  let headers = inspect ? withoutExtensions(prepared.head.headers) : prepared.head.headers;
  if (signing !== undefined) {
    // Signed after every header change, so what goes upstream is what was signed; an upgrade has no body.
    const signed = await signedRequest({ req, body: req, head: { ...prepared.head, headers }, endpoint: signing, host, port, tls, method: o.method, hasBody: false });
    if (!signed.ok) {
      refuseUpgrade(ctx, socket, o, signed);
      return;
    }
    headers = signed.headers;
    o.extra = { ...o.extra, sigv4: signed.signed };
  }
  let upstream: Socket;
  try {
    const raw = await dialPinned({ addresses, port, dial: ctx.dial, timeoutMs: ctx.connectTimeoutMs, metrics: ctx.metrics });
    upstream = tls ? await ctx.upstreams.secureSocket(raw, host) : raw;
  } catch (err) {
    settle(o, 'fail', 'dial-failed', (err as Error).message, 502);
    writeDenialToSocket(socket, upstreamUnreachableDenial(formatAuthority(host, port), 'connection failed'));
    return;
  }
  upstream.on('error', () => upstream.destroy());
  // The dial was awaited: the revision guard (docs/credentials.md#revision-guard) is checked again right before the write.
  if (prepared.head.usedKeys > 0 && !prepared.head.scope.stillCurrent()) {
    upstream.destroy();
    refuseUpgrade(ctx, socket, o, refuse('stale-revision', 'the credentials changed while the request was in flight; retry it'));
    return;
  }
  let text = `${o.method} ${prepared.head.target} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  upstream.write(`${text}\r\n`);
  // Bytes the client sent with the handshake are frames: raw relays pass them now, inspected ones parse them.
  if (head.length > 0 && !inspect) upstream.write(head);
  const answer = await readResponseHead(upstream);
  const lines = answer.head.split('\r\n');
  const status = Number((lines[0] ?? '').split(' ')[1]);
  o.status = Number.isInteger(status) ? status : 502;
  // CR-03: upstream cannot speak as boundary. An inspected relay offered no extension, so none is accepted.
  const kept = lines.filter(
    (line, i) => i === 0 || !(line.toLowerCase().startsWith(BOUNDARY_HEADER_PREFIX) || (inspect && /^sec-websocket-extensions\s*:/i.test(line))),
  );
  socket.write(`${kept.join('\r\n')}\r\n\r\n`);
  if (answer.rest.length > 0 && !(inspect && status === 101)) socket.write(answer.rest);
  if (status !== 101) {
    // Refused handshake: pass the answer on, one way only. Nothing more from the client goes upstream.
    upstream.pipe(socket);
    upstream.resume();
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
  const q = target.indexOf('?');
  const session: WsSession = {
    adapter: o.adapter,
    host,
    port,
    path: o.path ?? '/',
    query: q < 0 ? '' : redactPlaceholders(target.slice(q + 1)),
    endpoint,
    decideText: endpoint?.protocol === 'websocket',
    scope: prepared.head.scope,
    credentialed,
    src: { remoteAddress: socket.remoteAddress, remotePort: socket.remotePort },
    identity: requestIdentity(ctx.identity, socket, scope),
  };
  const pinned = pinnedDecisions(ctx.store.current(), session, o.method, decision);
  let closeRelay: ((reason: string) => void) | undefined;
  const tunnel: PinnedTunnel = {
    host,
    port,
    addresses,
    endpointId: endpoint?.id,
    inspect: scope !== undefined,
    identity: session.identity,
    // docs/destinations.md#reloads: the relay survives a reload unless the upgrade's or its text frames' decision changed.
    recheck: (policy) => sameDecisions(pinned, pinnedDecisions(policy, session, o.method, undefined)),
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
  const relay = relayWebSocket(ctx, { client: socket, upstream, session, clientHead: head, upstreamHead: answer.rest, onClosed: done });
  // On shutdown (`final`) nothing may outlive the drain: the relay's upstream goes as soon as its client has.
  closeRelay = (reason) =>
    reason === 'policy-changed'
      ? relay.close(CLOSE_CODES.serviceRestart, 'policy changed')
      : relay.close(CLOSE_CODES.goingAway, 'proxy shutting down', { final: reason === 'shutdown' });
  // A reload that landed during the dial or handshake found no relay to re-evaluate: check it here.
  const now = ctx.store.current();
  if (now.generation !== o.generation && !sameDecisions(pinned, pinnedDecisions(now, session, o.method, undefined))) {
    remove();
    tunnel.close('policy-changed');
  }
}

/** Drops the extension offer: permessage-deflate would hide text frames from inspection. */
function withoutExtensions(flat: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    if ((flat[i] ?? '').toLowerCase() === 'sec-websocket-extensions') continue;
    out.push(flat[i] ?? '', flat[i + 1] ?? '');
  }
  return out;
}

interface PinnedDecisions {
  readonly upgrade: Decision;
  readonly text: Decision | undefined;
}

/** The upgrade's decision and (on a websocket endpoint) its text frames' decision under `policy`. */
function pinnedDecisions(policy: Policy, session: WsSession, method: string, upgrade: Decision | undefined): PinnedDecisions {
  const { adapter, host, port, path, query, identity } = session;
  return {
    upgrade: upgrade ?? decide(policy, { adapter, host, port, method, path, query, identity }),
    text: session.decideText ? decide(policy, { adapter, host, port, method: 'WEBSOCKET_TEXT', path, query, identity }) : undefined,
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
  return sameDecision(a.upgrade, b.upgrade) && sameDecision(a.text, b.text);
}
