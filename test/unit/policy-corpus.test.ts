// The policy corpora as one table: every broken fixture fails with its declared code at its declared path,
// and every fixture, OpenShell compatibility case and shipped example loads.
// Header lines: `# expect: <CODE> <yaml.path>` (`-` = any path) and, in valid files, `# warn: <CODE> <path-prefix>`.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument } from 'yaml';
import { ERROR_CODES, type ErrorCode, isBoundaryError, type Issue } from '../../src/shared/errors.js';
import { loadPolicyFile } from '../../src/policy/load.js';
import { parsePolicy } from '../../src/policy/parse.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const INVALID_DIR = join(ROOT, 'fixtures/policies/invalid');
const VALID_DIRS = ['fixtures/policies/valid', 'fixtures/policies/openshell', 'policies'];
const MIN_INVALID_FIXTURES = 30;
const MIN_OPENSHELL_CASES = 10;
const EXPECT_LINE = /^# expect: (POLICY_[A-Z0-9_]+) (\S+)\s*$/;
const WARN_LINE = /^# warn: (POLICY_WARN_[A-Z0-9_]+) (\S+)\s*$/;
/**
 * Codes a single file cannot produce: the wrapper, I/O failures of loadPolicyFile, and V15 (the first tcp
 * endpoint arriving by reload), which depends on the policy that was running before.
 */
// POLICY_LIMIT_BYTES needs a file over 4 MiB: test/regressions/issue-15-policy-size.test.ts generates one.
const NOT_FIXTURE_CODES = new Set(['POLICY_INVALID', 'POLICY_UNREADABLE', 'POLICY_TCP_RELOAD', 'POLICY_LIMIT_BYTES']);

function yamlFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir))
    .filter((name) => name.endsWith('.yaml'))
    .sort();
}

function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

interface Expectation {
  readonly code: ErrorCode;
  readonly path: string;
}

function expectationOf(file: string, text: string): Expectation {
  const match = EXPECT_LINE.exec(text.split('\n', 1)[0] ?? '');
  assert.ok(match, `${file}: the first line must be "# expect: <CODE> <yaml.path>"`);
  const [, code = '', path = ''] = match;
  assert.ok(isErrorCode(code), `${file}: ${code} is not in src/errors.ts`);
  return { code, path };
}

function warningsOf(text: string): Expectation[] {
  const out: Expectation[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('#')) break;
    const match = WARN_LINE.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined && isErrorCode(match[1])) {
      out.push({ code: match[1], path: match[2] });
    }
  }
  return out;
}

/** `network_policies.api.endpoints[0].host` -> ['network_policies', 'api', 'endpoints', 0, 'host']. */
function pathSegments(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of path.split('.')) {
    const match = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (!match) return [];
    if (match[1]) out.push(match[1]);
    for (const index of (match[2] ?? '').matchAll(/\[(\d+)\]/g)) out.push(Number(index[1]));
  }
  return out;
}

/** Lines (1-based) an issue at `path` may point to: the key's line and the value's first line. */
function linesAt(text: string, path: string): number[] | undefined {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: false });
  let node: unknown = doc.contents;
  let keyOffset: number | undefined;
  for (const segment of pathSegments(path)) {
    keyOffset = undefined;
    if (typeof segment === 'number' && isSeq(node)) {
      node = node.items[segment];
    } else if (typeof segment === 'string' && isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === segment);
      if (pair === undefined) return undefined;
      keyOffset = (pair.key as Node).range?.[0];
      node = pair.value;
    } else {
      return undefined;
    }
    if (node === undefined) return undefined;
  }
  const lines: number[] = [];
  if (keyOffset !== undefined) lines.push(lineCounter.linePos(keyOffset).line);
  const range = (node as Node | null)?.range;
  if (range) lines.push(lineCounter.linePos(range[0]).line);
  return lines;
}

function describeIssues(issues: readonly Issue[]): string {
  return issues.map((i) => `  ${i.code} ${i.path} ${i.line ?? '?'}:${i.column ?? '?'} ${i.message}`).join('\n');
}

