import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readRequestHead } from '../../src/http2/request-head.js';

const BASE = [':method', 'GET', ':scheme', 'https', ':authority', 'api.example.test', ':path', '/a?b=1'];

describe('HTTP/2 request heads (RFC 9113 section 8.3)', () => {
  it('reads method, path and :authority as the one Host, keeping the other fields in order', () => {
    const read = readRequestHead([...BASE, 'accept', '*/*', 'content-type', 'Application/GRPC', 'te', 'trailers'], 'https');
    assert.ok(read.ok);
    assert.equal(read.head.method, 'GET');
    assert.equal(read.head.url, '/a?b=1');
    assert.equal(read.head.httpVersion, '2.0');
    assert.deepEqual(read.head.rawHeaders, ['host', 'api.example.test', 'accept', '*/*', 'content-type', 'Application/GRPC', 'te', 'trailers']);
    assert.equal(read.head.contentType, 'application/grpc');
  });

  it('takes a Host field when :authority is absent, and refuses one that names another authority', () => {
    const noAuthority = [':method', 'GET', ':scheme', 'https', ':path', '/'];
    const read = readRequestHead([...noAuthority, 'host', 'api.example.test'], 'https');
    assert.ok(read.ok);
    assert.deepEqual(read.head.rawHeaders, ['host', 'api.example.test']);
    assert.deepEqual(readRequestHead([...BASE, 'host', 'other.example.test'], 'https'), { ok: false, problem: 'authority-host-mismatch' });
    assert.ok(readRequestHead([...BASE, 'host', 'api.example.test'], 'https').ok);
  });

  it('has no host field when neither :authority nor Host came', () => {
    const read = readRequestHead([':method', 'GET', ':scheme', 'https', ':path', '/', 'accept', '*/*'], 'https');
    assert.ok(read.ok);
    assert.deepEqual(read.head.rawHeaders, ['accept', '*/*']);
  });

  const refusals: [string, string[], string][] = [
    ['a connection-specific field', [...BASE, 'connection', 'keep-alive'], 'connection-specific-header'],
    ['transfer-encoding', [...BASE, 'transfer-encoding', 'chunked'], 'connection-specific-header'],
    ['upgrade', [...BASE, 'upgrade', 'websocket'], 'connection-specific-header'],
    ['te other than trailers', [...BASE, 'te', 'gzip'], 'te-not-trailers'],
    ['an upper-case field name', [...BASE, 'X-Upper', 'v'], 'uppercase-header-name'],
    ['a repeated pseudo-header', [...BASE, ':path', '/b'], 'repeated-pseudo-header'],
    ['an unknown pseudo-header (extended CONNECT)', [...BASE, ':protocol', 'websocket'], 'unknown-pseudo-header'],
    ['a missing :path', [':method', 'GET', ':scheme', 'https', ':authority', 'a'], 'missing-pseudo-header'],
    ['CONNECT', [':method', 'CONNECT', ':authority', 'a:443'], 'connect-method'],
    ['a repeated Host', [...BASE, 'host', 'api.example.test', 'host', 'api.example.test'], 'repeated-host'],
    ['a field name that is not a token', [...BASE, 'x y', 'v'], 'bad-field-name'],
    ['an empty field name', [...BASE, '', 'v'], 'bad-field-name'],
    ['a value with LF', [...BASE, 'x-a', 'a\nb'], 'bad-field-value'],
    ['a value with NUL', [...BASE, 'x-a', 'a\0b'], 'bad-field-value'],
    ['a value with leading whitespace', [...BASE, 'x-a', ' a'], 'bad-field-value'],
    ['an :authority with CR', [':method', 'GET', ':scheme', 'https', ':authority', 'a\rb', ':path', '/'], 'bad-field-value'],
    ['a pseudo-header after a regular field', [':method', 'GET', ':scheme', 'https', 'accept', '*/*', ':path', '/'], 'pseudo-header-after-field'],
    ['an empty :path', [':method', 'GET', ':scheme', 'https', ':authority', 'a', ':path', ''], 'bad-path'],
    ['a :path that is not origin-form', [':method', 'GET', ':scheme', 'https', ':authority', 'a', ':path', 'http://a/'], 'bad-path'],
    ['* for a method other than OPTIONS', [':method', 'GET', ':scheme', 'https', ':authority', 'a', ':path', '*'], 'bad-path'],
    ['a Content-Length that is not digits', [...BASE, 'content-length', '1e3'], 'bad-content-length'],
    ['two different Content-Lengths', [...BASE, 'content-length', '1', 'content-length', '2'], 'bad-content-length'],
  ];
  for (const [what, raw, problem] of refusals) {
    it(`refuses ${what}`, () => {
      assert.deepEqual(readRequestHead(raw, 'https'), { ok: false, problem });
    });
  }

  it('reads Content-Length, and refuses one other than 0 on a stream its HEADERS ended', () => {
    const read = readRequestHead([...BASE, 'content-length', '12'], 'https');
    assert.ok(read.ok);
    assert.equal(read.head.contentLength, 12);
    assert.equal((readRequestHead(BASE, 'https') as { head: { contentLength: number } }).head.contentLength, -1);
    assert.deepEqual(readRequestHead([...BASE, 'content-length', '12'], 'https', true), { ok: false, problem: 'bad-content-length' });
    assert.ok(readRequestHead([...BASE, 'content-length', '0'], 'https', true).ok);
    assert.ok(readRequestHead([':method', 'OPTIONS', ':scheme', 'https', ':authority', 'a', ':path', '*'], 'https').ok);
  });

  it('refuses a :scheme other than the connection’s (http inside TLS, https in cleartext)', () => {
    assert.deepEqual(readRequestHead(BASE, 'http'), { ok: false, problem: 'scheme-mismatch' });
    assert.ok(readRequestHead(BASE, 'https').ok);
  });
});
