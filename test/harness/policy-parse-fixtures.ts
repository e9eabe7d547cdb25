// Helpers for the policy-parse-* unit tests: collect the issues of a policy that must fail, expect one issue at a
// YAML path with a position, and write a one-endpoint policy under `network_policies.p`.

import assert from 'node:assert/strict';
import { type ErrorCode, type Issue, isBoundaryError } from '../../src/shared/errors.js';
import { parsePolicy } from '../../src/policy/parse.js';

/** The issues of a policy that must fail with POLICY_INVALID; fails the test when it loads. */
export function issuesOf(text: string, source?: string): readonly Issue[] {
  try {
    parsePolicy(text, source === undefined ? {} : { source });
  } catch (err) {
    assert.ok(isBoundaryError(err), String(err));
    assert.equal(err.code, 'POLICY_INVALID');
    return err.issues;
  }
  assert.fail('the policy loaded, but it should have failed');
}

/** The issue with `code` at `path`, asserting it carries a 1-based line and column. */
export function expectIssue(text: string, code: ErrorCode, path: string): Issue {
  const issues = issuesOf(text);
  const issue = issues.find((i) => i.code === code && i.path === path);
  assert.ok(issue, `no ${code} at ${path}; got:\n${issues.map((i) => `${i.code} ${i.path} ${i.message}`).join('\n')}`);
  assert.ok((issue.line ?? 0) >= 1 && (issue.column ?? 0) >= 1, 'issue has a 1-based position');
  return issue;
}

/** One endpoint under `network_policies.p.endpoints[0]`, written as YAML flow-map body lines. */
export function endpoint(lines: string, extra = ''): string {
  const body = lines
    .trim()
    .split('\n')
    .map((line, i) => `${i === 0 ? '      - ' : '        '}${line.trim()}`)
    .join('\n');
  return `version: 1\nnetwork_policies:\n  p:\n    endpoints:\n${body}\n    binaries: [{ path: "/**" }]\n${extra}`;
}

/** The YAML path of the endpoint that endpoint() writes. */
export const E0 = 'network_policies.p.endpoints[0]';
