// WebSocket upgrades (forward and inside tunnels): the same evaluator decides the handshake; an allowed one
// is written to a pinned upstream connection and, after the upstream's answer, relayed as raw bytes.
// The handshake head gets the credential rewrite; frames are not parsed yet, so text frames are neither
// rewritten nor scanned (WEBSOCKET_TEXT rules and rewriteWebSocketText need a frame parser first).

import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { formatAuthority } from '../net/host.js';
import { type RewriteRefusal, refuse } from '../credentials/outcome.js';
import { needsInspection, type ProxyContext } from './context.js';
import { credentialHead, credentialRefusal } from './credentials.js';
import { unsupportedL7Denial, upstreamUnreachableDenial, writeBareStatusToSocket, writeDenialToSocket } from './deny.js';
import { dialPinned } from './dial.js';
import { beginOutcome, emitOutcome, findingEvent, type Outcome } from './events.js';
import { BOUNDARY_HEADER_PREFIX, hostHeader, upstreamRequestHeaders } from './headers.js';
import { evaluateRequest } from './l7.js';
import { relayRaw } from './tunnel.js';

/** The upstream's handshake answer must fit in this. */
export const MAX_UPGRADE_RESPONSE_HEAD_BYTES = 16_384;

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
        o.verdict = 'fail';
        o.reason = 'upstream-failed';
        o.detail = err instanceof Error ? err.message : String(err);
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
  const evaluation = await evaluateRequest(ctx, req, scope, o);
  if (evaluation.kind === 'bare') {
    writeBareStatusToSocket(socket, evaluation.status);
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
    o.verdict = 'deny';
    o.reason = 'unsupported-l7-protocol';
    o.detail = `upgrade to ${framing.upgrade ?? '-'} is not allowed on this endpoint`;
    o.status = 403;
    writeDenialToSocket(socket, unsupportedL7Denial(o.detail));
    return;
  }
  // The handshake head is rewritten like any request, before the dial: a refusal sends nothing upstream.
  const prepared = credentialHead({
    source: ctx.credentials,
    host,
    port,
    method: o.method,
    target,
    headers: upstreamRequestHeaders(req.rawHeaders, { host: hostHeader(host, port, tls), upgrade: 'websocket' }),
    endpoint,
  });
  if (!prepared.ok) {
    refuseUpgrade(ctx, socket, o, prepared);
    return;
  }
  let upstream: Socket;
  try {
    const raw = await dialPinned({ addresses, port, dial: ctx.dial, timeoutMs: ctx.connectTimeoutMs });
    upstream = tls ? await ctx.upstreams.secureSocket(raw, host) : raw;
  } catch (err) {
    o.verdict = 'fail';
    o.reason = 'dial-failed';
    o.detail = (err as Error).message;
    o.status = 502;
    writeDenialToSocket(socket, upstreamUnreachableDenial(formatAuthority(host, port), 'connection failed'));
    return;
  }
  upstream.on('error', () => upstream.destroy());
  // The dial was awaited: the revision guard (§7.3 rule 6) is checked again right before the write.
  if (prepared.head.usedKeys > 0 && !prepared.head.scope.stillCurrent()) {
    upstream.destroy();
    refuseUpgrade(ctx, socket, o, refuse('stale-revision', 'the credentials changed while the request was in flight; retry it'));
    return;
  }
  const { headers } = prepared.head;
  let text = `${o.method} ${prepared.head.target} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  upstream.write(`${text}\r\n`);
  if (head.length > 0) upstream.write(head);
  const answer = await readResponseHead(upstream);
  const lines = answer.head.split('\r\n');
  const status = Number((lines[0] ?? '').split(' ')[1]);
  o.status = Number.isInteger(status) ? status : 502;
  // CR-03: upstream cannot speak as boundary.
  const kept = lines.filter((line, i) => i === 0 || !line.toLowerCase().startsWith(BOUNDARY_HEADER_PREFIX));
  socket.write(`${kept.join('\r\n')}\r\n\r\n`);
  if (answer.rest.length > 0) socket.write(answer.rest);
  if (status !== 101) {
    // Refused handshake: pass the answer on, one way only. Nothing more from the client goes upstream.
    upstream.pipe(socket);
    upstream.resume();
    socket.setTimeout(ctx.tunnelIdleTimeoutMs, () => socket.destroy());
    socket.once('close', () => upstream.destroy());
    return;
  }
  ctx.metrics.tunnels.inc();
  const remove = ctx.tunnels.add({
    host,
    port,
    addresses,
    endpointId: endpoint?.id,
    inspect: scope !== undefined,
    close: () => {
      socket.destroy();
      upstream.destroy();
    },
  });
  relayRaw(socket, upstream, ctx.tunnelIdleTimeoutMs, () => {
    remove();
    ctx.metrics.tunnels.dec();
  });
}
