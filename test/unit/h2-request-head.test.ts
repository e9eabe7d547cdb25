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
  ];
  for (const [what, raw, problem] of refusals) {
    it(`refuses ${what}`, () => {
      assert.deepEqual(readRequestHead(raw, 'https'), { ok: false, problem });
    });
  }

  it('refuses a :scheme other than the connection’s (http inside TLS, https in cleartext)', () => {
    assert.deepEqual(readRequestHead(BASE, 'http'), { ok: false, problem: 'scheme-mismatch' });
    assert.ok(readRequestHead(BASE, 'https').ok);
  });
});
