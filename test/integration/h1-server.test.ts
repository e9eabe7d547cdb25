// boundary's own HTTP/1.1 server (http1/h1-server.ts) on real sockets, with real clients (node's http client,
// curl) and raw sockets for the edge cases: pipelining, split heads, chunked bodies, 100-continue, oversized heads,
// head and request deadlines on injected timers, HTTP/1.0, half-open clients, CONNECT hand-over.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request as httpRequest } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type ClientError, createH1Server, type H1Answer, type H1IncomingRequest, type H1Server, type H1ServerHandlers } from '../../src/http1/h1-server.js';
import { testTimers, type TestTimers } from '../harness/clock.js';

const run = promisify(execFile);
/** Sweeps, 10 ms of real time apart, within which the server has seen a client's close. */
const CLOSE_POLLS = 500;

interface Served {
  readonly port: number;
  readonly h1: H1Server;
  readonly errors: { code: string | undefined; inFlight: boolean }[];
  readonly timers: TestTimers;
  close(): Promise<void>;
}

/** Echoes method, target and body; `/slow` answers only when `release()` is called; `/big` streams 1 MiB. */
async function serve(overrides: Partial<H1ServerHandlers> = {}, limits: { head?: number; headersMs?: number; requestMs?: number } = {}): Promise<Served> {
  const errors: Served['errors'] = [];
  const timers = testTimers();
  const handlers: H1ServerHandlers = {
    async request(req: H1IncomingRequest, res: H1Answer, expectContinue: boolean) {
      if (expectContinue) res.writeContinue();
      const chunks: Buffer[] = [];
      try {
        for await (const chunk of req) chunks.push(chunk);
      } catch {
        return;
      }
      if (req.url === '/slow') await new Promise((resolve) => setTimeout(resolve, 50));
      const body = `${req.method} ${req.url} ${Buffer.concat(chunks).toString()}`;
      if (req.url === '/chunked') {
        res.writeHead(200, ['Content-Type', 'text/plain']);
        res.write(body);
        res.end();
        return;
      }
      res.writeHead(200, ['Content-Length', String(Buffer.byteLength(body)), 'X-Raw', req.rawHeaders.join('|')]);
      res.end(body);
    },
    connect(req, socket, head) {
      socket.end(`HTTP/1.1 200 OK\r\n\r\n${req.url}:${head.toString()}`);
    },
    upgrade(_req, socket) {
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    },
    clientError(err: ClientError, socket: Socket, conn) {
      errors.push({ code: err.code, inFlight: conn.inFlight() });
      if (conn.inFlight()) conn.closeAfterAnswer();
      else if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      else socket.destroy();
    },
    ...overrides,
  };
  const h1 = createH1Server(
    { maxHeadBytes: limits.head ?? 16_384, headersTimeoutMs: limits.headersMs ?? 10_000, requestTimeoutMs: limits.requestMs ?? 120_000, keepAliveTimeoutMs: 15_000, checkIntervalMs: 1_000, timers },
    handlers,
  );
  const server: Server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => h1.serve(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  h1.start();
  const port = (server.address() as { port: number }).port;
  return {
    port,
    h1,
    errors,
    timers,
    async close() {
      h1.closeAll();
      h1.stop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes `parts` (one write each, in turn) and reads until the server closes or `until` matches. */
async function raw(port: number, parts: readonly string[], until?: RegExp, end = false): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let got = '';
  const done = new Promise<string>((resolve) => {
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (until?.test(got) === true) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('close', () => resolve(got));
    socket.on('error', () => resolve(got));
  });
  for (const part of parts) {
    socket.write(part);
    await new Promise((resolve) => setImmediate(resolve));
  }
  if (end) socket.end();
  return done;
}

describe('http1 server', () => {
  let s: Served;
  before(async () => {
    s = await serve();
  });
  after(() => s.close());

  it('answers node:http clients on one kept-alive connection, with Date, Connection and Keep-Alive as node:http adds them', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const ports = new Set<number>();
    for (let i = 0; i < 3; i++) {
      const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
        const req = httpRequest({ port: s.port, host: '127.0.0.1', path: `/n${i}`, method: 'POST', agent }, resolve);
        req.on('error', reject);
        req.end('body');
      });
      ports.add(res.socket.localPort as number);
      let body = '';
      for await (const chunk of res) body += chunk;
      assert.equal(body, `POST /n${i} body`);
      assert.equal(res.headers.connection, 'keep-alive');
      assert.equal(res.headers['keep-alive'], 'timeout=15');
      assert.ok(res.headers.date !== undefined);
    }
    agent.destroy();
    assert.equal(ports.size, 1);
  });

  it('reads a chunked upload from curl and answers chunked when no length is given', async () => {
    const { stdout } = await run('curl', ['-s', '-i', '-H', 'Transfer-Encoding: chunked', '--data-binary', 'hello', `http://127.0.0.1:${s.port}/chunked`]);
    assert.match(stdout, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(stdout, /\r\nTransfer-Encoding: chunked\r\n/);
    assert.match(stdout, /POST \/chunked hello$/);
  });

  it('answers pipelined requests strictly in order, even when a later one is ready first', async () => {
    const got = await raw(s.port, ['GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /fast HTTP/1.1\r\nHost: a\r\n\r\nGET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n']);
    const bodies = [...got.matchAll(/GET \/\w+ /g)].map((m) => m[0]);
    assert.deepEqual(bodies, ['GET /slow ', 'GET /fast ', 'GET /last ']);
    assert.match(got, /Connection: close\r\n/);
  });

  it('reads a head split over many writes, and keeps the header list as received (no joining)', async () => {
    const head = 'GET /split HTTP/1.1\r\nHost: a\r\nX-Dup: 1\r\nX-Dup: 2\r\nConnection: close\r\n\r\n';
    const got = await raw(s.port, head.match(/.{1,3}/gs) ?? []);
    assert.match(got, /X-Raw: Host\|a\|X-Dup\|1\|X-Dup\|2\|Connection\|close\r\n/);
  });

  it('reads a chunked body with trailers', async () => {
    const got = await raw(s.port, ['POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n', '2\r\nde\r\n0\r\nX-T: 1\r\n\r\n']);
    assert.match(got, /POST \/t abcde$/);
  });

  it('sends 100 Continue when the handler asks for the body, and 417 for any other expectation', async () => {
    const socket = connect(s.port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('POST /c HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n');
    const [first] = (await once(socket, 'data')) as [Buffer];
    assert.equal(first.toString(), 'HTTP/1.1 100 Continue\r\n\r\n');
    socket.end('ok');
    let rest = '';
    for await (const chunk of socket) rest += chunk;
    assert.match(rest, /POST \/c ok$/);
    const refused = await raw(s.port, ['POST /c HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: something\r\n\r\n'], /\r\n\r\n/);
    assert.match(refused, /^HTTP\/1\.1 417 /);
    // The field names in any case.
    const shouted = await raw(s.port, ['POST /c HTTP/1.1\r\nHOST: a\r\nContent-Length: 2\r\neXpEcT: something\r\n\r\n'], /\r\n\r\n/);
    assert.match(shouted, /^HTTP\/1\.1 417 /);
  });

  it('answers 400 to an HTTP/1.1 request without Host, without calling the handler', async () => {
    const got = await raw(s.port, ['GET /nohost HTTP/1.1\r\n\r\n']);
    assert.match(got, /^HTTP\/1\.1 400 Bad Request\r\nConnection: close\r\n/);
    assert.doesNotMatch(got, /nohost/);
    const lookalike = await raw(s.port, ['GET /hosts HTTP/1.1\r\nHosts: a\r\nHost-: a\r\n\r\n']);
    assert.match(lookalike, /^HTTP\/1\.1 400 Bad Request\r\n/);
  });

  it('answers an HTTP/1.0 client without chunking, and closes after the answer', async () => {
    const got = await raw(s.port, ['GET /chunked HTTP/1.0\r\n\r\n']);
    assert.match(got, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(got, /\r\nConnection: close\r\n/);
    assert.doesNotMatch(got, /Transfer-Encoding/);
    assert.match(got, /\r\n\r\nGET \/chunked $/);
  });

  it('answers a client that half-closed after its request (FIN), then closes', async () => {
    const got = await raw(s.port, ['GET /fin HTTP/1.1\r\nHost: a\r\n\r\n'], undefined, true);
    // raw() returns once the server closed the connection.
    assert.match(got, /GET \/fin $/);
  });

  it('refuses an oversized head as HPE_HEADER_OVERFLOW', async () => {
    const small = await serve({}, { head: 1_024 });
    try {
      const got = await raw(small.port, [`GET / HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(2_000)}\r\n\r\n`]);
      assert.match(got, /^HTTP\/1\.1 400 /);
      assert.deepEqual(small.errors, [{ code: 'HPE_HEADER_OVERFLOW', inFlight: false }]);
    } finally {
      await small.close();
    }
  });

  it('lets the answer in flight go out whole when bytes behind it are refused, then closes', async () => {
    const errors = s.errors.length;
    const got = await raw(s.port, ['GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n']);
    assert.match(got, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(got, /GET \/slow $/);
    assert.equal(got.match(/HTTP\/1\.1/g)?.length, 1);
    assert.deepEqual(s.errors.slice(errors), [{ code: 'HPE_INVALID_HEADER_TOKEN', inFlight: true }]);
  });

  it('hands CONNECT over with the bytes read after its head', async () => {
    const got = await raw(s.port, ['CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\nearly']);
    assert.equal(got, 'HTTP/1.1 200 OK\r\n\r\nexample.test:443:early');
  });

  it('answers HEAD and 204 without a body', async () => {
    const quiet = await serve({
      request(req, res) {
        res.writeHead(req.method === 'HEAD' ? 200 : 204, ['Content-Type', 'text/plain']);
        res.end('ignored');
      },
    });
    try {
      const got = await raw(quiet.port, ['HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n']);
      assert.doesNotMatch(got, /ignored|Transfer-Encoding/);
      assert.match(got, /^HTTP\/1\.1 200 OK\r\n[\s\S]*HTTP\/1\.1 204 No Content\r\n/);
    } finally {
      await quiet.close();
    }
  });

  it('refuses a head not complete within its deadline, and a request not complete within its own (injected timers)', async () => {
    const slow = await serve({}, { headersMs: 5_000, requestMs: 20_000 });
    try {
      const head = connect(slow.port, '127.0.0.1');
      await once(head, 'connect');
      head.write('GET / HTTP/1.1\r\nHost: a\r\n');
      await new Promise((resolve) => setTimeout(resolve, 20));
      slow.timers.advance(4_000);
      assert.deepEqual(slow.errors, []);
      slow.timers.advance(2_000);
      assert.deepEqual(slow.errors, [{ code: 'ERR_HTTP_REQUEST_TIMEOUT', inFlight: false }]);
      head.destroy();
      const body = connect(slow.port, '127.0.0.1');
      await once(body, 'connect');
      body.write('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab');
      await new Promise((resolve) => setTimeout(resolve, 20));
      slow.timers.advance(10_000);
      assert.equal(slow.errors.length, 1);
      slow.timers.advance(11_000);
      assert.deepEqual(slow.errors[1], { code: 'ERR_HTTP_REQUEST_TIMEOUT', inFlight: true });
      body.destroy();
    } finally {
      await slow.close();
    }
  });

  it('runs the head deadline from the start of the connection when no head ever comes (injected timers)', async () => {
    const silent = await serve({}, { headersMs: 5_000 });
    try {
      const socket = connect(silent.port, '127.0.0.1');
      await once(socket, 'connect');
      await new Promise((resolve) => setTimeout(resolve, 20));
      silent.timers.advance(6_000);
      assert.deepEqual(silent.errors, [{ code: 'ERR_HTTP_REQUEST_TIMEOUT', inFlight: false }]);
      socket.destroy();
    } finally {
      await silent.close();
    }
  });

  it('closes a kept-alive connection idle past the keep-alive timeout, and only then (injected timers)', async () => {
    const idle = await serve();
    try {
      const socket = connect(idle.port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write('GET /one HTTP/1.1\r\nHost: a\r\n\r\n');
      await once(socket, 'data');
      const closed = once(socket, 'close');
      idle.timers.advance(14_000);
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(socket.destroyed, false);
      idle.timers.advance(2_000);
      await closed;
    } finally {
      await idle.close();
    }
  });

  it('keeps its deadline timer only while a connection is open (injected timers)', async () => {
    const quiet = await serve();
    /** A kept-alive connection with one request answered. */
    const answered = async (): Promise<Socket> => {
      const socket = connect(quiet.port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write('GET / HTTP/1.1\r\nHost: a\r\n\r\n');
      await once(socket, 'data');
      return socket;
    };
    try {
      assert.equal(quiet.timers.pending, 0, 'no timer before any connection: an idle sidecar sleeps');
      const socket = await answered();
      assert.equal(quiet.timers.pending, 1, 'one sweep while a connection is open');
      quiet.timers.advance(1_000);
      assert.equal(quiet.timers.pending, 1, 'still open: the sweep goes on');
      socket.destroy();
      // The server sees the close on its own turn: a bounded number of sweeps until it has.
      for (let poll = 0; poll < CLOSE_POLLS && quiet.timers.pending > 0; poll++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        quiet.timers.advance(1_000);
      }
      assert.equal(quiet.timers.pending, 0, 'the last connection gone, the sweep stops');
      const again = await answered();
      assert.equal(quiet.timers.pending, 1, 'a new connection starts it again');
      again.destroy();
    } finally {
      await quiet.close();
    }
  });

  it('waits for drain when the client reads slowly, and the answer arrives whole', async () => {
    const big = Buffer.alloc(1 << 20, 'x');
    let paused = 0;
    const slow = await serve({
      async request(_req, res) {
        res.writeHead(200, ['Content-Length', String(big.length * 4)]);
        for (let i = 0; i < 4; i++) {
          if (!res.write(big)) {
            paused++;
            await new Promise<void>((resolve) => res.once('drain', resolve));
          }
        }
        res.end();
      },
    });
    try {
      const got = await raw(slow.port, ['GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n']);
      assert.equal(got.length - got.indexOf('\r\n\r\n') - 4, big.length * 4);
      assert.ok(paused > 0);
    } finally {
      await slow.close();
    }
  });

  it("gives every request the client's address and port, read once for the connection", async () => {
    const peers: H1IncomingRequest['peer'][] = [];
    const seen = await serve({
      request(req, res) {
        peers.push(req.peer);
        res.writeHead(200, ['Content-Length', '0']).end();
      },
    });
    try {
      const socket = connect(seen.port, '127.0.0.1');
      await once(socket, 'connect');
      let got = '';
      const answered = new Promise<void>((resolve) => {
        socket.on('data', (d: Buffer) => {
          got += d.toString('latin1');
          if (got.split('HTTP/1.1 200').length === 3) resolve();
        });
      });
      socket.write('GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n');
      await answered;
      assert.equal(peers.length, 2);
      assert.deepEqual(peers[0], { remoteAddress: '127.0.0.1', remotePort: socket.localPort });
      assert.equal(peers[1], peers[0]);
      socket.destroy();
    } finally {
      await seen.close();
    }
  });

  it('refuses a field value node:http would refuse before anything is written', async () => {
    let thrown: unknown;
    const strict = await serve({
      request(_req, res) {
        try {
          res.writeHead(200, ['X-Bad', 'a\u0000b']);
        } catch (err) {
          thrown = err;
        }
        res.writeHead(502, ['Content-Length', '0', 'Connection', 'close']).end();
      },
    });
    try {
      const got = await raw(strict.port, ['GET / HTTP/1.1\r\nHost: a\r\n\r\n']);
      assert.match(got, /^HTTP\/1\.1 502 /);
      assert.equal((thrown as { code?: string }).code, 'ERR_INVALID_CHAR');
    } finally {
      await strict.close();
    }
  });
});
