import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { renderHead } from '../../src/http1/server-head.js';
import { type AnswerOwner, ServerResponse } from '../../src/http1/server-response.js';

/** An owner whose socket records each write (as latin1 text) instead of sending it. */
function owner(): AnswerOwner & { readonly writes: string[]; answers: number } {
  const writes: string[] = [];
  const socket = {
    destroyed: false,
    write(data: Buffer | string) {
      writes.push(typeof data === 'string' ? data : data.toString('latin1'));
      return true;
    },
    cork() {},
    uncork() {},
  } as unknown as Socket;
  const o = {
    socket,
    keepAliveTimeoutMs: 5_000,
    writes,
    answers: 0,
    answered() {
      o.answers++;
    },
    destroy() {},
  };
  return o;
}

const answer = (o: AnswerOwner): ServerResponse => new ServerResponse(o, 'GET', 1, 1, true, undefined);

describe('ServerResponse events', () => {
  it('calls on() listeners every time, once() listeners once, in the order added', () => {
    const res = answer(owner());
    const calls: string[] = [];
    res.on('close', () => calls.push('a'));
    res.once('close', () => calls.push('b'));
    res.on('close', () => calls.push('c'));
    assert.equal(res.emit('close'), true);
    assert.equal(res.emit('close'), true);
    assert.deepEqual(calls, ['a', 'b', 'c', 'a', 'c']);
  });

  it('removes a once() listener by the function it was given, and only the last one added', () => {
    const res = answer(owner());
    const calls: string[] = [];
    const drain = (): void => {
      calls.push('drain');
    };
    res.once('drain', drain);
    res.removeListener('drain', drain);
    assert.equal(res.emit('drain'), false);
    res.on('drain', drain);
    res.on('drain', drain);
    res.removeListener('drain', drain);
    res.emit('drain');
    assert.deepEqual(calls, ['drain']);
  });

  it('keeps the two events apart and leaves a listener added while emitting to the next emit', () => {
    const res = answer(owner());
    const calls: string[] = [];
    res.on('drain', () => calls.push('drain'));
    res.on('close', () => {
      calls.push('close');
      res.on('close', () => calls.push('late'));
    });
    res.emit('close');
    assert.deepEqual(calls, ['close']);
    res.emit('close');
    assert.deepEqual(calls, ['close', 'close', 'late']);
  });
});

describe('ServerResponse writes', () => {
  it('writes a whole answer (head and body) in one write', () => {
    const o = owner();
    const res = answer(o);
    res.attach();
    res.writeHead(200, ['Content-Type', 'text/plain', 'Content-Length', '2']);
    res.end(Buffer.from('ok'));
    assert.equal(o.writes.length, 1);
    assert.match(o.writes[0] ?? '', /^HTTP\/1\.1 200 OK\r\nContent-Type: text\/plain\r\nContent-Length: 2\r\n[\s\S]*\r\n\r\nok$/);
    assert.equal(o.answers, 1);
  });

  it('keeps what was written before its turn and sends it in order once attached', () => {
    const o = owner();
    const res = answer(o);
    res.writeHead(200, ['Transfer-Encoding', 'chunked']);
    res.write('a');
    res.end(Buffer.from('bc'));
    assert.deepEqual(o.writes, []);
    res.attach();
    assert.match(o.writes.join(''), /\r\n\r\n1\r\na\r\n2\r\nbc\r\n0\r\n\r\n$/);
    assert.equal(o.answers, 1);
  });
});

describe('renderHead framing fields', () => {
  const context = { hasBody: true, chunkedAllowed: true, keepAlive: true, knownLength: undefined, keepAliveTimeoutMs: 5_000 };

  it('knows Content-Length, Transfer-Encoding, Connection and Date in any case, in a list or an object', () => {
    const length = renderHead(200, ['CONTENT-LENGTH', '2', 'dAtE', 'x'], undefined, context);
    assert.doesNotMatch(length.text, /Transfer-Encoding|\r\nDate: /);
    assert.match(length.text, /\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n$/);
    assert.equal(length.chunked, false);
    const chunked = renderHead(200, { 'transfer-ENCODING': 'gzip, Chunked' }, undefined, context);
    assert.equal(chunked.chunked, true);
    assert.doesNotMatch(chunked.text, /Content-Length/);
    const close = renderHead(200, { Connection: 'Close', 'content-length': 0 }, undefined, context);
    assert.equal(close.last, true);
    assert.doesNotMatch(close.text, /keep-alive/i);
    // Names of the same lengths that are none of them change nothing.
    const other = renderHead(200, ['Content-Lengtx', '2', 'Connectiox', 'close', 'Dat3', 'x'], undefined, { ...context, keepAliveTimeoutMs: 61_000 });
    assert.match(other.text, /\r\nDate: [^\r]+ GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=61\r\nTransfer-Encoding: chunked\r\n\r\n$/);
    assert.equal(other.last, false);
  });
});
