import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalTarget, MAX_REQUEST_TARGET_CHARS } from '../../src/chain/path.js';

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

const NONE_KEPT = { encodedSlash: false, encodedBackslash: false, encodedNul: false } as const;

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
    assert.deepEqual(canonicalTarget('/@scope%2fpkg', { allowEncodedSlash: true }), { ok: true, path: '/@scope%2Fpkg', query: '', ...NONE_KEPT, encodedSlash: true });
  });
  it('accepts a target of exactly the limit', () => {
    const target = `/${'a'.repeat(MAX_REQUEST_TARGET_CHARS - 1)}`;
    assert.equal(canonicalTarget(target).ok, true);
  });
  it('returns the input unchanged on the fast path', () => {
    assert.deepEqual(canonicalTarget('/repos/a/b?x=1'), { ok: true, path: '/repos/a/b', query: 'x=1', ...NONE_KEPT });
  });
});

// docs/policy.md#path-canonicalisation, issue 15: escapes some origins read as a separator, a terminator or a second escape.
const RISKY: readonly (readonly [string, string])[] = [
  ['/a%5Cb', 'encoded-backslash'],
  ['/public%5c..%5cadmin', 'encoded-backslash'],
  ['/public\\..\\admin', 'encoded-backslash'],
  ['/admin%00.png', 'encoded-nul'],
  ['/%252e%252e/admin', 'double-encoded'],
  ['/%2561dmin', 'double-encoded'],
  ['/a/..%20/admin', 'dot-segment-lookalike'],
  ['/a/.../admin', 'dot-segment-lookalike'],
  ['/a/.%20/b', 'dot-segment-lookalike'],
];

describe('canonicalTarget: risky escapes (issue 15)', () => {
  for (const [input, problem] of RISKY) {
    it(`refuses ${JSON.stringify(input)} as ${problem} by default`, () => {
      assert.deepEqual(canonicalTarget(input), { ok: false, problem });
    });
  }
  it('keeps %5C, and a raw backslash as %5C, when allow_encoded_backslash is set', () => {
    const options = { allowEncodedBackslash: true };
    assert.deepEqual(canonicalTarget('/a%5cb\\c', options), { ok: true, path: '/a%5Cb%5Cc', query: '', ...NONE_KEPT, encodedBackslash: true });
  });
  it('keeps %00 when allow_encoded_nul is set, and never lets one option stand for another', () => {
    assert.deepEqual(canonicalTarget('/a%00b', { allowEncodedNul: true }), { ok: true, path: '/a%00b', query: '', ...NONE_KEPT, encodedNul: true });
    assert.deepEqual(canonicalTarget('/a%00b', { allowEncodedSlash: true, allowEncodedBackslash: true }), { ok: false, problem: 'encoded-nul' });
    assert.deepEqual(canonicalTarget('/a%5Cb', { allowEncodedSlash: true, allowEncodedNul: true }), { ok: false, problem: 'encoded-backslash' });
  });
  it('keeps %25 that no second decoding can turn into anything', () => {
    for (const [input, path] of [['/100%25', '/100%25'], ['/a%25zz', '/a%25zz'], ['/a%25%3f', '/a%25%3F']] as const) {
      const result = canonicalTarget(input);
      assert.deepEqual(result.ok ? result.path : result, path, input);
    }
  });
  it('never decodes twice: the once-decoded form is what goes to policy and upstream', () => {
    // `%25%36%31` is `%2561` once decoded: an origin that decodes again reads `a`.
    for (const input of ['/a%2541', '/%25%36%31dmin', '/%25%36%31dmin?x=1', '/%25a%31']) {
      assert.deepEqual(canonicalTarget(input), { ok: false, problem: 'double-encoded' }, input);
    }
  });
  it('reports the Windows reading of segments ending in a dot or a space, and keeps the path as written', () => {
    const cases = [
      ['/admin.', '/admin.', '/admin'],
      ['/admin%20', '/admin%20', '/admin'],
      ['/admin.%20./x', '/admin.%20./x', '/admin/x'],
      ['/wiki/Washington,_D.C.', '/wiki/Washington,_D.C.', '/wiki/Washington,_D.C'],
      ['/a.;x/b', '/a./b', '/a/b'],
      ['/admin%2E', '/admin.', '/admin'],
    ] as const;
    for (const [input, path, strippedPath] of cases) {
      const result = canonicalTarget(input);
      assert.deepEqual(result.ok ? { path: result.path, strippedPath: result.strippedPath } : result, { path, strippedPath }, input);
    }
  });
  it('has no stripped reading when no segment ends in a dot or space', () => {
    for (const input of ['/v1/x.json', '/a/./b', '/a/b/..', '/a%20b', '/.well-known/x']) {
      const result = canonicalTarget(input);
      assert.equal(result.ok && result.strippedPath, undefined, input);
    }
  });
});
