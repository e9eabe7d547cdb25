import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalTarget, MAX_REQUEST_TARGET_CHARS } from '../../src/proxy/path.js';

// [input, canonical path or problem, query]
const ACCEPTED: readonly (readonly [string, string, string])[] = [
  ['/', '/', ''],
  ['/a/b', '/a/b', ''],
  ['/a/b/', '/a/b/', ''],
  ['/v1/x.json?format=csv', '/v1/x.json', 'format=csv'],
  ['/a/./b', '/a/b', ''],
  ['/a/b/../c', '/a/c', ''],
  ['/a/b/..', '/a/', ''],
  ['/a/..;/b', '/b', ''],
  ['/a;jsessionid=1/b', '/a/b', ''],
  ['//admin', '/admin', ''],
  ['/a//b///c', '/a/b/c', ''],
  ['/%7Euser/%41', '/~user/A', ''],
  ['/a%2fb', '/a%2Fb', ''],
  ['/a%3bb', '/a%3Bb', ''],
  ['/a%20b', '/a%20b', ''],
  ['/x?a=../b', '/x', 'a=../b'],
  ['/a/%2e/b', '/a/b', ''],
];

const REFUSED: readonly (readonly [string, string])[] = [
  ['/a/../../b', 'escapes-root'],
  ['/%2e%2e/x', 'escapes-root'],
  ['/..', 'escapes-root'],
  ['/public/..%2fsecret', 'encoded-slash'],
  ['/a%2Fb', 'encoded-slash'],
  ['/a#frag', 'fragment'],
  ['/a\u0000b', 'control-or-non-ascii'],
  ['/a\u007fb', 'control-or-non-ascii'],
  ['/caf\u00e9', 'control-or-non-ascii'],
  ['/a b', 'control-or-non-ascii'],
  ['/a%zz', 'bad-escape'],
  ['/a%4', 'bad-escape'],
  ['*', 'not-origin-form'],
  ['a/b', 'not-origin-form'],
  [`/${'a'.repeat(MAX_REQUEST_TARGET_CHARS)}`, 'too-long'],
];

describe('canonicalTarget', () => {
  for (const [input, path, query] of ACCEPTED) {
    it(`canonicalises ${JSON.stringify(input)} to ${path}`, () => {
      const result = canonicalTarget(input, { allowEncodedSlash: input.includes('%2f') });
      assert.deepEqual(result.ok ? { path: result.path, query: result.query } : result, { path, query });
    });
  }
  for (const [input, problem] of REFUSED) {
    it(`refuses ${JSON.stringify(input.slice(0, 40))} as ${problem}`, () => {
      assert.deepEqual(canonicalTarget(input), { ok: false, problem });
    });
  }
  it('keeps %2F and reports it when allow_encoded_slash is set', () => {
    assert.deepEqual(canonicalTarget('/@scope%2fpkg', { allowEncodedSlash: true }), { ok: true, path: '/@scope%2Fpkg', query: '', encodedSlash: true });
  });
  it('accepts a target of exactly the limit', () => {
    const target = `/${'a'.repeat(MAX_REQUEST_TARGET_CHARS - 1)}`;
    assert.equal(canonicalTarget(target).ok, true);
  });
  it('returns the input unchanged on the fast path', () => {
    assert.deepEqual(canonicalTarget('/repos/a/b?x=1'), { ok: true, path: '/repos/a/b', query: 'x=1', encodedSlash: false });
  });
});
