import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { BoundaryError } from '../../src/errors.js';
import { createH1Pool, type H1Exchange, type H1Handler, type H1Pool, type H1Timeouts } from '../../src/http1/h1-client.js';
import type { H1Request } from '../../src/http1/h1-request.js';
import type { Timers } from '../../src/http1/timers.js';
import { testTimers } from '../harness/clock.js';
import { waiterList } from '../harness/waiters.js';

/** One request as a scripted origin read it: the raw head, and the socket to answer on. */
interface Arrival {
  readonly head: string;
  readonly method: string;
  readonly target: string;
  readonly socket: Socket;
  /** Index of the accepted connection it came in on (0-based). */
  readonly connection: number;
  /** Bytes after the head that arrived in the same reads (request body, if any). */
  readonly rest: Buffer;
}

interface ScriptedOrigin {
  readonly port: number;
  accepted(): number;
  /** The `n`th request head the origin read (0-based), already read or still to come. */
  arrival(n: number): Promise<Arrival>;
  /** Every byte the origin received, on every connection. */
  received(): number;
  sockets: Socket[];
  close(): Promise<void>;
}

/** A raw TCP origin: `answer` is called per request head it reads (simple: heads only, no body parsing). */
async function scriptedOrigin(answer: (arrival: Arrival) => void): Promise<ScriptedOrigin> {
  const sockets: Socket[] = [];
  const arrivals = waiterList<Arrival>();
  let bytes = 0;
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
    const index = sockets.length;
    sockets.push(socket);
    socket.on('error', () => undefined);
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      buffered = Buffer.concat([buffered, chunk]);
      for (let guard = 0; guard < 16; guard++) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.subarray(0, end).toString('latin1');
        const rest = buffered.subarray(end + 4);
        buffered = Buffer.alloc(0);
        const [method = '', target = ''] = (head.split('\r\n')[0] ?? '').split(' ');
        const arrival: Arrival = { head, method, target, socket, connection: index, rest };
        arrivals.push(arrival);
        answer(arrival);
        if (method !== 'GET' && method !== 'HEAD') return;
        buffered = rest;
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('origin did not bind');
  return {
    port: address.port,
    accepted: () => sockets.length,
    arrival: (n) => arrivals.waitFor((a) => arrivals.items.indexOf(a) === n, 5_000, `request ${n}`),
    received: () => bytes,
    sockets,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const TIMEOUTS: H1Timeouts = { headersTimeoutMs: 5_000, bodyTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000 };

function poolTo(port: number, options: { maxConnections?: number; maxQueued?: number; timeouts?: Partial<H1Timeouts>; timers?: Timers } = {}): H1Pool {
  return createH1Pool({
    connect: () =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
        s.once('connect', () => resolve(s));
        s.once('error', reject);
      }),
    maxConnections: options.maxConnections ?? 4,
    timeouts: { ...TIMEOUTS, ...options.timeouts },
    ...(options.maxQueued === undefined ? {} : { maxQueued: options.maxQueued }),
    ...(options.timers === undefined ? {} : { timers: options.timers }),
  });
}

interface Answer {
  status: number;
  headers: string[];
  body: string;
  /** How the body arrived: with the head in one read, or streamed after it. */
  whole: boolean;
}

/** Sends one request; resolves with the answer or rejects with the handler's error. */
function send(pool: H1Pool, req: Partial<H1Request> & { target?: string }, hooks: { onExchange?: (x: H1Exchange) => void; onData?: (x: H1Exchange, chunk: Buffer) => void } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let answer: Answer | undefined;
    let exchange: H1Exchange | undefined;
    const handler: H1Handler = {
      onHead(status, headers, body, complete) {
        answer = { status, headers, body: '', whole: complete };
        if (body !== undefined) chunks.push(body);
        if (body !== undefined && !complete && exchange !== undefined) hooks.onData?.(exchange, body);
        if (complete) resolve({ ...answer, body: Buffer.concat(chunks).toString('latin1') });
      },
      onData(chunk) {
        chunks.push(chunk);
        if (exchange !== undefined) hooks.onData?.(exchange, chunk);
      },
      onEnd() {
        if (answer !== undefined) resolve({ ...answer, body: Buffer.concat(chunks).toString('latin1') });
      },
      onError: reject,
    };
    exchange = pool.request({ method: 'GET', target: '/', headers: ['host', 'origin.test'], body: null, ...req }, handler);
    hooks.onExchange?.(exchange);
  });
}

