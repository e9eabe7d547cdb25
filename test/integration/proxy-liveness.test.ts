// Liveness and resource rows (docs/destinations.md#denial-responses RX-01..RX-15, docs/destinations.md#evaluation-order SM-15) through the real proxy on loopback: head and
// header-count limits, slowloris, idle tunnels, backpressure, half-close, resets, dial failures and a throwing
// resolver. Every row asserts what the client sees and the event or metric that records it.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createHttpServer, type Server } from 'node:http';
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { netDial } from '../../src/proxy/dial.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { json, openTunnel, rawExchange, readAll, sendRequest, statusOf, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

/** RX-06: what the origin tries to push at a client that never reads. */
const STREAM_TOTAL_BYTES = 256 * 1024 * 1024;
/** Every buffer between origin and client (two kernel socket pairs, Node's stream buffers) holds far less. */
const STALL_CEILING_BYTES = 64 * 1024 * 1024;
/** The origin counts as held back once it has waited this long for 'drain' without getting it. */
const STALL_WINDOW_MS = 250;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
/** Short limits passed through config, so the timeout rows finish quickly. */
const HEADERS_TIMEOUT_MS = 300;
const TUNNEL_IDLE_MS = 400;
const CONNECT_TIMEOUT_MS = 200;
/** Node sweeps for header timeouts once a second (CONNECTIONS_CHECK_INTERVAL_MS); slack on top for a busy host. */
const SWEEP_SLACK_MS = 1_000 + 2_000;
/** No row may hang: each suite is cut off after this. */
const SUITE_TIMEOUT_MS = 60_000;
/** Bounds for loops that wait on the other side: never more iterations than this. */
const MAX_ROUNDS = 100_000;

const head = (lines: string): string => `${lines.replaceAll('\n', '\r\n')}\r\n\r\n`;
const manyHeaders = (n: number): string => Array.from({ length: n }, (_, i) => `X-H${i}: v`).join('\n');

async function metric(b: RunningBoundary, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
  for (const line of text.split('\n')) if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  return 0;
}

/** Values handed over as they come: `next()` resolves with the oldest one not yet taken. */
function queue<T>(): { put(value: T): void; next(): Promise<T> } {
  const items: T[] = [];
  const waiters: ((value: T) => void)[] = [];
  return {
    put(value) {
      const waiter = waiters.shift();
      if (waiter === undefined) items.push(value);
      else waiter(value);
    },
    next() {
      const value = items.shift();
      return value === undefined ? new Promise((resolve) => waiters.push(resolve)) : Promise.resolve(value);
    },
  };
}

/** A raw TCP origin that hands every accepted socket to `onSocket` and to whoever awaits `next()`. */
interface TcpOrigin {
  readonly port: number;
  next(): Promise<Socket>;
  close(): Promise<void>;
}

