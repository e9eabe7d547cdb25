// h1-client deadlines against scripted origins, on fake timers: headersTimeoutMs, bodyTimeoutMs and
// keepAliveTimeoutMs, each checked to the millisecond, and how activity and reuse restart them.
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import type { BoundaryError } from '../../src/shared/errors.js';
import { testTimers } from '../harness/clock.js';
import { h1Fixtures, ok, peerGone, send } from '../harness/h1-origin.js';
import { waiterList } from '../harness/waiters.js';

describe('h1-client against scripted origins', { timeout: 20_000 }, () => {
  const { origin, pool } = h1Fixtures();

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

  it('sets no phase timer per request on a kept-alive socket, and still times out a silent request after many', async () => {
    const fake = testTimers();
    let set = 0;
    const timers = {
      now: fake.now,
      clearTimeout: (handle: unknown) => fake.clearTimeout(handle),
      setTimeout: (callback: () => void, ms: number) => {
        set++;
        return fake.setTimeout(callback, ms);
      },
    };
    let silent = false;
    const o = await origin((a) => {
      if (!silent) a.socket.write(ok('x'));
    });
    const p = pool(o.port, { timers, timeouts: { headersTimeoutMs: 40, keepAliveTimeoutMs: 5_000 } });
    for (let i = 0; i < 20; i++) {
      await send(p, {});
      fake.advance(1);
    }
    // One headers deadline and one idle deadline, each still pending from the first request: none per request.
    assert.equal(set, 2);
    fake.advance(60);
    silent = true;
    const last = send(p, {});
    await o.arrival(20);
    fake.advance(39);
    assert.equal(p.connections, 1);
    fake.advance(1);
    await assert.rejects(last, { code: 'UPSTREAM_TIMEOUT' });
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
});
