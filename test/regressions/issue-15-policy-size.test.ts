// Regression of issue 15, "A large policy blocks the event loop" (`issues show 15`): nothing bounded a policy,
// so 100,000 endpoints (6.5 MB) held /readyz for over a minute and took RSS to 1.37 GB. Each named limit is
// now refused with its own code before the work it bounds: by parsePolicy, by a file reload on a running
// boundary (the old generation keeps serving), and by `policy check`.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { get } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { policyCommand } from '../../src/app/cli/policy.js';
import { createControlApplier } from '../../src/control/apply.js';
import type { CliIo } from '../../src/app/cli/io.js';
import { type ErrorCode, isBoundaryError } from '../../src/shared/errors.js';
import { MAX_POLICY_BYTES, MAX_POLICY_ENDPOINTS } from '../../src/policy/limits.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore, emptyPolicy } from '../../src/policy/store.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { largePolicyText } from '../harness/large-policy.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const fixture = (name: string): string => readFileSync(join(ROOT, 'fixtures/policies/invalid', name), 'utf8');

/** Valid YAML one byte over MAX_POLICY_BYTES: a comment, so only the byte limit can refuse it. */
const OVER_BYTES = `version: 1\nnetwork_policies: {}\n#${'x'.repeat(MAX_POLICY_BYTES)}\n`;
/** `fixture`: the small file that reaches the limit through aliases (also used for the reload and CLI cases). */
const OVER_LIMITS: readonly { readonly code: ErrorCode; readonly text: () => string; readonly file: boolean }[] = [
  { code: 'POLICY_LIMIT_BYTES', text: () => OVER_BYTES, file: true },
  { code: 'POLICY_LIMIT_ENDPOINTS', text: () => largePolicyText({ endpoints: MAX_POLICY_ENDPOINTS + 1 }), file: false },
  { code: 'POLICY_LIMIT_ENDPOINTS', text: () => fixture('limit-endpoints.yaml'), file: true },
  { code: 'POLICY_LIMIT_RULES', text: () => fixture('limit-rules.yaml'), file: true },
  { code: 'POLICY_LIMIT_ALIASES', text: () => fixture('limit-aliases.yaml'), file: true },
];

function cliIo(out: { text: string }): CliIo {
  return {
    stdout: { write: (t: string) => (out.text += t) },
    stderr: { write: () => true },
    env: {},
    cwd: ROOT,
    signal: new AbortController().signal,
    now: () => 0,
  };
}

function limitCodes(text: string): string[] {
  try {
    parsePolicy(text);
  } catch (err) {
    assert.ok(isBoundaryError(err));
    assert.equal(err.code, 'POLICY_INVALID');
    return err.issues.map((i) => i.code);
  }
  return [];
}

function readyz(port: number): Promise<{ status: number; body: { generation: number } }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/readyz' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { generation: number } }));
    }).on('error', reject);
  });
}

describe('issue 15: policy size limits', () => {
  for (const { code, text } of OVER_LIMITS) {
    it(`parsePolicy refuses a policy over its limit with ${code}`, () => {
      assert.deepEqual(limitCodes(text()), [code]);
    });
  }

  it('accepts a policy of exactly MAX_POLICY_ENDPOINTS endpoints', () => {
    assert.equal(parsePolicy(largePolicyText({ endpoints: MAX_POLICY_ENDPOINTS })).endpoints.length, MAX_POLICY_ENDPOINTS);
  });

  describe('a file reload over a limit on a running boundary', () => {
    let b: RunningBoundary;
    before(async () => {
      b = await startBoundary({ policy: largePolicyText({ endpoints: 10 }) });
    });
    after(() => b.close());

    for (const { code, text } of OVER_LIMITS.filter((l) => l.file)) {
      it(`is refused with ${code} while the old generation keeps serving`, async () => {
        const before = await readyz(b.adminPort);
        assert.equal(before.status, 200);
        const refusals = (): number => b.log.events().filter((e) => e.activity_name === 'FAILED').length;
        const refusedBefore = refusals();
        await b.writePolicy(text());
        // Resolves once the file's contents are applied or refused.
        await b.boundary.reloadPolicy();
        assert.ok(refusals() > refusedBefore, 'no CONFIG FAILED event');
        const now = await readyz(b.adminPort);
        assert.equal(now.status, 200);
        assert.equal(now.body.generation, before.body.generation);
        assert.ok(b.log.lines().some((line) => line.includes(code)), `no log line names ${code}`);
      });
    }
  });

  for (const { code, text } of OVER_LIMITS.filter((l) => l.file)) {
    it(`a control-channel push over the limit fails with ${code} and keeps the last good policy`, async () => {
      const store = createPolicyStore();
      const events: AuditEvent[] = [];
      const applier = createControlApplier({ store, parsePolicy, emptyPolicy, sink: { emit: (e) => events.push(e) }, now: () => 0 });
      const good = largePolicyText({ endpoints: 10 });
      await applier.applySettings({ kind: 'settings', generation: 1, settings: { failureMode: 'retain_last_valid' } });
      assert.equal((await applier.applyPolicy({ kind: 'policy', generation: 1, policyHash: parsePolicy(good).hash, policy: good })).result, 'applied');
      const kept = store.current();
      const outcome = await applier.applyPolicy({ kind: 'policy', generation: 2, policyHash: 'f'.repeat(64), policy: text() });
      assert.equal(outcome.result, 'failed');
      assert.equal(store.current(), kept);
      const status = outcome.status;
      assert.ok(status?.state === 'failed' && status.error?.message.includes(`(${code})`), JSON.stringify(status));
    });

    it(`policy check reports ${code} and exits 1`, async (t) => {
      const dir = await mkdtemp(join(tmpdir(), 'issue-15-size-'));
      t.after(() => rm(dir, { recursive: true, force: true }));
      const path = join(dir, 'policy.yaml');
      await writeFile(path, text());
      const out = { text: '' };
      assert.equal(await policyCommand(['check', path, '--json'], cliIo(out)), 1);
      const [report] = JSON.parse(out.text) as { ok: boolean; problems: { code: string }[] }[];
      assert.equal(report?.ok, false);
      assert.deepEqual(report?.problems.map((p) => p.code), [code]);
    });
  }
});