async function tcpOrigin(onSocket: (socket: Socket) => void): Promise<TcpOrigin> {
  const sockets = new Set<Socket>();
  const accepted = queue<Socket>();
  const server: NetServer = createNetServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    onSocket(socket);
    accepted.put(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('origin did not bind');
  return {
    port: address.port,
    next: () => accepted.next(),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createNetServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Writes `total` bytes into `out`, honouring backpressure. `stalled` resolves with the bytes written so far
 * once the writer has waited STALL_WINDOW_MS for a 'drain' that did not come; it rejects if everything got
 * written, which is what a proxy without backpressure would allow.
 */
function pump(out: Writable, total: number, fill: Buffer = CHUNK): { stalled: Promise<number>; written(): number } {
  let written = 0;
  const stalled = new Promise<number>((resolve, reject) => {
    const write = (): void => {
      while (written < total) {
        const chunk = total - written >= fill.length ? fill : fill.subarray(0, total - written);
        written += chunk.length;
        if (!out.write(chunk)) {
          // An observation window, not a wait: "held back" means no 'drain' for STALL_WINDOW_MS, and no event says that.
          const watchdog = setTimeout(() => resolve(written), STALL_WINDOW_MS);
          out.once('drain', () => {
            clearTimeout(watchdog);
            write();
          });
          return;
        }
      }
      out.end();
      reject(new Error(`the writer was never held back: all ${total} bytes were accepted`));
    };
    write();
  });
  stalled.catch(() => undefined);
  return { stalled, written: () => written };
}

/** Reads until `bodyBytes` bytes followed the response head (or all bytes when `withHead` is false). */
function receive(socket: Socket, bodyBytes: number, withHead: boolean): Promise<{ head: string; body: number }> {
  return new Promise((resolve, reject) => {
    let pending: Buffer | undefined = withHead ? Buffer.alloc(0) : undefined;
    let headText = '';
    let body = 0;
    const onData = (chunk: Buffer): void => {
      if (pending !== undefined) {
        pending = Buffer.concat([pending, chunk]);
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        headText = pending.toString('latin1', 0, end);
        body += pending.length - end - 4;
        pending = undefined;
      } else body += chunk.length;
      if (body >= bodyBytes) finish();
    };
    const onClose = (): void => finish();
    function finish(): void {
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      if (headText === '' && withHead) reject(new Error(`closed before a response head (${body} bytes)`));
      else resolve({ head: headText, body });
    }
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
}

async function rawClient(proxyPort: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port: proxyPort });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  return socket;
}

/** Writes `text` and waits for the echo of exactly that many bytes. */
async function echoRoundTrip(socket: Socket, text: string): Promise<string> {
  const got: Buffer[] = [];
  let length = 0;
  const echoed = new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      got.push(chunk);
      length += chunk.length;
      if (length >= text.length) done();
    };
    const onClose = (): void => done(new Error('tunnel closed before the echo'));
    function done(err?: Error): void {
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      socket.pause();
      if (err === undefined) resolve(Buffer.concat(got).toString('latin1'));
      else reject(err);
    }
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.resume();
  });
  socket.write(text);
  return echoed;
}

function echo(socket: Socket): void {
  socket.pipe(socket);
}

const l7Policy = (host: string, ports: readonly number[]): string => `  l7:
    endpoints:
      - host: ${host}
        ports: [${ports.join(', ')}]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
          - allow: { method: POST, path: "/upload/**" }
        deny_rules:
          - { method: "*", path: "/secret/**" }
    binaries: [{ path: "/**" }]
`;

const l4Policy = (key: string, host: string, ports: readonly number[]): string => `  ${key}:
    endpoints:
      - { host: ${host}, ports: [${ports.join(', ')}] }
    binaries: [{ path: "/**" }]
`;

/** RX-09: bytes the origin sends before, and again after, the client's FIN. */
const HALF_CLOSE_BYTES = 1024 * 1024;

const NAMES = { 'raw.example.test': ['127.0.0.1'], 'boom.example.test': ['127.0.0.1'] } as const;

