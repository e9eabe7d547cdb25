// Regression of issue 28, "CLOSE-WAIT leak" (`issues show 28`): an HTTP/2 client that closed TCP without GOAWAY (as a
// crashed process does) left boundary's side of its socket in CLOSE-WAIT until the tunnel's 300 s idle timeout, still
// counted against its source: with --max-connections 40, 20 such closes from one address got the next client 503.
// The HTTP/2 server now ends a session at the client's FIN. The other kinds of client connection are held to the
// same: HTTP/1.1 keep-alive, CONNECT tunnels (passthrough, intercepted in cleartext and in TLS) and a WebSocket relay
// whose origin never answers the FIN (it used to wait out the 10 s linger).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { FRAME, frame, PREFACE, readFrames, requestHeaders, settings } from '../harness/h2-frames.js';
import { type H2Origin, h2cOrigin, h2TlsOrigin } from '../harness/h2-origin.js';
import { metric, rawClient } from '../harness/liveness.js';
import { openTunnel, readHead } from '../harness/proxy-client.js';
import { type EchoServer, echoServer, httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';
import { DEADLINE_MS, withinDeadline } from '../harness/waiters.js';
import { openWebSocket, type WsOrigin, wsOrigin } from '../harness/ws.js';

/** As the red team ran it: one source address may then hold 20 connections (MAX_CONNECTIONS_PER_SOURCE_PERCENT). */
const MAX_CONNECTIONS = 40;
/** More than the one address's share: every one of them must have been released for the last to get in. */
const CLOSING_CLIENTS = 24;
/** Three of these (past half the 65,535-octet stream window) make the proxy give window back as it reads them. */
const BODY_FRAME_BYTES = 16_384;
/** Scrapes of the connection gauge while boundary's side of a closed client goes; each is one admin round trip. */
const GAUGE_POLLS = 200;

/** Sockets of boundary's listener in CLOSE-WAIT: the client sent its FIN, boundary has not closed its side. */
function closeWaits(port: number): string[] {
  const out = execFileSync('ss', ['-tanH', 'state', 'close-wait', `( sport = :${port} )`], { encoding: 'utf8' }).trim();
  return out === '' ? [] : out.split('\n');
}

async function gaugeBackTo(b: RunningBoundary, value: number): Promise<void> {
  let open = Number.NaN;
  for (let i = 0; i < GAUGE_POLLS; i++) {
    open = await metric(b, 'boundary_proxy_connections');
    if (open <= value) return;
  }
  assert.fail(`boundary_proxy_connections stayed at ${open}, above ${value}`);
}

/** The client sent its FIN (`socket` is the TCP socket to the proxy); resolves once boundary has closed its side too. */
async function finAndRelease(socket: Socket, what: string): Promise<void> {
  const closed = once(socket, 'close');
  socket.end();
  await withinDeadline(closed, `boundary releasing ${what}`, DEADLINE_MS);
}

describe('issue 28: a client that closes TCP without a goodbye is released at once', () => {
  let b: RunningBoundary;
  let h2c: H2Origin;
  let h2s: H2Origin;
  let h1: Origin;
  let h1s: Origin;
  let ws: WsOrigin;
  let echo: EchoServer;

  before(async () => {
    const pki = await makeTestPki();
    [h2c, h2s, h1, h1s, ws, echo] = await Promise.all([h2cOrigin(), h2TlsOrigin({ ca: pki.ca }), httpOrigin(), tlsOrigin({ ca: pki.ca }), wsOrigin(), echoServer()]);
    b = await startBoundary({
      upstreamCaPem: pki.ca.certPem,
      names: { 'ws.example.test': ['127.0.0.1'], 'raw.example.test': ['127.0.0.1'] },
      limits: { maxConnections: MAX_CONNECTIONS },
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        ports: [${h2c.port}, ${h2s.port}, ${h1.port}, ${h1s.port}]
        protocol: rest
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
  ws:
    endpoints:
      - host: ws.example.test
        port: ${ws.port}
        protocol: websocket
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
  raw:
    endpoints:
      - { host: raw.example.test, port: ${echo.port} }
    binaries: [{ path: "/**" }]
`,
    });
  });

  after(async () => {
    await b?.close();
    await Promise.all([h2c?.close(), h2s?.close(), h1?.close(), h1s?.close(), ws?.close(), echo?.close()]);
  });

  /**
   * An HTTP/2 session through CONNECT, cleartext by prior knowledge or TLS with ALPN h2, past SETTINGS; with
   * `inFlight`, a POST whose body never ends is open on it. Returns the TCP socket to the proxy.
   */
  async function h2Client(tls: boolean, inFlight: boolean): Promise<Socket> {
    const port = tls ? h2s.port : h2c.port;
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${port}`);
    assert.equal(tunnel.status, 200, 'the tunnel was admitted');
    let wire: Socket = tunnel.socket;
    if (tls) {
      wire = tlsConnect({ socket: tunnel.socket, ca: b.caPem ?? '', servername: 'api.example.test', ALPNProtocols: ['h2'] });
      wire.on('error', () => undefined);
      await once(wire, 'secureConnect');
    }
    const frames = readFrames(wire);
    wire.write(Buffer.concat([PREFACE, settings()]));
    await withinDeadline(frames.next((f) => f.type === FRAME.SETTINGS), 'the server SETTINGS');
    if (inFlight) {
      const body = frame(FRAME.DATA, 0, 1, Buffer.alloc(BODY_FRAME_BYTES));
      wire.write(Buffer.concat([requestHeaders(1, { authority: `api.example.test:${port}`, path: '/upload', method: 'POST', scheme: tls ? 'https' : 'http', endStream: false }), body, body, body]));
      // Window given back for the body: the proxy is sending it upstream, where the answer waits for its end.
      await withinDeadline(frames.next((f) => f.type === FRAME.WINDOW_UPDATE && f.streamId === 1), 'the request body going upstream');
    }
    return tunnel.socket;
  }

  it(`releases ${CLOSING_CLIENTS} HTTP/2 clients that close TCP without GOAWAY under --max-connections ${MAX_CONNECTIONS}; the next one is served`, async () => {
    const baseline = await metric(b, 'boundary_proxy_connections');
    for (let i = 0; i < CLOSING_CLIENTS; i++) {
      const tls = i % 2 === 1;
      const inFlight = i % 4 >= 2;
      const socket = await h2Client(tls, inFlight);
      await finAndRelease(socket, `HTTP/2 client ${i} (${tls ? 'TLS' : 'cleartext'}${inFlight ? ', a stream open' : ''})`);
    }
    await gaugeBackTo(b, baseline);
    assert.deepEqual(closeWaits(b.proxyPort), [], 'no socket of boundary is left in CLOSE-WAIT');
    const next = await openTunnel(b.proxyPort, `api.example.test:${h2c.port}`);
    assert.equal(next.status, 200, 'the next client is admitted');
    const frames = readFrames(next.socket);
    next.socket.write(Buffer.concat([PREFACE, settings(), requestHeaders(1, { authority: `api.example.test:${h2c.port}`, path: '/after' })]));
    const answer = await withinDeadline(frames.next((f) => f.type === FRAME.HEADERS && f.streamId === 1), 'the answer to the next client');
    assert.ok(answer !== undefined);
    assert.equal(h2c.seen.at(-1)?.path, '/after');
    next.socket.destroy();
  });

  it('releases HTTP/1.1 keep-alive clients, CONNECT tunnels and WebSocket relays at their FIN too', async () => {
    const baseline = await metric(b, 'boundary_proxy_connections');

    const forward = await rawClient(b.proxyPort);
    forward.write(`GET http://api.example.test:${h1.port}/kept HTTP/1.1\r\nhost: api.example.test:${h1.port}\r\n\r\n`);
    assert.equal((await readHead(forward)).status, 200);
    await finAndRelease(forward, 'a kept-alive HTTP/1.1 client');

    const plain = await openTunnel(b.proxyPort, `api.example.test:${h1.port}`);
    plain.socket.write(`GET /plain HTTP/1.1\r\nhost: api.example.test:${h1.port}\r\n\r\n`);
    assert.equal((await readHead(plain.socket)).status, 200);
    await finAndRelease(plain.socket, 'an intercepted cleartext tunnel');

    const secure = await openTunnel(b.proxyPort, `api.example.test:${h1s.port}`);
    const tls = tlsConnect({ socket: secure.socket, ca: b.caPem ?? '', servername: 'api.example.test', ALPNProtocols: ['http/1.1'] });
    tls.on('error', () => undefined);
    await once(tls, 'secureConnect');
    tls.write(`GET /secure HTTP/1.1\r\nhost: api.example.test:${h1s.port}\r\n\r\n`);
    assert.equal((await readHead(tls as unknown as Socket)).status, 200);
    await finAndRelease(secure.socket, 'an intercepted TLS tunnel');

    const raw = await openTunnel(b.proxyPort, `raw.example.test:${echo.port}`);
    raw.socket.resume();
    raw.socket.write('ping');
    await once(raw.socket, 'data');
    await finAndRelease(raw.socket, 'a passthrough tunnel');

    // The origin never answers a FIN: only boundary can end the relay's client side.
    const relay = await openWebSocket({ proxyPort: b.proxyPort, transport: 'forward', host: 'ws.example.test', port: ws.port, path: '/socket' });
    assert.equal(relay.status, 101);
    relay.client.sendText('hello');
    await relay.client.next();
    await finAndRelease(relay.client.socket, 'a WebSocket relay');

    await gaugeBackTo(b, baseline);
    assert.deepEqual(closeWaits(b.proxyPort), [], 'no socket of boundary is left in CLOSE-WAIT');
  });
});
