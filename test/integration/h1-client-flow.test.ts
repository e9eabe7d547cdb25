// h1-client flow control and pool limits against scripted origins: consumer abort, pause/resume
// backpressure, queueing beyond maxConnections, a full queue, dial and framing errors, and close().
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { BoundaryError } from '../../src/shared/errors.js';
import { createH1Pool, type H1Exchange } from '../../src/http1/h1-client.js';
import { type Arrival, h1Fixtures, ok, peerGone, send, TIMEOUTS } from '../harness/h1-origin.js';

describe('h1-client against scripted origins', { timeout: 20_000 }, () => {
  const { origin, pool } = h1Fixtures();

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