describe('limits and liveness with default limits', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let echoOrigin: TcpOrigin;
  let streamOrigin: TcpOrigin;
  let halfCloseOrigin: TcpOrigin;
  let big: Server;
  let bigPort = 0;
  let b: RunningBoundary;
  const bigPumps = queue<ReturnType<typeof pump>>();

  before(async () => {
    plain = await httpOrigin();
    echoOrigin = await tcpOrigin(echo);
    streamOrigin = await tcpOrigin(() => undefined);
    halfCloseOrigin = await tcpOrigin((socket) => {
      // Some bytes before the client's FIN arrives, the rest only after it.
      socket.once('data', () => socket.write(Buffer.alloc(HALF_CLOSE_BYTES, 0x61)));
      socket.once('end', () => pump(socket, HALF_CLOSE_BYTES, Buffer.alloc(16 * 1024, 0x62)));
    });
    big = createHttpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': STREAM_TOTAL_BYTES });
      res.on('error', () => undefined);
      bigPumps.put(pump(res, STREAM_TOTAL_BYTES));
    });
    big.listen(0, '127.0.0.1');
    await once(big, 'listening');
    bigPort = (big.address() as { port: number }).port;
    b = await startBoundary({
      names: NAMES,
      policy: `version: 1
network_policies:
${l7Policy('api.example.test', [plain.port, bigPort])}${l4Policy('raw', 'raw.example.test', [echoOrigin.port, streamOrigin.port, halfCloseOrigin.port])}${l4Policy('boom', 'boom.example.test', [echoOrigin.port, plain.port])}`,
    });
  });

  after(async () => {
    await b?.close();
    big?.closeAllConnections();
    await new Promise<void>((resolve) => (big === undefined ? resolve() : big.close(() => resolve())));
    await Promise.all([plain?.close(), echoOrigin?.close(), streamOrigin?.close(), halfCloseOrigin?.close()]);
  });

  describe('RX-01: head size limits', () => {
    it('answers 431 to a CONNECT head over 8 KiB, closes, and logs a head-too-large NET event without dialling', async () => {
      const dials = b.dials.length;
      const raw = await rawExchange(b.proxyPort, head(`CONNECT raw.example.test:${echoOrigin.port} HTTP/1.1\nHost: x\nX-Pad: ${'a'.repeat(9_000)}`));
      assert.equal(statusOf(raw), 431);
      assert.equal(b.dials.length, dials);
      await b.log.waitFor((e) => e.class_uid === 4001 && e.unmapped.reason_code === 'head-too-large' && e.unmapped.status_code === 431);
    });

    it('answers 431 to a request head over 16 KiB inside a TLS-intercepted tunnel (the answer is not lost on close)', async () => {
      const seen = plain.seen.length;
      const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
      assert.equal(tunnel.status, 200);
      assert.ok(b.caPem !== undefined, 'the boundary CA is available');
      const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem });
      tls.write(head(`GET /a HTTP/1.1\nHost: api.example.test:${plain.port}\nX-Big: ${'a'.repeat(17_000)}`));
      const text = await readAll(tls as unknown as Socket);
      assert.equal(statusOf(text), 431, text.slice(0, 120));
      assert.equal(plain.seen.length, seen, 'nothing went upstream');
    });

    it('answers 431 and closes on a request head over 16 KiB inside an intercepted plaintext tunnel', async () => {
      const seen = plain.seen.length;
      const before = await metric(b, 'boundary_proxy_client_errors_total{reason="head-too-large"}');
      const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
      assert.equal(tunnel.status, 200);
      tunnel.socket.write(head(`GET /a HTTP/1.1\nHost: api.example.test:${plain.port}\nX-Big: ${'a'.repeat(17_000)}`));
      const text = await readAll(tunnel.socket);
      assert.equal(statusOf(text), 431, text.slice(0, 120));
      assert.equal(plain.seen.length, seen, 'nothing went upstream');
      assert.equal(await metric(b, 'boundary_proxy_client_errors_total{reason="head-too-large"}'), before + 1);
    });

    it('accepts a 12 KiB head inside a tunnel: the 8 KiB limit is for CONNECT only', async () => {
      const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
      const response = await sendRequest({ socket: tunnel.socket, path: '/a', headers: { host: `api.example.test:${plain.port}`, 'x-big': 'a'.repeat(12_000) } });
      assert.equal(response.status, 200);
      tunnel.socket.destroy();
    });
  });

  describe('RX-02: header count limit', () => {
    const COUNT = 300;
    it(`answers 431 to a forward request with ${COUNT} headers, sends nothing upstream, and logs it`, async () => {
      const seen = plain.seen.length;
      const raw = await rawExchange(b.proxyPort, head(`GET http://api.example.test:${plain.port}/many HTTP/1.1\nHost: api.example.test\n${manyHeaders(COUNT)}`));
      assert.equal(statusOf(raw), 431);
      assert.equal(plain.seen.length, seen);
      await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'head-too-large' && e.unmapped.reason === 'too-many-headers');
    });

    it(`answers 431 to a CONNECT with ${COUNT} headers without dialling, and logs it`, async () => {
      const dials = b.dials.length;
      const raw = await rawExchange(b.proxyPort, head(`CONNECT raw.example.test:${echoOrigin.port} HTTP/1.1\nHost: x\n${manyHeaders(COUNT)}`));
      assert.equal(statusOf(raw), 431);
      assert.equal(b.dials.length, dials);
      await b.log.waitFor((e) => e.class_uid === 4001 && e.unmapped.reason_code === 'head-too-large' && e.dst_endpoint === undefined);
    });

    it(`answers 431 to a request with ${COUNT} headers inside an L7 tunnel, and logs it`, async () => {
      const seen = plain.seen.length;
      const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
      tunnel.socket.write(head(`GET /inner-many HTTP/1.1\nHost: api.example.test:${plain.port}\n${manyHeaders(COUNT)}`));
      const text = await readAll(tunnel.socket);
      assert.equal(statusOf(text), 431);
      assert.equal(plain.seen.length, seen);
      await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.adapter === 'l7' && e.unmapped.reason === 'too-many-headers');
    });
  });

  describe('RX-06: a client that never reads', () => {
    it('holds back the origin of a raw CONNECT tunnel (backpressure), then delivers every byte once the client reads', async () => {
      const accepted = streamOrigin.next();
      const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${streamOrigin.port}`);
      assert.equal(tunnel.status, 200);
      const writer = pump(await accepted, STREAM_TOTAL_BYTES);
      const heldAt = await writer.stalled;
      assert.ok(heldAt < STALL_CEILING_BYTES, `origin wrote ${heldAt} bytes to a client that reads nothing`);
      const got = await receive(tunnel.socket, STREAM_TOTAL_BYTES, false);
      assert.equal(got.body, STREAM_TOTAL_BYTES);
      tunnel.socket.destroy();
    });

    it('holds back the origin of a forward request (backpressure), then delivers the whole body once the client reads', async () => {
      const client = await rawClient(b.proxyPort);
      client.write(head(`GET http://api.example.test:${bigPort}/big HTTP/1.1\nHost: api.example.test:${bigPort}`));
      client.pause();
      const writer = await bigPumps.next();
      const heldAt = await writer.stalled;
      assert.ok(heldAt < STALL_CEILING_BYTES, `origin wrote ${heldAt} bytes to a client that reads nothing`);
      const got = await receive(client, STREAM_TOTAL_BYTES, true);
      assert.match(got.head, /^HTTP\/1\.1 200/);
      assert.equal(got.body, STREAM_TOTAL_BYTES);
      client.destroy();
    });
  });

  describe('RX-09: the client half-closes after its request', () => {
    it('delivers the whole response through a raw CONNECT tunnel, including what upstream sends after the FIN', async () => {
      const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${halfCloseOrigin.port}`);
      assert.equal(tunnel.status, 200);
      tunnel.socket.end('request');
      const text = await readAll(tunnel.socket);
      assert.equal(text.length, 2 * HALF_CLOSE_BYTES);
      assert.equal(text.indexOf('b'), HALF_CLOSE_BYTES, 'the bytes sent after the FIN arrived, in order');
    });
  });

  describe('RX-09 on the HTTP paths: the client half-closes right after its request', () => {
    it('still answers a forward request whose client sent FIN with it', async () => {
      const socket = connect({ host: '127.0.0.1', port: b.proxyPort });
      socket.on('error', () => undefined);
      await once(socket, 'connect');
      socket.end(head(`GET http://api.example.test:${plain.port}/half HTTP/1.1\nHost: api.example.test:${plain.port}`));
      const text = await readAll(socket);
      assert.equal(statusOf(text), 200, text.slice(0, 120));
    });

    it('still answers a request inside a plaintext L7 tunnel whose client sent FIN with it', async () => {
      const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
      assert.equal(tunnel.status, 200);
      tunnel.socket.end(head(`GET /half HTTP/1.1\nHost: api.example.test:${plain.port}`));
      const text = await readAll(tunnel.socket);
      assert.equal(statusOf(text), 200, text.slice(0, 120));
    });
  });

  describe('SM-15: a request pipelined after a chunked body (forward path)', () => {
    const url = (path: string): string => `http://api.example.test:${plain.port}${path}`;
    const chunked = (): string => head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nTransfer-Encoding: chunked`) + '5\r\nhello\r\n0\r\n\r\n';

    it('cuts the first body at its terminator and evaluates the second request on its own (denied: never forwarded)', async () => {
      const seen = plain.seen.length;
      const raw = await rawExchange(b.proxyPort, chunked() + head(`GET ${url('/secret/x')} HTTP/1.1\nHost: api.example.test`));
      assert.match(raw, /^HTTP\/1\.1 200[\s\S]*HTTP\/1\.1 403[\s\S]*deny-rule-matched/);
      assert.equal(plain.seen.length, seen + 1);
      assert.equal(plain.seen[seen]?.body, 'hello');
      await b.log.waitFor((e) => e.class_uid === 4002 && e.action === 'Denied' && e.http_request?.url.path === '/secret/x');
    });

    it('forwards an allowed pipelined request as a request of its own, not as body bytes', async () => {
      const seen = plain.seen.length;
      const raw = await rawExchange(b.proxyPort, chunked() + head(`GET ${url('/second')} HTTP/1.1\nHost: api.example.test\nConnection: close`));
      assert.match(raw, /^HTTP\/1\.1 200[\s\S]*HTTP\/1\.1 200/);
      assert.deepEqual(
        plain.seen.slice(seen).map((r) => [r.method, r.url, r.body]),
        [
          ['POST', '/upload/a', 'hello'],
          ['GET', '/second', ''],
        ],
      );
    });
  });

  describe('RX-15: an exception while handling one connection', () => {
    it('fails only that connection, logs it, and keeps serving (a resolver that throws)', async () => {
      const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`);
      assert.equal(tunnel.status, 200);
      const original = b.resolver.resolve;
      b.resolver.resolve = (name, family) => {
        if (name === 'boom.example.test') throw new Error('resolver bug');
        return original.call(b.resolver, name, family);
      };
      try {
        const forward = await sendRequest({ proxyPort: b.proxyPort, path: `http://boom.example.test:${plain.port}/x` });
        assert.equal(forward.status, 502);
        await b.log.waitFor((e) => e.activity_name === 'Fail' && e.dst_endpoint?.domain === 'boom.example.test' && e.unmapped.adapter === 'forward');
        const connectRaw = await rawExchange(b.proxyPort, head(`CONNECT boom.example.test:${echoOrigin.port} HTTP/1.1\nHost: x`));
        assert.equal(connectRaw, '', 'the CONNECT is closed with no response');
        await b.log.waitFor((e) => e.activity_name === 'Fail' && e.dst_endpoint?.domain === 'boom.example.test' && e.unmapped.adapter === 'connect');
      } finally {
        b.resolver.resolve = original;
      }
      assert.equal(await echoRoundTrip(tunnel.socket, 'still here'), 'still here', 'an open tunnel is unaffected');
      const next = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/after` });
      assert.equal(next.status, 200);
      assert.equal(json(next).url, '/after');
      tunnel.socket.destroy();
    });
  });
});

describe('RX-03: slowloris with a short headers timeout', { timeout: SUITE_TIMEOUT_MS }, () => {
  it('closes a trickled head at the headers timeout with no 200, frees its slot and counts it', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: `version: 1\nnetwork_policies:\n${l7Policy('api.example.test', [origin.port])}`, limits: { headersTimeoutMs: HEADERS_TIMEOUT_MS, maxConnections: 1 } });
    let trickle: NodeJS.Timeout | undefined;
    t.after(async () => {
      clearInterval(trickle);
      await b.close();
      await origin.close();
    });
    const socket = await rawClient(b.proxyPort);
    const started = performance.now();
    socket.write(`GET http://api.example.test:${origin.port}/slow HTTP/1.1\r\nHost: api.example.test\r\nX-Trickle: `);
    // Pacing, not waiting: the slow trickle is the attack under test. One byte per tick of a short interval:
    // the head never completes; bounded by the count. The test waits on the close (readAll), not on time.
    let sent = 0;
    trickle = setInterval(() => {
      if (socket.destroyed || sent++ > 200) clearInterval(trickle);
      else socket.write('a');
    }, 20);
    const text = await readAll(socket);
    const elapsed = performance.now() - started;
    clearInterval(trickle);
    assert.match(text, /^HTTP\/1\.1 408/);
    assert.equal(text.includes(' 200 '), false);
    assert.ok(elapsed >= HEADERS_TIMEOUT_MS - 20, `closed after ${elapsed} ms`);
    assert.ok(elapsed < HEADERS_TIMEOUT_MS + SWEEP_SLACK_MS, `closed after ${elapsed} ms`);
    assert.equal(origin.seen.length, 0);
    assert.equal(await metric(b, 'boundary_proxy_client_errors_total{reason="timeout"}'), 1);
    // maxConnections is 1: this succeeds only because the slowloris slot was given back.
    const next = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/next` });
    assert.equal(next.status, 200);
    await b.log.waitFor((e) => e.class_uid === 4002 && e.action === 'Allowed' && e.http_request?.url.path === '/next');
  });
});

describe('RX-05: idle CONNECT tunnels', { timeout: SUITE_TIMEOUT_MS }, () => {
  let echoOrigin: TcpOrigin;
  let plain: Origin;
  let b: RunningBoundary;
  before(async () => {
    echoOrigin = await tcpOrigin(echo);
    plain = await httpOrigin();
    b = await startBoundary({
      names: NAMES,
      limits: { tunnelIdleTimeoutMs: TUNNEL_IDLE_MS },
      policy: `version: 1\nnetwork_policies:\n${l7Policy('api.example.test', [plain.port])}${l4Policy('raw', 'raw.example.test', [echoOrigin.port])}`,
    });
  });
  after(async () => {
    await b?.close();
    await Promise.all([echoOrigin?.close(), plain?.close()]);
  });

  it('closes a silent raw tunnel at the idle timeout and logs it, while a tunnel with traffic survives', async () => {
    const quiet = await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`);
    const busy = await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`);
    assert.equal(quiet.status, 200);
    assert.equal(busy.status, 200);
    const started = performance.now();
    const quietClosed = once(quiet.socket, 'close');
    let quietGone = false;
    void quietClosed.then(() => {
      quietGone = true;
    });
    // Ping-pong on the busy tunnel until the quiet one is gone: each round trip waits on its echo.
    let rounds = 0;
    while (!quietGone && rounds < MAX_ROUNDS) {
      assert.equal(await echoRoundTrip(busy.socket, `ping ${rounds}`), `ping ${rounds}`);
      rounds++;
    }
    await quietClosed;
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= TUNNEL_IDLE_MS - 20, `closed after ${elapsed} ms`);
    assert.ok(elapsed > 0 && rounds > 0);
    assert.equal(await echoRoundTrip(busy.socket, 'still open'), 'still open', 'the tunnel with traffic outlived the idle timeout');
    const event = await b.log.waitFor((e) => e.class_uid === 4001 && e.activity_name === 'Close' && e.unmapped.reason_code === 'idle-timeout');
    assert.equal(event.dst_endpoint?.port, echoOrigin.port);
    busy.socket.destroy();
  });

  it('closes an inspected tunnel whose client never speaks at the idle timeout, and logs it', async () => {
    const before = b.log.events().length;
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
    assert.equal(tunnel.status, 200);
    const started = performance.now();
    await once(tunnel.socket, 'close');
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= TUNNEL_IDLE_MS - 20, `closed after ${elapsed} ms`);
    await b.log.waitFor((e) => e.activity_name === 'Close' && e.unmapped.reason_code === 'idle-timeout' && e.dst_endpoint?.port === plain.port);
    assert.ok(b.log.events().length > before);
  });
});

describe('RX-08: concurrent connections above the limit', { timeout: SUITE_TIMEOUT_MS }, () => {
  it('answers 503 with an event and a metric, and the open tunnels keep working', async (t) => {
    const echoOrigin = await tcpOrigin(echo);
    const b = await startBoundary({ names: NAMES, limits: { maxConnections: 2 }, policy: `version: 1\nnetwork_policies:\n${l4Policy('raw', 'raw.example.test', [echoOrigin.port])}` });
    t.after(async () => {
      await b.close();
      await echoOrigin.close();
    });
    const open = [await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`), await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`)];
    assert.deepEqual(
      open.map((o) => o.status),
      [200, 200],
    );
    // Refused at accept, before any request is read: read what the proxy says without writing.
    const extra = await readAll(await rawClient(b.proxyPort));
    assert.equal(statusOf(extra), 503);
    assert.ok(extra.includes('too_many_connections'));
    await b.log.waitFor((e) => e.activity_name === 'Refuse' && e.unmapped.reason_code === 'too-many-connections');
    assert.equal(await metric(b, 'boundary_proxy_refused_connections_total{reason="too-many-connections"}'), 1);
    for (const [i, o] of open.entries()) assert.equal(await echoRoundTrip(o.socket, `tunnel ${i}`), `tunnel ${i}`);
    for (const o of open) o.socket.destroy();
  });
});

describe('RX-10: a reset in the middle of a tunnel', { timeout: SUITE_TIMEOUT_MS }, () => {
  let echoOrigin: TcpOrigin;
  let b: RunningBoundary;
  before(async () => {
    echoOrigin = await tcpOrigin(echo);
    b = await startBoundary({ names: NAMES, policy: `version: 1\nnetwork_policies:\n${l4Policy('raw', 'raw.example.test', [echoOrigin.port])}` });
  });
  after(async () => {
    await b?.close();
    await echoOrigin?.close();
  });

  async function established(): Promise<{ client: Socket; upstream: Socket }> {
    const accepted = echoOrigin.next();
    const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`);
    assert.equal(tunnel.status, 200);
    assert.equal(await echoRoundTrip(tunnel.socket, 'hello'), 'hello');
    return { client: tunnel.socket, upstream: await accepted };
  }

  async function assertNoLeaks(): Promise<void> {
    assert.equal(await metric(b, 'boundary_proxy_connections'), 0, 'client connections back to zero');
    assert.equal(await metric(b, 'boundary_proxy_tunnels'), 0, 'tunnels back to zero');
  }

  it('closes the client side when upstream resets, logs NET:RESET upstream-reset, and leaks nothing', async () => {
    const { client, upstream } = await established();
    const clientClosed = once(client, 'close');
    upstream.resetAndDestroy();
    await clientClosed;
    const event = await b.log.waitFor((e) => e.activity_name === 'Reset' && e.unmapped.reason_code === 'upstream-reset');
    assert.equal(event.dst_endpoint?.port, echoOrigin.port);
    await assertNoLeaks();
  });

  it('closes the upstream side when the client resets, logs NET:RESET client-reset, and leaks nothing', async () => {
    const { client, upstream } = await established();
    const upstreamClosed = once(upstream, 'close');
    client.resetAndDestroy();
    await upstreamClosed;
    await b.log.waitFor((e) => e.activity_name === 'Reset' && e.unmapped.reason_code === 'client-reset');
    await assertNoLeaks();
  });
});

