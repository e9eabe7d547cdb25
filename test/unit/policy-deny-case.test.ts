// The case warning for deny rule paths (docs/policy.md#case-insensitive-origins, issue 15).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { caseInsensitivePath } from '../../src/policy/deny-case.js';
import { compileGlob } from '../../src/policy/glob.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { E0, endpoint } from '../harness/policy-parse-fixtures.js';

const rest = (deny: string, extra = '') =>
  endpoint(`{ host: a.example.com, port: 443, protocol: rest, enforcement: enforce, access: full, deny_rules: [${deny}]${extra} }`);

describe('deny rule paths and case-insensitive origins', () => {
  it('warns with POLICY_WARN_DENY_PATH_CASE at the rule path and suggests the spelling for every case', () => {
    const policy = parsePolicy(rest('{ method: GET, path: "/v1/ok" }, { method: "*", path: "/admin/**" }'));
    const warnings = policy.warnings.filter((w) => w.code === 'POLICY_WARN_DENY_PATH_CASE');
    assert.deepEqual(warnings.map((w) => w.path), [`${E0}.deny_rules[0].path`, `${E0}.deny_rules[1].path`]);
    assert.ok((warnings[1]?.line ?? 0) >= 1);
    assert.match(warnings[1]?.message ?? '', /\/\[aA\]\[dD\]\[mM\]\[iI\]\[nN\]\/\*\*/);
  });
  it('does not warn when every letter is already in a class, or the path has none', () => {
    const policy = parsePolicy(rest('{ method: GET, path: "/[aA][dD][mM][iI][nN]/**" }, { method: GET, path: "/v[0-9]/**" }, { method: GET, path: "/1/*" }'));
    assert.deepEqual(policy.warnings.filter((w) => w.code === 'POLICY_WARN_DENY_PATH_CASE').map((w) => w.path), [`${E0}.deny_rules[1].path`]);
    assert.equal(parsePolicy(rest('{ method: GET, path: "/1/*" }')).warnings.length, 0);
  });
  it('does not warn on allow rules', () => {
    const text = endpoint('{ host: a.example.com, port: 443, protocol: rest, enforcement: enforce, rules: [{ allow: { method: GET, path: "/admin" } }] }');
    assert.deepEqual(parsePolicy(text).warnings, []);
  });
  it('writes a glob that denies every case of the path and nothing else', () => {
    const folded = caseInsensitivePath('/Admin/*.json');
    assert.equal(folded, '/[aA][dD][mM][iI][nN]/*.[jJ][sS][oO][nN]');
    const glob = compileGlob(folded);
    for (const path of ['/admin/x.json', '/ADMIN/x.JSON', '/aDmIn/x.Json']) assert.equal(glob.matches(path), true, path);
    for (const path of ['/admin/x.jso', '/admins/x.json', '/bdmin/x.json']) assert.equal(glob.matches(path), false, path);
    assert.equal(caseInsensitivePath('/v[0-9]/[!x]'), '/[vV][0-9]/[!x]');
  });
});

describe('allow_encoded_backslash and allow_encoded_nul', () => {
  it('read as booleans, default false', () => {
    const on = parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: rest, enforcement: enforce, access: full, allow_encoded_backslash: true, allow_encoded_nul: true }'));
    assert.equal(on.endpoints[0]?.allowEncodedBackslash, true);
    assert.equal(on.endpoints[0]?.allowEncodedNul, true);
    const off = parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: rest, enforcement: enforce, access: full }'));
    assert.equal(off.endpoints[0]?.allowEncodedBackslash, false);
    assert.equal(off.endpoints[0]?.allowEncodedNul, false);
  });
  it('refuse a non-boolean and protocol tcp', () => {
    assert.throws(() => parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, allow_encoded_nul: "yes" }')), (err: unknown) => {
      const issues = (err as { issues: { code: string; path: string }[] }).issues;
      return issues.some((i) => i.code === 'POLICY_TYPE' && i.path === `${E0}.allow_encoded_nul`);
    });
    assert.throws(() => parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: tcp, allow_encoded_backslash: true }')), (err: unknown) => {
      const issues = (err as { issues: { code: string; path: string }[] }).issues;
      return issues.some((i) => i.code === 'POLICY_TCP_L7_FIELD' && i.path === `${E0}.allow_encoded_backslash`);
    });
  });
});
