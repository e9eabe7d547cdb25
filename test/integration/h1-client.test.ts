// h1-client connection handling against scripted origins: keep-alive reuse, response framing (Content-Length,
// chunked, close-delimited, no-body statuses, 1xx), when a socket is not reused, and the stale-socket retry.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { h1Fixtures, ok, peerGone, send } from '../harness/h1-origin.js';

describe('h1-client against scripted origins', { timeout: 20_000 }, () => {
  const { origin, pool } = h1Fixtures();

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
});
