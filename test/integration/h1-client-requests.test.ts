// h1-client request writing against scripted origins: refusing unsafe heads before any byte goes out, and
// request bodies (Buffer with Content-Length, chunked streaming, length mismatches, a throwing iterator).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundaryError } from '../../src/shared/errors.js';
import { type Arrival, h1Fixtures, ok, peerGone, send } from '../harness/h1-origin.js';

describe('h1-client against scripted origins', { timeout: 20_000 }, () => {
  const { origin, pool } = h1Fixtures();

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
});
