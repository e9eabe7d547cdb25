// Regression of issue 15, "Holds against a hostile workload" (`issues show 15`), soak finding: an inspected WebSocket
// relay whose client left without a close frame (after a flood of 200 messages, all echoes read) stayed open until
// the 300 s idle timeout. The client's FIN was passed upstream and nothing bounded the wait for the server's: an
// origin that never FINs back held both sockets. The relay runs here on the proxy's real context between loopback
// sockets, with its timers injected, so the 10 s linger is reached by advancing a fake clock, not by waiting.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { scopeFor } from '../../src/credentials/scope.js';
import { TUNNEL_LINGER_MS } from '../../src/proxy/tunnel.js';
import { relayWebSocket } from '../../src/proxy/ws-relay.js';
import { CLOSE_CODES, encodeFrame, OPCODES } from '../../src/websocket/ws-frames.js';
import { startBoundary } from '../harness/boundary.js';
import { testTimers } from '../harness/clock.js';
import { tcpOrigin } from '../harness/liveness.js';
import { readHead } from '../harness/proxy-client.js';
import { wsOrigin } from '../harness/ws.js';
import { withinDeadline } from '../harness/waiters.js';

const HOST = 'ws.example.test';
/** The soak's flood: more than one socket buffer's worth of frames each way, so backpressure can engage. */
const FLOOD_MESSAGES = 200;
const MASK = Buffer.from([1, 2, 3, 4]);
/** Binary frames for an upstream that reads nothing: far more than loopback socket buffers hold. */
const STUCK_FRAME = encodeFrame({ opcode: OPCODES.binary, payload: Buffer.alloc(1024 * 1024), maskKey: MASK });
const STUCK_FRAMES = 32;

const policy = (port: number): string => `version: 1
network_policies:
  ws:
    endpoints:
      - host: ${HOST}
        port: ${port}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/socket" }
          - allow: { method: WEBSOCKET_TEXT, path: "/socket" }
    binaries: [{ path: "/**" }]
`;

interface Relayed {
  /** The test's WebSocket client. */
  readonly peer: Socket;
  /** The relay's two sockets, as the proxy holds them. */
  readonly client: Socket;
  readonly upstream: Socket;
  readonly timers: ReturnType<typeof testTimers>;
  readonly relay: ReturnType<typeof relayWebSocket>;
  readonly relayClosed: Promise<void>;
}

/**
 * A relay between a loopback client and, after the 101, the harness origin (which never FINs back); `deaf`: a TCP
 * origin that accepts and reads nothing, so what the relay writes upstream stays queued.
 */