describe('RX-11: dial refused vs dial timeout vs reset', { timeout: SUITE_TIMEOUT_MS }, () => {
  let refusedPort = 0;
  let hangPort = 0;
  let resetOrigin: TcpOrigin;
  let b: RunningBoundary;
  before(async () => {
    refusedPort = await closedPort();
    hangPort = await closedPort();
    // Accepts, then resets as soon as the client's first bytes arrive.
    resetOrigin = await tcpOrigin((socket) => socket.once('data', () => socket.resetAndDestroy()));
    const ports = [refusedPort, hangPort, resetOrigin.port];
    b = await startBoundary({
      names: NAMES,
      limits: { connectTimeoutMs: CONNECT_TIMEOUT_MS },
      // The hang port is never dialled for real: the injected dial just never connects.
      dial: (target) => (target.port === hangPort ? new Promise<Socket>(() => undefined) : netDial(target)),
      policy: `version: 1\nnetwork_policies:\n${l4Policy('raw', 'raw.example.test', ports)}`,
    });
  });
  after(async () => {
    await b?.close();
    await resetOrigin?.close();
  });

  const connectFail = (port: number) => (e: { class_uid: number; activity_name: string; dst_endpoint?: { port?: number }; unmapped: Record<string, unknown> }) =>
    e.class_uid === 4001 && e.activity_name === 'Fail' && e.dst_endpoint?.port === port;

  it('CONNECT: refused closes the client with no response and logs dial_failure refused', async () => {
    const raw = await rawExchange(b.proxyPort, head(`CONNECT raw.example.test:${refusedPort} HTTP/1.1\nHost: x`));
    assert.equal(raw, '');
    const event = await b.log.waitFor(connectFail(refusedPort));
    assert.equal(event.unmapped.reason_code, 'dial-failed');
    assert.equal(event.unmapped.dial_failure, 'refused');
  });

  it('CONNECT: a dial that never connects is given up at connectTimeoutMs and logged as dial_failure timeout', async () => {
    const started = performance.now();
    const raw = await rawExchange(b.proxyPort, head(`CONNECT raw.example.test:${hangPort} HTTP/1.1\nHost: x`));
    const elapsed = performance.now() - started;
    assert.equal(raw, '');
    assert.ok(elapsed >= CONNECT_TIMEOUT_MS - 20, `gave up after ${elapsed} ms`);
    const event = await b.log.waitFor(connectFail(hangPort));
    assert.equal(event.unmapped.reason_code, 'dial-failed');
    assert.equal(event.unmapped.dial_failure, 'timeout');
  });

  it('CONNECT: an upstream that resets after accepting is a tunnel reset, not a dial failure', async () => {
    const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${resetOrigin.port}`);
    assert.equal(tunnel.status, 200);
    const closed = once(tunnel.socket, 'close');
    tunnel.socket.write('hello');
    await closed;
    const event = await b.log.waitFor((e) => e.activity_name === 'Reset' && e.dst_endpoint?.port === resetOrigin.port);
    assert.equal(event.unmapped.reason_code, 'upstream-reset');
    assert.equal(b.log.events().some(connectFail(resetOrigin.port)), false);
  });

  for (const [name, port, reason, detail, failure] of [
    ['refused', () => refusedPort, 'dial-failed', /ECONNREFUSED/, 'refused'],
    ['timeout', () => hangPort, 'dial-failed', /no answer in/, 'timeout'],
    ['reset', () => resetOrigin.port, 'upstream-failed', /./, undefined],
  ] as const) {
    it(`forward: ${name} answers 502 upstream_unreachable and logs reason ${reason}`, async () => {
      const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://raw.example.test:${port()}/x` });
      assert.equal(response.status, 502);
      assert.equal(json(response).error, 'upstream_unreachable');
      const event = await b.log.waitFor((e) => e.unmapped.adapter === 'forward' && e.activity_name === 'Fail' && e.dst_endpoint?.port === port());
      assert.equal(event.unmapped.reason_code, reason);
      assert.equal(event.unmapped.dial_failure, failure);
      assert.match(String(event.unmapped.reason), detail);
    });
  }
});
