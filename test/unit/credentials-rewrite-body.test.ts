import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { type BodyRewrite, bodyKindOf, MAX_BODY_REWRITE_BYTES, rewriteBody } from '../../src/credentials/rewrite-body.js';
import { scopeFor } from '../../src/credentials/scope.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';

const TRICKY = 'va"lue\\with/é';
const source = createStaticCredentialSource({
  providers: [
    { name: 'acme', env: { API_TOKEN: 'tok-123', TRICKY }, endpoints: [{ host: 'api.example.test', port: 443 }] },
    { name: 'other', env: { OTHER_TOKEN: 'other-999' }, endpoints: [{ host: 'other.example.test', port: 443 }] },
  ],
});
const ph = (key: string) => `openshell:resolve:env:${key}`;
const scope = scopeFor({ source, host: 'api.example.test', port: 443, path: '/' });

function body(contentType: string | undefined, text: string | Buffer, contentEncoding?: string): BodyRewrite {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  return rewriteBody({ contentType, contentEncoding, body: bytes, scope });
}

function text(result: BodyRewrite): string {
  assert.ok(result.ok, result.ok ? '' : `${result.error} ${result.reason}`);
  return result.body.toString('utf8');
}

function refusal(result: BodyRewrite) {
  return result.ok ? 'ok' : [result.status, result.error, result.reason];
}

