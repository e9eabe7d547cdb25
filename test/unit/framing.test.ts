import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkFraming, MAX_HEADER_COUNT } from '../../src/http1/framing.js';
import { clientResponseHeaders, upstreamRequestHeaders } from '../../src/http1/headers.js';

const HOST = ['Host', 'api.example.test'];

// [name, httpVersion, raw headers, expected status or 'ok']
const CASES: readonly (readonly [string, string, readonly string[], number | 'ok'])[] = [
  ['a plain GET', '1.1', HOST, 'ok'],
  ['CL and TE together (SM-01)', '1.1', [...HOST, 'Content-Length', '3', 'Transfer-Encoding', 'chunked'], 400],
  ['TE and CL together, other order (SM-01)', '1.1', [...HOST, 'Transfer-Encoding', 'chunked', 'Content-Length', '3'], 400],
  ['two differing Content-Length values (SM-02)', '1.1', [...HOST, 'Content-Length', '3', 'Content-Length', '4'], 400],
  ['two identical Content-Length values (SM-03 pin)', '1.1', [...HOST, 'Content-Length', '3', 'Content-Length', '3'], 400],
  ['Content-Length +2 (SM-04)', '1.1', [...HOST, 'Content-Length', '+2'], 400],
  ['Content-Length -1 (SM-04)', '1.1', [...HOST, 'Content-Length', '-1'], 400],
  ['Content-Length 1e3 (SM-04)', '1.1', [...HOST, 'Content-Length', '1e3'], 400],
  ['Content-Length 0x10 (SM-04)', '1.1', [...HOST, 'Content-Length', '0x10'], 400],
  ['Content-Length 2^64 (SM-04)', '1.1', [...HOST, 'Content-Length', '18446744073709551616'], 400],
  ['TE chunked, identity (SM-05)', '1.1', [...HOST, 'Transfer-Encoding', 'chunked, identity'], 400],
  ['TE xchunked (SM-05)', '1.1', [...HOST, 'Transfer-Encoding', 'xchunked'], 400],
  ['two TE headers (SM-05)', '1.1', [...HOST, 'Transfer-Encoding', 'chunked', 'Transfer-Encoding', 'chunked'], 400],
  ['TE with surrounding whitespace trimmed (SM-06)', '1.1', [...HOST, 'Transfer-Encoding', ' chunked '], 'ok'],
  ['TE on HTTP/1.0 (SM-06)', '1.0', [...HOST, 'Transfer-Encoding', 'chunked'], 400],
  ['two Host headers (HA-24)', '1.1', [...HOST, ...HOST], 400],
  ['no Host on HTTP/1.1 (HA-24)', '1.1', ['Accept', '*/*'], 400],
  ['no Host on HTTP/1.0', '1.0', ['Accept', '*/*'], 'ok'],
  ['NUL in a header value (SM-13)', '1.1', [...HOST, 'X-A', 'a\u0000b'], 400],
  ['invalid UTF-8 in a header value (SM-13)', '1.1', [...HOST, 'X-A', '\u00ff\u00fe'], 400],
  ['valid UTF-8 in a header value', '1.1', [...HOST, 'X-A', Buffer.from('café').toString('latin1')], 'ok'],
  ['more headers than the limit (RX-02)', '1.1', [...HOST, ...Array.from({ length: MAX_HEADER_COUNT * 2 }, (_, i) => (i % 2 === 0 ? `X-${i}` : 'v'))], 431],
];

describe('checkFraming', () => {
  for (const [name, version, raw, expected] of CASES) {
    it(`${expected === 'ok' ? 'accepts' : `answers ${expected} to`} ${name}`, () => {
      const result = checkFraming(version, raw);
      if (expected === 'ok') assert.equal(result.ok, true, JSON.stringify(result));
      else assert.equal(result.ok ? 'ok' : result.status, expected);
    });
  }
  it('reports Expect: 100-continue, the Upgrade token and whether a body follows', () => {
    const result = checkFraming('1.1', [...HOST, 'Expect', '100-continue', 'Upgrade', 'WebSocket', 'Content-Length', '5']);
    assert.deepEqual(result, { ok: true, host: 'api.example.test', upgrade: 'websocket', expectContinue: true, hasBody: true });
  });
});

describe('upstreamRequestHeaders', () => {
  it('strips hop-by-hop, proxy, Connection-nominated, forwarding and X-Boundary headers (CR-01..04)', () => {
    const raw = [
      'Host', 'evil.example', 'Connection', 'keep-alive, X-Secret-Hop', 'X-Secret-Hop', '1', 'Keep-Alive', 'timeout=5',
      'Proxy-Connection', 'keep-alive', 'Proxy-Authorization', 'Basic eA==', 'TE', 'trailers', 'Transfer-Encoding', 'chunked',
      'X-Forwarded-For', '6.6.6.6', 'Forwarded', 'for=6.6.6.6', 'X-Boundary-Policy', 'spoof', 'Accept', '*/*', 'Expect', '100-continue',
    ];
    assert.deepEqual(upstreamRequestHeaders(raw, { host: 'api.example.test' }), ['host', 'api.example.test', 'Accept', '*/*', 'via', '1.1 boundary']);
  });
  it('appends to an existing Via and keeps Upgrade for a WebSocket handshake', () => {
    const out = upstreamRequestHeaders(['Via', '1.0 other', 'Upgrade', 'websocket', 'Connection', 'Upgrade'], { host: 'h', upgrade: 'websocket' });
    assert.deepEqual(out, ['host', 'h', 'via', '1.0 other, 1.1 boundary', 'connection', 'upgrade', 'upgrade', 'websocket']);
  });
  it('names the version the request came in on in Via: 2 for HTTP/2, 1.0 for HTTP/1.0 (RFC 9110 section 7.6.3)', () => {
    assert.deepEqual(upstreamRequestHeaders(['Via', '1.1 edge'], { host: 'h', httpVersion: '2.0' }), ['host', 'h', 'via', '1.1 edge, 2 boundary']);
    assert.deepEqual(upstreamRequestHeaders([], { host: 'h', httpVersion: '1.0' }), ['host', 'h', 'via', '1.0 boundary']);
    assert.deepEqual(upstreamRequestHeaders([], { host: 'h', httpVersion: '1.1' }), ['host', 'h', 'via', '1.1 boundary']);
  });
});

describe('clientResponseHeaders', () => {
  it('drops hop-by-hop, nominated and X-Boundary headers from upstream (CR-03)', () => {
    const out = clientResponseHeaders([
      'Connection', 'close, X-Hop',
      'x-hop', '1',
      'Keep-Alive', 'timeout=5',
      'Transfer-Encoding', 'chunked',
      'X-Boundary-Policy', 'spoofed',
      'Set-Cookie', 'a=1',
      'set-cookie', 'b=2',
      'Content-Type', 'text/plain',
    ]);
    assert.deepEqual(out, ['Set-Cookie', 'a=1', 'set-cookie', 'b=2', 'Content-Type', 'text/plain']);
  });
});
