// Liveness and resource rows with default limits (docs/destinations.md#denial-responses RX-01, RX-02, RX-06,
// RX-09, RX-15; docs/destinations.md#evaluation-order SM-15) through the real proxy on loopback: head and
// header-count limits, backpressure, half-close, a request pipelined after a chunked body and a throwing
// resolver. Every row asserts what the client sees and the event or metric that records it. Timeout rows
// (RX-03, RX-05, RX-11): proxy-liveness-timeouts.test.ts; connection limit and resets (RX-08, RX-10):
// proxy-liveness-resets.test.ts.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createHttpServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { echo, echoRoundTrip, head, l4Policy, l7Policy, metric, NAMES, queue, rawClient, SUITE_TIMEOUT_MS, type TcpOrigin, tcpOrigin } from '../harness/liveness.js';
import { json, openTunnel, rawExchange, readAll, sendRequest, statusOf, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

/** RX-06: what the origin tries to push at a client that never reads. */
const STREAM_TOTAL_BYTES = 256 * 1024 * 1024;
/** Every buffer between origin and client (two kernel socket pairs, Node's stream buffers) holds far less. */
const STALL_CEILING_BYTES = 64 * 1024 * 1024;
/**
 * RX-06: how long the origin watches for a 'drain' that does not come before it counts as held back. A bounded
 * observation window, kept on purpose. What it proves is that nothing more gets written, and the absence of
 * 'drain' has no event to wait on. Nor is there a clock to fake: the backpressure under test is the proxy
 * pausing one socket while the other's kernel and stream buffers are full (no timer in src/proxy is involved),
 * so only real time shows that the writer stays blocked. The window never decides alone: the bytes written by
 * then must stay under STALL_CEILING_BYTES, and every byte must arrive once the client reads. A slow host can
 * stretch a 'drain' past the window but cannot make a proxy that holds the origin back fail the row.
 */
const NO_DRAIN_WINDOW_MS = 250;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
/** RX-09: bytes the origin sends before, and again after, the client's FIN. */
const HALF_CLOSE_BYTES = 1024 * 1024;

const manyHeaders = (n: number): string => Array.from({ length: n }, (_, i) => `X-H${i}: v`).join('\n');

/**
 * Writes `total` bytes into `out`, honouring backpressure. `stalled` resolves with the bytes written so far
 * once the writer has watched NO_DRAIN_WINDOW_MS for a 'drain' that did not come; it rejects if everything
 * got written, which is what a proxy without backpressure would allow.
 */
function pump(out: Writable, total: number, fill: Buffer = CHUNK): { stalled: Promise<number>; written(): number } {
  let written = 0;
  const stalled = new Promise<number>((resolve, reject) => {
    const write = (): void => {
      while (written < total) {
        const chunk = total - written >= fill.length ? fill : fill.subarray(0, total - written);
        written += chunk.length;
        if (!out.write(chunk)) {
          // The bounded observation window of NO_DRAIN_WINDOW_MS (see there): no event says "no 'drain' came".
          const watchdog = setTimeout(() => resolve(written), NO_DRAIN_WINDOW_MS);
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