async function startRelay(t: TestContext, upstreamKind: 'echo' | 'deaf' = 'echo'): Promise<Relayed> {
  const origin = upstreamKind === 'echo' ? await wsOrigin() : await tcpOrigin(() => undefined);
  t.after(() => origin.close());
  const b = await startBoundary({ policy: policy(origin.port) });
  t.after(() => b.close());
  const ctx = b.boundary.proxy.context;
  // As the proxy's listener and dial: half-open allowed on both sides.
  const listener = createServer({ allowHalfOpen: true });
  listener.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  t.after(() => listener.close());
  const address = listener.address();
  assert.ok(address !== null && typeof address === 'object');
  const accepted = once(listener, 'connection') as Promise<[Socket]>;
  const peer = connect({ host: '127.0.0.1', port: address.port });
  peer.on('error', () => undefined);
  const [client] = await accepted;
  const upstream = connect({ host: '127.0.0.1', port: origin.port, allowHalfOpen: true });
  await once(upstream, 'connect');
  let upstreamHead: Buffer = Buffer.alloc(0);
  if (upstreamKind === 'echo') {
    upstream.write(
      `GET /socket HTTP/1.1\r\nhost: ${HOST}:${origin.port}\r\nconnection: Upgrade\r\nupgrade: websocket\r\n` +
        'sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    const answer = await readHead(upstream);
    assert.equal(answer.status, 101, answer.head);
    upstreamHead = answer.rest;
  }
  for (const socket of [peer, client, upstream]) t.after(() => socket.destroy());
  const timers = testTimers();
  let closed: () => void = () => undefined;
  const relayClosed = new Promise<void>((resolve) => {
    closed = resolve;
  });
  const relay = relayWebSocket(ctx, {
    client,
    upstream,
    session: {
      adapter: 'forward',
      host: HOST,
      port: origin.port,
      scheme: 'http',
      path: '/socket',
      query: '',
      endpoint: undefined,
      decideText: true,
      scope: scopeFor({ source: ctx.credentials, host: HOST, port: origin.port, path: '/socket' }),
      credentialed: false,
      src: {},
    },
    clientHead: Buffer.alloc(0),
    upstreamHead,
    onClosed: () => closed(),
    timers,
  });
  return { peer, client, upstream, timers, relay, relayClosed };
}

/** Sends FLOOD_MESSAGES text frames at once and resolves once every echo has been read back. */
async function flood(peer: Socket): Promise<void> {
  let expected = 0;
  for (let i = 0; i < FLOOD_MESSAGES; i++) {
    peer.write(encodeFrame({ opcode: OPCODES.text, payload: Buffer.from(`f${i}`), maskKey: MASK }));
    // An unmasked server frame with a 7-bit length: two header bytes and "echo:f<i>".
    expected += 2 + `echo:f${i}`.length;
  }
  let received = 0;
  await withinDeadline(
    new Promise<void>((resolve) => {
      peer.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received >= expected) resolve();
      });
    }),
    `${FLOOD_MESSAGES} echoes`,
  );
  assert.equal(received, expected);
}

const bothClosed = (r: Relayed): Promise<unknown> =>
  Promise.all([r.client.closed ? undefined : once(r.client, 'close'), r.upstream.closed ? undefined : once(r.upstream, 'close'), r.relayClosed]);

describe('issue 15: a WebSocket relay whose client left without a close frame', () => {
  it('after a flood, closes both sockets when the linger ends, not at the idle timeout', async (t) => {
    const r = await startRelay(t);
    await flood(r.peer);
    // The client goes: a FIN, no close frame. The relay passes it on; the origin never answers with its own.
    const finSeen = once(r.client, 'end');
    r.peer.destroy();
    await withinDeadline(finSeen, "the client's FIN at the relay");
    assert.ok(!r.client.destroyed && !r.upstream.destroyed, 'nothing closes the relay before the linger');
    r.timers.advance(TUNNEL_LINGER_MS);
    await withinDeadline(bothClosed(r), 'both relay sockets closed after the linger');
  });

  it('releases the upstream at once when the client socket is gone (reset, forced drain)', async (t) => {
    const r = await startRelay(t);
    await flood(r.peer);
    // No clock advance: a client that is gone leaves the upstream nothing to wait for.
    r.client.destroy();
    await withinDeadline(bothClosed(r), 'the upstream closed after its client');
  });

  it('on shutdown, destroys an upstream whose writes are stuck as soon as the client is gone', async (t) => {
    const r = await startRelay(t, 'deaf');
    // The upstream reads nothing: its socket buffers fill and the relay pauses the client (backpressure).
    const paused = once(r.client, 'pause');
    for (let i = 0; i < STUCK_FRAMES; i++) r.peer.write(STUCK_FRAME);
    await withinDeadline(paused, 'the client paused behind the stuck upstream');
    assert.ok(r.upstream.writableLength > 0, 'bytes queued for the upstream');
    // The proxy's shutdown (tunnel registry closeAll), then the drain deadline destroys the client socket.
    r.relay.close(CLOSE_CODES.goingAway, 'proxy shutting down', { final: true });
    r.client.destroy();
    // No clock advance: the upstream's queued writes will never flush, and the process must not wait on them.
    await withinDeadline(bothClosed(r), 'the stuck upstream destroyed after its client');
  });
});