/** Resolves once the client side ended or dropped the connection (the origin is half-open capable). */
function peerGone(s: Socket): Promise<void> {
  if (s.readableEnded || s.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    s.once('end', resolve);
    s.once('close', resolve);
  });
}

function ok(body: string, extra = ''): string {
  return `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
}

describe('h1-client against scripted origins', { timeout: 20_000 }, () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  after(async () => {
    for (const c of cleanup) await c();
  });
  async function origin(answer: (arrival: Arrival) => void): Promise<ScriptedOrigin> {
    const o = await scriptedOrigin(answer);
    cleanup.push(() => o.close());
    return o;
  }
  function pool(port: number, options?: Parameters<typeof poolTo>[1]): H1Pool {
    const p = poolTo(port, options);
    cleanup.push(() => p.destroy());
    return p;
  }

  it('reuses one keep-alive connection for sequential requests', async () => {
    const o = await origin((a) => a.socket.write(ok(`you asked ${a.target}`)));
    const p = pool(o.port);
    for (let i = 0; i < 5; i++) {
      const answer = await send(p, { target: `/${i}` });
      assert.equal(answer.status, 200);
      assert.equal(answer.body, `you asked /${i}`);
      assert.equal(answer.whole, true);
    }
    assert.equal(o.accepted(), 1);
  });

  it('reads Content-Length, chunked and close-delimited bodies', async () => {
    const o = await origin((a) => {
      if (a.target === '/cl') a.socket.write(ok('length'));
      else if (a.target === '/chunked') {
        a.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nchu\r\n');
        setImmediate(() => a.socket.write('4\r\nnked\r\n0\r\n\r\n'));
      } else a.socket.end('HTTP/1.1 200 OK\r\n\r\nuntil close');
    });
    const p = pool(o.port);
    assert.equal((await send(p, { target: '/cl' })).body, 'length');
    const chunked = await send(p, { target: '/chunked' });
    assert.equal(chunked.body, 'chunked');
    assert.equal(o.accepted(), 1);
    assert.equal((await send(p, { target: '/close' })).body, 'until close');
    // The close-delimited answer cost its connection.
    assert.equal((await send(p, { target: '/cl' })).body, 'length');
    assert.equal(o.accepted(), 2);
  });

  it('reads no body for HEAD, 204 and 304, and keeps the connection', async () => {
    const o = await origin((a) => {
      if (a.method === 'HEAD') a.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n');
      else if (a.target === '/204') a.socket.write('HTTP/1.1 204 No Content\r\n\r\n');
      else if (a.target === '/304') a.socket.write('HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n');
      else a.socket.write(ok('after'));
    });
    const p = pool(o.port);
    const head = await send(p, { method: 'HEAD' });
    assert.deepEqual([head.status, head.body, head.headers], [200, '', ['Content-Length', '9']]);
    assert.equal((await send(p, { target: '/204' })).status, 204);
    assert.equal((await send(p, { target: '/304' })).status, 304);
    assert.equal((await send(p, { target: '/x' })).body, 'after');
    assert.equal(o.accepted(), 1);
  });

  it('skips 100 and 103 before the answer', async () => {
    const o = await origin((a) => {
      a.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
      setImmediate(() => a.socket.write(`HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n${ok('final', 'X-Final: 1\r\n')}`));
    });
    const p = pool(o.port);
    const answer = await send(p, {});
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.headers, ['Content-Length', '5', 'X-Final', '1']);
    assert.equal(answer.body, 'final');
  });

  it('opens a new connection after Connection: close', async () => {
    const o = await origin((a) => a.socket.write(ok('bye', 'Connection: close\r\n')));
    const p = pool(o.port);
    await send(p, {});
    await send(p, {});
    assert.equal(o.accepted(), 2);
  });

  it('does not reuse a socket that sent bytes after a complete response', async () => {
    const o = await origin((a) => a.socket.write(`${ok('one')}HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra`));
    const p = pool(o.port);
    assert.equal((await send(p, {})).body, 'one');
    assert.equal((await send(p, {})).body, 'one');
    assert.equal(o.accepted(), 2);
  });

  it('drops an idle socket that talks unasked', async () => {
    const o = await origin((a) => {
      a.socket.write(ok('one'));
      setImmediate(() => a.socket.write('HTTP/1.1 200 OK\r\n'));
    });
    const p = pool(o.port);
    await send(p, {});
    const first = o.sockets[0];
    assert.ok(first !== undefined);
    await peerGone(first);
    assert.equal(p.connections, 0);
  });

  it('retries an idempotent request once on a fresh connection when a reused socket turns out stale', async () => {
    const o = await origin((a) => {
      // The first connection answers once, then drops the next request unanswered (a stale keep-alive).
      if (a.connection === 0 && a.target !== '/first') a.socket.destroy();
      else a.socket.write(ok(`conn ${a.connection}`));
    });
    const p = pool(o.port);
    assert.equal((await send(p, { target: '/first' })).body, 'conn 0');
    assert.equal((await send(p, { target: '/again' })).body, 'conn 1');
    assert.equal(o.accepted(), 2);
  });

  it('does not retry a POST with a streamed body on a stale socket', async () => {
    const o = await origin((a) => {
      if (a.connection === 0 && a.target !== '/first') a.socket.destroy();
      else a.socket.write(ok('fresh'));
    });
    const p = pool(o.port);
    await send(p, { target: '/first' });
    async function* body(): AsyncGenerator<Buffer> {
      yield Buffer.from('data');
    }
    await assert.rejects(send(p, { method: 'POST', target: '/post', headers: ['host', 'o', 'content-length', '4'], body: body() }), { code: 'UPSTREAM_CLOSED' });
    assert.equal(o.accepted(), 1);
  });

  it('does not retry a stale socket on a first-use connection', async () => {
    const o = await origin((a) => a.socket.destroy());
    const p = pool(o.port);
    await assert.rejects(send(p, {}), { code: 'UPSTREAM_CLOSED' });
    assert.equal(o.accepted(), 1);
  });

  for (const [what, req] of [
    ['a CR LF in a header value', { headers: ['host', 'o', 'x-injected', 'secret-value\r\nx-evil: 1'] }],
    ['a NUL in a header value', { headers: ['host', 'o', 'authorization', 'Bearer secret-value\0'] }],
    ['a bare LF in a header value', { headers: ['host', 'o', 'authorization', 'secret-value\nx: y'] }],
    ['a header name with a space', { headers: ['host', 'o', 'x evil', 'v'] }],
    ['a header name with a colon', { headers: ['host', 'o', 'x:evil', 'v'] }],
    ['an empty header name', { headers: ['host', 'o', '', 'v'] }],
    ['a method with a space', { method: 'GET /x HTTP/1.1\r\nX:' }],
    ['a target with a space', { target: '/a b' }],
    ['a target with CR LF', { target: '/a\r\nx: y' }],
    ['a character above 0xFF in a value', { headers: ['host', 'o', 'x', 'secret-value\u0100'] }],
    ['a client-set Transfer-Encoding', { headers: ['host', 'o', 'transfer-encoding', 'chunked'] }],
    ['two Content-Length headers', { headers: ['host', 'o', 'content-length', '0', 'content-length', '0'] }],
  ] as const) {
    it(`refuses ${what} before writing any byte, without the value in the error`, async () => {
      const o = await origin((a) => a.socket.write(ok('fine')));
      const p = pool(o.port);
      await send(p, {});
      const before = o.received();
      assert.throws(
        () => p.request({ method: 'GET', target: '/', headers: ['host', 'o'], body: null, ...req }, { onHead() {}, onData() {}, onEnd() {}, onError() {} }),
        (err: unknown) => err instanceof BoundaryError && err.code === 'UPSTREAM_REQUEST_INVALID' && !err.message.includes('secret-value'),
      );
      // The connection is still good and nothing reached the origin in between.
      assert.equal((await send(p, {})).body, 'fine');
      assert.equal(o.accepted(), 1);
      assert.ok(o.received() > before);
      assert.equal(o.sockets.length, 1);
    });
  }

  it('refuses a header injection on a pool that has never dialled, so the origin sees no connection', async () => {
    const o = await origin((a) => a.socket.write(ok('fine')));
    const p = pool(o.port);
    assert.throws(() => p.request({ method: 'GET', target: '/', headers: ['x', 'a\r\nb'], body: null }, { onHead() {}, onData() {}, onEnd() {}, onError() {} }), {
      code: 'UPSTREAM_REQUEST_INVALID',
    });
    assert.equal(p.connections, 0);
    assert.equal(o.accepted(), 0);
  });

  it('sets Content-Length for a Buffer body and writes head and body together', async () => {
    const seen: Arrival[] = [];
    const o = await origin((a) => {
      seen.push(a);
      a.socket.write(ok('got it'));
    });
    const p = pool(o.port);
    await send(p, { method: 'POST', body: Buffer.from('hello') });
    assert.match(seen[0]?.head ?? '', /\r\ncontent-length: 5$/);
    assert.equal(seen[0]?.rest.toString(), 'hello');
  });

  it('streams a body with chunked encoding when no Content-Length is given', async () => {
    const bodies: Buffer[] = [];
    let headSeen = '';
    const o = await origin((a) => {
      headSeen = a.head;
      const check = (c: Buffer): void => {
        bodies.push(c);
        if (Buffer.concat(bodies).toString().endsWith('0\r\n\r\n')) a.socket.write(ok('done'));
      };
      check(a.rest);
      a.socket.on('data', check);
    });
    const p = pool(o.port);
    async function* body(): AsyncGenerator<Buffer> {
      yield Buffer.from('ab');
      yield Buffer.alloc(0);
      yield Buffer.from('cdefghijklmnopqrstu');
    }
    assert.equal((await send(p, { method: 'POST', body: body() })).body, 'done');
    assert.match(headSeen, /\r\ntransfer-encoding: chunked$/);
    assert.equal(Buffer.concat(bodies).toString(), '2\r\nab\r\n13\r\ncdefghijklmnopqrstu\r\n0\r\n\r\n');
  });

  for (const [what, declared, parts] of [
    ['shorter', '10', ['hello']],
    ['longer', '3', ['hello']],
  ] as const) {
    it(`aborts and destroys the socket when a streamed body is ${what} than its Content-Length`, async () => {
      const o = await origin(() => undefined);
      const p = pool(o.port);
      async function* body(): AsyncGenerator<Buffer> {
        for (const part of parts) yield Buffer.from(part);
      }
      await assert.rejects(send(p, { method: 'POST', headers: ['host', 'o', 'content-length', declared], body: body() }), { code: 'UPSTREAM_REQUEST_INVALID' });
      const s = o.sockets[0];
      assert.ok(s !== undefined);
      await peerGone(s);
      assert.equal(p.connections, 0);
    });
  }

  it('hands an error thrown by the body iterator to the caller as it is, and destroys the socket', async () => {
    const o = await origin(() => undefined);
    const p = pool(o.port);
    class Boom extends Error {}
    const boom = new Boom('marker');
    async function* body(): AsyncGenerator<Buffer> {
      yield Buffer.from('a');
      throw boom;
    }
    await assert.rejects(send(p, { method: 'POST', body: body() }), (err) => err === boom);
    assert.equal(p.connections, 0);
  });

  // The timeouts run on fake timers: time moves only by timers.advance(), so each deadline is checked to the
  // millisecond (still open 1 ms before it, gone at it) without waiting for it.
  it('fails with UPSTREAM_TIMEOUT when no head arrives in headersTimeoutMs', async () => {
    const timers = testTimers();
    const o = await origin(() => undefined);
    const p = pool(o.port, { timers, timeouts: { headersTimeoutMs: 30 } });
    const answer = send(p, {});
    await o.arrival(0);
    timers.advance(29);
    assert.equal(p.connections, 1);
    timers.advance(1);
    await assert.rejects(answer, { code: 'UPSTREAM_TIMEOUT' });
    assert.equal(p.connections, 0);
  });

  it('fails after the head with UPSTREAM_TIMEOUT when the body stalls for bodyTimeoutMs', async () => {
    const timers = testTimers();
    const o = await origin((a) => a.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf'));
    // Far below headersTimeoutMs (5 s): the body phase runs on its own value.
    const p = pool(o.port, { timers, timeouts: { bodyTimeoutMs: 30 } });
    let markHead: (status: number) => void = () => undefined;
    const head = new Promise<number>((resolve) => {
      markHead = resolve;
    });
    const failed = new Promise<Error>((resolve) => {
      p.request({ method: 'GET', target: '/', headers: ['host', 'o'], body: null }, { onHead: (status) => markHead(status), onData() {}, onEnd() {}, onError: resolve });
    });
    assert.equal(await head, 200);
    timers.advance(29);
    assert.equal(p.connections, 1);
    timers.advance(1);
    assert.equal(((await failed) as BoundaryError).code, 'UPSTREAM_TIMEOUT');
    assert.equal(p.connections, 0);
  });

  it('restarts headersTimeoutMs with every request body write, as socket inactivity does', async () => {
    const timers = testTimers();
    let uploaded: Socket | undefined;
    let bodyBytes = 0;
    const reads = waiterList<number>();
    const o = await origin((a) => {
      // The body's last chunk ends in CR LF CR LF, which this simple origin takes for another head.
      if (uploaded !== undefined) return;
      uploaded = a.socket;
      bodyBytes = a.rest.length;
      a.socket.on('data', (chunk: Buffer) => {
        bodyBytes += chunk.length;
        reads.push(bodyBytes);
      });
    });
    const p = pool(o.port, { timers, timeouts: { headersTimeoutMs: 30 } });
    const gates = Array.from({ length: 3 }, () => {
      let resolve: () => void = () => undefined;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      return { promise, resolve };
    });
    async function* body(): AsyncGenerator<Buffer> {
      for (const gate of gates) {
        await gate.promise;
        yield Buffer.from('x');
      }
    }
    const answer = send(p, { method: 'POST', body: body() });
    await o.arrival(0);
    assert.ok(uploaded !== undefined);
    // Each chunk goes out 29 ms after the last activity: 87 ms in all, never 30 ms without a write.
    for (const [i, gate] of gates.entries()) {
      timers.advance(29);
      assert.equal(p.connections, 1);
      gate.resolve();
      // "1\r\nx\r\n" per chunk, then the last chunk's "0\r\n\r\n" after the third.
      const expected = 6 * (i + 1) + (i === gates.length - 1 ? 5 : 0);
      await reads.waitFor((n) => n >= expected, 5_000, `${expected} body bytes`);
    }
    timers.advance(29);
    assert.equal(p.connections, 1);
    timers.advance(1);
    await assert.rejects(answer, { code: 'UPSTREAM_TIMEOUT' });
  });

  it('closes an idle pooled socket after keepAliveTimeoutMs', async () => {
    const timers = testTimers();
    const o = await origin((a) => a.socket.write(ok('x')));
    const p = pool(o.port, { timers, timeouts: { keepAliveTimeoutMs: 30 } });
    await send(p, {});
    timers.advance(29);
    assert.equal(p.connections, 1);
    timers.advance(1);
    assert.equal(p.connections, 0);
    const s = o.sockets[0];
    assert.ok(s !== undefined);
    await peerGone(s);
  });

  it('keeps an idle socket past a shorter headersTimeoutMs, then still times out the next silent request', async () => {
    const timers = testTimers();
    let answered = 0;
    const o = await origin((a) => {
      if (answered++ === 0) a.socket.write(ok('first'));
    });
    const p = pool(o.port, { timers, timeouts: { headersTimeoutMs: 40, keepAliveTimeoutMs: 5_000 } });
    assert.equal((await send(p, {})).body, 'first');
    timers.advance(120);
    assert.equal(p.connections, 1);
    const second = send(p, {});
    await o.arrival(1);
    timers.advance(39);
    assert.equal(p.connections, 1);
    timers.advance(1);
    await assert.rejects(second, { code: 'UPSTREAM_TIMEOUT' });
    assert.equal(o.accepted(), 1);
  });

  it('goes back to headersTimeoutMs on a socket whose last response streamed under bodyTimeoutMs', async () => {
    const timers = testTimers();
    let answered = 0;
    const o = await origin((a) => {
      if (answered++ === 0) a.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nha');
    });
    const p = pool(o.port, { timers, timeouts: { headersTimeoutMs: 40, bodyTimeoutMs: 10_000 } });
    // The rest of the body goes out once the client has the head, so the response streams under bodyTimeoutMs.
    let rest = true;
    const first = await send(p, {}, {
      onData: () => {
        if (rest) o.sockets[0]?.write('lf');
        rest = false;
      },
    });
    assert.equal(first.body, 'half');
    assert.equal(first.whole, false);
    const second = send(p, {});
    await o.arrival(1);
    timers.advance(39);
    assert.equal(p.connections, 1);
    timers.advance(1);
    await assert.rejects(second, { code: 'UPSTREAM_TIMEOUT' });
    assert.equal(o.accepted(), 1);
  });

  it('restarts keepAliveTimeoutMs at every release, and closes a socket that was busy when it first ran out', async () => {
    const timers = testTimers();
    let slow = false;
    const o = await origin((a) => {
      if (!slow) a.socket.write(ok('x'));
    });
    const p = pool(o.port, { timers, timeouts: { keepAliveTimeoutMs: 80 } });
    for (let i = 0; i < 8; i++) {
      await send(p, {});
      timers.advance(60);
    }
    assert.equal(o.accepted(), 1);
    slow = true;
    const answer = send(p, {});
    const held = await o.arrival(8);
    // Busy past keepAliveTimeoutMs since the last release: the socket stays.
    timers.advance(150);
    assert.equal(p.connections, 1);
    held.socket.write(ok('slow'));
    assert.equal((await answer).body, 'slow');
    assert.equal(o.accepted(), 1);
    timers.advance(79);
    assert.equal(p.connections, 1);
    timers.advance(1);
    assert.equal(p.connections, 0);
    const s = o.sockets[0];
    assert.ok(s !== undefined);
    await peerGone(s);
  });

  it('destroys the upstream socket when the consumer aborts mid-response', async () => {
    const o = await origin((a) => {
      a.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n');
      setImmediate(() => a.socket.write('first'));
    });
    const p = pool(o.port);
    const gone = new Error('client went away');
    await assert.rejects(
      send(p, {}, { onData: (x) => x.abort(gone) }),
      (err) => err === gone,
    );
    const s = o.sockets[0];
    assert.ok(s !== undefined);
    await peerGone(s);
    assert.equal(p.connections, 0);
  });

  it('holds the origin back while paused and delivers every byte after resume', async () => {
    const total = 16 * 1024 * 1024;
    let written = 0;
    let originSocket: Socket | undefined;
    let onBlocked: (() => void) | undefined;
    const o = await origin((a) => {
      originSocket = a.socket;
      a.socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${total}\r\n\r\n`);
      const piece = Buffer.alloc(64 * 1024, 0x61);
      const pump = (): void => {
        for (let guard = 0; guard < total / piece.length && written < total; guard++) {
          written += piece.length;
          if (!a.socket.write(piece)) {
            onBlocked?.();
            a.socket.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
    const p = pool(o.port);
    let exchange: H1Exchange | undefined;
    let received = 0;
    let markPaused: () => void = () => undefined;
    const paused = new Promise<void>((resolve) => {
      markPaused = resolve;
    });
    let isPaused = false;
    const done = send(
      p,
      {},
      {
        onExchange: (x) => {
          exchange = x;
        },
        onData: (x, chunk) => {
          received += chunk.length;
          if (!isPaused) {
            isPaused = true;
            x.pause();
            markPaused();
          }
        },
      },
    );
    await paused;
    // Once paused, the origin's writes back up: wait until it is (or becomes) blocked on a full socket.
    if (originSocket?.writableNeedDrain !== true) {
      await new Promise<void>((resolve) => {
        onBlocked = resolve;
      });
    }
    assert.ok(written < total, 'the origin was held back before writing everything');
    assert.ok(received < total);
    exchange?.resume();
    const answer = await done;
    assert.equal(answer.body.length, total);
  });

  it(`queues requests beyond maxConnections and serves them on the same sockets`, async () => {
    const waiting: Arrival[] = [];
    let released = false;
    const o = await origin((a) => {
      if (released) {
        a.socket.write(ok(a.target));
        return;
      }
      // Answer only once both connections hold a request, so the third must have queued.
      waiting.push(a);
      if (waiting.length < 2) return;
      released = true;
      for (const w of waiting) w.socket.write(ok(w.target));
    });
    const p = pool(o.port, { maxConnections: 2 });
    const answers = await Promise.all([send(p, { target: '/1' }), send(p, { target: '/2' }), send(p, { target: '/3' })]);
    assert.deepEqual(
      answers.map((a) => a.body),
      ['/1', '/2', '/3'],
    );
    assert.equal(o.accepted(), 2);
  });

  it('refuses a request with UPSTREAM_BUSY when the queue is full', async () => {
    const o = await origin(() => undefined);
    const p = pool(o.port, { maxConnections: 1, maxQueued: 1 });
    const first = assert.rejects(send(p, {}), { code: 'UPSTREAM_CLOSED' });
    const second = assert.rejects(send(p, {}), { code: 'UPSTREAM_CLOSED' });
    await assert.rejects(send(p, {}), { code: 'UPSTREAM_BUSY' });
    p.destroy();
    await first;
    await second;
  });

  it('passes a dial error to the caller unchanged', async () => {
    const refused = new BoundaryError('UPSTREAM_CONNECT_REFUSED', 'no');
    const p = createH1Pool({ connect: () => Promise.reject(refused), maxConnections: 1, timeouts: TIMEOUTS });
    await assert.rejects(send(p, {}), (err) => err === refused);
    assert.equal(p.connections, 0);
  });

  it('fails a response with broken framing with UPSTREAM_PROTOCOL_ERROR and drops the socket', async () => {
    const o = await origin((a) => a.socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n'));
    const p = pool(o.port);
    await assert.rejects(send(p, {}), { code: 'UPSTREAM_PROTOCOL_ERROR' });
    assert.equal(p.connections, 0);
  });

  it('close() lets running requests finish, then closes every socket', async () => {
    let arrived: (a: Arrival) => void = () => undefined;
    const held = new Promise<Arrival>((resolve) => {
      arrived = resolve;
    });
    const o = await origin((a) => arrived(a));
    const p = pool(o.port);
    const running = send(p, {});
    const arrival = await held;
    const closed = p.close();
    assert.equal(p.closed, true);
    assert.throws(() => p.request({ method: 'GET', target: '/', headers: [], body: null }, { onHead() {}, onData() {}, onEnd() {}, onError() {} }), { code: 'UPSTREAM_CLOSED' });
    arrival.socket.write(ok('last'));
    assert.equal((await running).body, 'last');
    await closed;
    assert.equal(p.connections, 0);
  });
});
