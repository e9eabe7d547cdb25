import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BoundaryError } from '../../src/shared/errors.js';
import { h2RequestFields, h2ResponseFields, h2TrailerFields, joinedCookies, withoutPseudo } from '../../src/http2/headers.js';

describe('HTTP/2 header lists', () => {
  it('builds an upstream request head: host becomes :authority, repeated names stay, te: trailers only when asked', () => {
    const flat = ['host', 'api.example.test:8443', 'Accept', 'a', 'x-multi', '1', 'x-multi', '2', 'connection', 'close', 'via', '1.1 boundary'];
    assert.deepEqual(h2RequestFields(flat, { method: 'POST', path: '/p', scheme: 'https', teTrailers: true }), [
      ':method', 'POST',
      ':scheme', 'https',
      ':authority', 'api.example.test:8443',
      ':path', '/p',
      'accept', 'a',
      'x-multi', '1',
      'x-multi', '2',
      'via', '1.1 boundary',
      'te', 'trailers',
    ]);
    assert.equal(h2RequestFields(flat, { method: 'GET', path: '/', scheme: 'https', teTrailers: false }).includes('te'), false);
    // No host: no :authority at all (an empty one would be malformed).
    assert.deepEqual(h2RequestFields(['accept', 'a'], { method: 'GET', path: '/', scheme: 'http', teTrailers: false }), [':method', 'GET', ':scheme', 'http', ':path', '/', 'accept', 'a']);
  });

  it('refuses, before any byte is encoded, a request the encoder would write as given', () => {
    const pseudo = { method: 'GET', path: '/', scheme: 'https', teTrailers: false };
    const refused = (flat: string[], p = pseudo): void =>
      assert.throws(() => h2RequestFields(flat, p), (err: BoundaryError) => err.code === 'UPSTREAM_REQUEST_INVALID' && !err.message.includes('secret'));
    refused(['authorization', 'Bearer secret\r\nx-injected: 1']);
    refused(['authorization', 'Bearer secret\u010a']); // past latin1: the encoder would keep only its low byte, a LF
    refused(['x-nul', 'a\0b']);
    refused(['bad name', 'v']);
    refused(['host', 'a b']);
    refused([], { ...pseudo, method: 'GE T' });
    refused([], { ...pseudo, path: '/a b' });
    assert.throws(() => h2TrailerFields(['grpc-status', '0\r\n']), (err: BoundaryError) => err.code === 'UPSTREAM_REQUEST_INVALID');
    assert.deepEqual(h2TrailerFields(['Grpc-Status', '0', 'Connection', 'x']), ['grpc-status', '0']);
  });

  it('builds a response head without connection-specific fields, and trailers without :status', () => {
    const flat = ['Content-Type', 'text/plain', 'Transfer-Encoding', 'chunked', 'Keep-Alive', 'x', 'set-cookie', 'a=1', 'set-cookie', 'b=2'];
    assert.deepEqual(h2ResponseFields(200, flat), [':status', '200', 'content-type', 'text/plain', 'set-cookie', 'a=1', 'set-cookie', 'b=2']);
    assert.deepEqual(h2ResponseFields(undefined, ['grpc-status', '0']), ['grpc-status', '0']);
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