describe('invalid policy corpus', () => {
  const files = yamlFiles('fixtures/policies/invalid');

  it(`holds at least ${MIN_INVALID_FIXTURES} broken policies, each declaring its expected failure`, () => {
    assert.ok(files.length >= MIN_INVALID_FIXTURES, `only ${files.length} invalid fixtures`);
    for (const file of files) expectationOf(file, readFileSync(join(INVALID_DIR, file), 'utf8'));
  });

  it('declares a fixture for every POLICY_* error code', () => {
    const declared = new Set(files.map((file) => expectationOf(file, readFileSync(join(INVALID_DIR, file), 'utf8')).code));
    const missing = Object.keys(ERROR_CODES).filter(
      (code) => code.startsWith('POLICY_') && !code.startsWith('POLICY_WARN_') && !NOT_FIXTURE_CODES.has(code) && !declared.has(code as ErrorCode),
    );
    assert.deepEqual(missing, []);
  });

  for (const file of files) {
    const text = readFileSync(join(INVALID_DIR, file), 'utf8');
    const header = EXPECT_LINE.exec(text.split('\n', 1)[0] ?? '');
    it(`rejects ${file} with ${header?.[1] ?? '?'} at ${header?.[2] ?? '?'}`, () => {
      const expected = expectationOf(file, text);
      let thrown: unknown;
      try {
        parsePolicy(text, { source: file });
      } catch (err) {
        thrown = err;
      }
      assert.ok(thrown !== undefined, `${file} loaded, but it must fail with ${expected.code}`);
      assert.ok(isBoundaryError(thrown), `${file} threw something other than a BoundaryError: ${String(thrown)}`);
      assert.equal(thrown.code, 'POLICY_INVALID');
      const issue = thrown.issues.find(
        (i) => i.code === expected.code && (expected.path === '-' || i.path === expected.path),
      );
      assert.ok(issue, `${file}: no ${expected.code} at ${expected.path}; issues were:\n${describeIssues(thrown.issues)}`);
      assert.ok(Number.isInteger(issue.line) && (issue.line ?? 0) >= 1, `${file}: issue has no line`);
      assert.ok(Number.isInteger(issue.column) && (issue.column ?? 0) >= 1, `${file}: issue has no column`);
      for (const other of thrown.issues) assert.ok(other.code.startsWith('POLICY_'), `${other.code} is not a POLICY_* code`);
      if (expected.path !== '-') {
        const lines = linesAt(text, expected.path);
        if (lines !== undefined && lines.length > 0) {
          assert.ok(lines.includes(issue.line ?? -1), `${file}: issue on line ${issue.line}, expected one of ${lines.join(', ')}`);
        }
      }
    });
  }
});

describe('valid policies, OpenShell compatibility cases and shipped examples', () => {
  it(`has at least ${MIN_OPENSHELL_CASES} OpenShell compatibility cases`, () => {
    assert.ok(yamlFiles('fixtures/policies/openshell').length >= MIN_OPENSHELL_CASES);
  });

  for (const dir of VALID_DIRS) {
    for (const file of yamlFiles(dir)) {
      const text = readFileSync(join(ROOT, dir, file), 'utf8');
      it(`loads ${dir}/${file}`, () => {
        let policy: ReturnType<typeof parsePolicy>;
        try {
          policy = parsePolicy(text, { source: file });
        } catch (err) {
          const issues = isBoundaryError(err) ? `\n${describeIssues(err.issues)}` : '';
          assert.fail(`${dir}/${file} failed to load: ${String(err)}${issues}`);
        }
        assert.equal(policy.generation, 0);
        assert.ok(Object.isFrozen(policy), 'the policy is frozen');
        for (const warning of policy.warnings) assert.ok(warning.code.startsWith('POLICY_WARN_'), warning.code);
        for (const expected of warningsOf(text)) {
          const found = policy.warnings.some((w) => w.code === expected.code && w.path.startsWith(expected.path));
          assert.ok(found, `${file}: expected ${expected.code} under ${expected.path}; warnings:\n${describeIssues(policy.warnings)}`);
        }
      });
    }
  }

  for (const file of yamlFiles('policies')) {
    it(`loads policies/${file} from disk with loadPolicyFile, with no warning`, async () => {
      const policy = await loadPolicyFile(join(ROOT, 'policies', file));
      assert.ok(policy.entries.length > 0, 'a shipped example allows something');
      // What we ship is what users copy: it must pass the checks it would teach them to fix.
      assert.deepEqual(policy.warnings, [], `policies/${file}:\n${describeIssues(policy.warnings)}`);
    });
  }

  it('ships a default policy that enforces every inspected endpoint explicitly', async () => {
    const policy = await loadPolicyFile(join(ROOT, 'policies/default.yaml'));
    assert.deepEqual(
      policy.warnings.filter((w) => w.code === 'POLICY_WARN_AUDIT_DEFAULT'),
      [],
    );
    for (const endpoint of policy.endpoints.filter((e) => e.inspected)) assert.equal(endpoint.enforcement, 'enforce', endpoint.id);
  });

  it('fails POLICY_UNREADABLE for a file that does not exist', async () => {
    await assert.rejects(loadPolicyFile(join(ROOT, 'fixtures/policies/no-such-file.yaml')), { code: 'POLICY_UNREADABLE' });
  });
});
