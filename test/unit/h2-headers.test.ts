import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { h2RequestHeaders, h2ResponseHeaders, joinedCookies, withoutPseudo } from '../../src/http2/headers.js';

describe('HTTP/2 header lists', () => {
  it('builds an upstream request head: host becomes :authority, repeated names stay, te: trailers only when asked', () => {
    const flat = ['host', 'api.example.test:8443', 'Accept', 'a', 'x-multi', '1', 'x-multi', '2', 'connection', 'close', 'via', '1.1 boundary'];
    assert.deepEqual(h2RequestHeaders(flat, { method: 'POST', path: '/p', scheme: 'https', teTrailers: true }), {
      ':method': 'POST',
      ':path': '/p',
      ':scheme': 'https',
      ':authority': 'api.example.test:8443',
      accept: 'a',
      'x-multi': ['1', '2'],
      via: '1.1 boundary',
      te: 'trailers',
    });
    assert.equal(h2RequestHeaders(flat, { method: 'GET', path: '/', scheme: 'https', teTrailers: false }).te, undefined);
  });

  it('builds a response head without connection-specific fields, and trailers without :status', () => {
    const flat = ['Content-Type', 'text/plain', 'Transfer-Encoding', 'chunked', 'Keep-Alive', 'x', 'set-cookie', 'a=1', 'set-cookie', 'b=2'];
    assert.deepEqual(h2ResponseHeaders(200, flat), { ':status': 200, 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'] });
    assert.deepEqual(h2ResponseHeaders(undefined, ['grpc-status', '0']), { 'grpc-status': '0' });
  });

  it('drops pseudo-headers from a raw list', () => {
    assert.deepEqual(withoutPseudo([':status', '200', 'a', 'b']), ['a', 'b']);
  });

  it('joins split cookie fields for HTTP/1.1 with "; " (RFC 9113 section 8.2.3), leaving a single one alone', () => {
    const one = ['cookie', 'a=1', 'x', 'y'];
    assert.equal(joinedCookies(one), one);
    assert.deepEqual(joinedCookies(['x', 'y', 'cookie', 'a=1', 'z', 'w', 'cookie', 'b=2']), ['x', 'y', 'cookie', 'a=1; b=2', 'z', 'w']);
  });
});