describe('rewriteBody', () => {
  it('substitutes into JSON strings, escaped for JSON, with the new length for Content-Length (CR-14)', () => {
    const result = body('application/json; charset=utf-8', JSON.stringify({ token: ph('API_TOKEN'), t: `x-${ph('TRICKY')}` }));
    const out = text(result);
    assert.deepEqual(JSON.parse(out), { token: 'tok-123', t: `x-${TRICKY}` });
    assert.ok(result.ok && result.changed && result.body.length === Buffer.byteLength(out));
    assert.ok(result.ok && result.usedKeys.join() === 'API_TOKEN,TRICKY');
  });

  it('treats +json media types as JSON', () => {
    assert.equal(bodyKindOf('application/vnd.api+json'), 'json');
    assert.equal(bodyKindOf('text/plain; charset="UTF-8"'), 'text');
    assert.equal(bodyKindOf('text/plain; charset=iso-8859-1'), 'other');
    assert.equal(bodyKindOf(undefined), 'other');
  });

  it('substitutes form values, literal or percent-encoded as form encoders write them', () => {
    const encoded = encodeURIComponent(ph('API_TOKEN'));
    const out = text(body('application/x-www-form-urlencoded', `a=1+2&token=${encoded}&raw=${ph('TRICKY')}&z`));
    assert.equal(out, `a=1+2&token=tok-123&raw=${encodeURIComponent(TRICKY)}&z`);
    assert.equal(new URLSearchParams(out).get('raw'), TRICKY);
  });

  it('substitutes text bodies as they are', () => {
    assert.equal(text(body('text/plain', `key: ${ph('API_TOKEN')}\n`)), 'key: tok-123\n');
  });

  it('returns the same bytes when there is no marker', () => {
    const input = Buffer.from('{"a":1}');
    const result = rewriteBody({ contentType: 'application/json', contentEncoding: undefined, body: input, scope });
    assert.ok(result.ok && result.body === input && !result.changed);
  });

  const refusals: [string, () => BodyRewrite, unknown][] = [
    ['a key bound elsewhere', () => body('application/json', `{"t":"${ph('OTHER_TOKEN')}"}`), [403, 'credential_endpoint_mismatch', 'endpoint-mismatch']],
    ['a key bound elsewhere in an opaque body', () => body('application/octet-stream', ph('OTHER_TOKEN')), [403, 'credential_endpoint_mismatch', 'endpoint-mismatch']],
    ['an unknown key', () => body('text/plain', ph('NOPE')), [500, 'credential_unavailable', 'unknown-key']],
    ['a JSON \\u-escaped marker', () => body('application/json', '{"t":"openshell\\u003aresolve\\u003aenv\\u003aAPI_TOKEN"}'), [500, 'credential_unavailable', 'leftover-marker']],
    ['a percent-encoded marker in a text body', () => body('text/plain', 'openshell%3Aresolve%3Aenv%3AAPI_TOKEN'), [500, 'credential_unavailable', 'leftover-marker']],
    ['a marker in a form field name', () => body('application/x-www-form-urlencoded', `${ph('API_TOKEN')}=1`), [500, 'credential_unavailable', 'leftover-marker']],
    ['a marker in a body type that is not rewritten', () => body('application/octet-stream', `xx${ph('API_TOKEN')}`), [500, 'credential_unavailable', 'leftover-marker']],
    ['a marker in a non-UTF-8 text body', () => body('text/plain; charset=latin1', ph('API_TOKEN')), [500, 'credential_unavailable', 'leftover-marker']],
    ['a marker in invalid UTF-8', () => body('application/json', Buffer.concat([Buffer.from([0xff]), Buffer.from(ph('API_TOKEN'))])), [500, 'credential_unavailable', 'leftover-marker']],
    ['a gzip body holding a marker (CR-15)', () => body('application/json', gzipSync(`{"t":"${ph('API_TOKEN')}"}`), 'gzip'), [500, 'credential_unavailable', 'encoded-body']],
    ['a deflate body holding a marker', () => body('text/plain', deflateSync(ph('API_TOKEN')), 'deflate'), [500, 'credential_unavailable', 'encoded-body']],
    ['a brotli body holding an encoded marker', () => body('text/plain', brotliCompressSync('openshell%3Aresolve%3Aenv%3AK'), 'br'), [500, 'credential_unavailable', 'encoded-body']],
    ['a body in a coding that cannot be inspected', () => body('text/plain', 'opaque', 'zstd'), [500, 'credential_unavailable', 'encoded-body']],
    ['a corrupt gzip body', () => body('text/plain', 'not gzip', 'gzip'), [500, 'credential_unavailable', 'encoded-body']],
    ['a body over the rewrite buffer (CR-16)', () => body('text/plain', 'x'.repeat(MAX_BODY_REWRITE_BYTES + 1)), [413, 'credential_body_too_large', 'body-too-large']],
  ];
  for (const [name, run, expected] of refusals) {
    it(`refuses ${name}`, () => {
      const result = run();
      assert.deepEqual(refusal(result), expected);
      assert.ok(!result.ok && !result.logMessage.includes('TOKEN') && !result.message.includes('tok-123'));
    });
  }

  it('passes a compressed body without markers unchanged', () => {
    const gz = gzipSync('{"a":1}');
    const result = body('application/json', gz, 'gzip');
    assert.ok(result.ok && result.body === gz && !result.changed);
  });

  it('accepts a body of exactly the rewrite buffer size', () => {
    assert.ok(body('text/plain', 'x'.repeat(MAX_BODY_REWRITE_BYTES)).ok);
  });

  it('refuses every marker when the request has no authority', () => {
    const none = scopeFor({ source, host: undefined, port: 80, path: '/' });
    const result = rewriteBody({ contentType: 'text/plain', contentEncoding: undefined, body: Buffer.from(ph('API_TOKEN')), scope: none });
    assert.deepEqual(refusal(result), [500, 'credential_unavailable', 'no-authority']);
  });

  it('refuses a substitution once the credential revision changed (CR-21)', () => {
    const rotating = createStaticCredentialSource({ providers: [{ name: 'p', env: { K: 'v1' }, endpoints: [{ host: 'h.test', port: 1 }] }] });
    const stale = scopeFor({ source: rotating, host: 'h.test', port: 1, path: '/' });
    rotating.replace([{ name: 'p', env: { K: 'v2' }, endpoints: [{ host: 'h.test', port: 1 }] }]);
    const result = rewriteBody({ contentType: 'text/plain', contentEncoding: undefined, body: Buffer.from(ph('K')), scope: stale });
    assert.deepEqual(refusal(result), [500, 'credential_unavailable', 'stale-revision']);
  });
});
