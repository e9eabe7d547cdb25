// Regression of issue 15, "Holds against a hostile workload" (`issues show 15`), soak finding: every policy reload
// booted a parse worker, about 140 ms of CPU even for a policy of a few lines, so a policy reloaded every second
// kept the boundary at half a core. A policy below OFF_THREAD_MIN_BYTES is now parsed in place, with no worker.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isBoundaryError } from '../../src/shared/errors.js';
import { createPolicyCompiler, OFF_THREAD_MIN_BYTES, spawnParseWorker } from '../../src/policy/parse-off-thread.js';
import { parsePolicy } from '../../src/policy/parse.js';

const SMALL = `version: 1
network_policies:
  t:
    endpoints:
      - { host: api.example.test, port: 443 }
    binaries: [{ path: "/**" }]
`;

/** SMALL padded with a trailing comment to exactly `bytes` bytes: the same policy, at a chosen size. */
function padded(bytes: number): string {
  const comment = `# ${'x'.repeat(bytes - SMALL.length - 3)}\n`;
  const text = SMALL + comment;
  assert.equal(Buffer.byteLength(text), bytes);
  return text;
}

function countingCompiler(): { compiler: ReturnType<typeof createPolicyCompiler>; spawned: () => number } {
  let spawned = 0;
  const compiler = createPolicyCompiler({
    spawn() {
      spawned++;
      return spawnParseWorker();
    },
  });
  return { compiler, spawned: () => spawned };
}

describe('issue 15: a small policy reload starts no worker', () => {
  it('parses a policy just below OFF_THREAD_MIN_BYTES in place, to the policy parsePolicy makes', async (t) => {
    const { compiler, spawned } = countingCompiler();
    t.after(() => compiler.close());
    for (const text of [SMALL, padded(OFF_THREAD_MIN_BYTES - 1)]) {
      const policy = await compiler.parse(text, { source: 'policy.yaml' });
      assert.equal(policy.hash, parsePolicy(text, { source: 'policy.yaml' }).hash);
    }
    assert.equal(spawned(), 0);
  });

  it('refuses an invalid small policy in place with its code', async (t) => {
    const { compiler, spawned } = countingCompiler();
    t.after(() => compiler.close());
    await assert.rejects(compiler.parse('version: 2\n'), (err) => isBoundaryError(err) && err.code === 'POLICY_INVALID');
    assert.equal(spawned(), 0);
  });

  it('still parses a policy of OFF_THREAD_MIN_BYTES on a worker', async (t) => {
    const { compiler, spawned } = countingCompiler();
    t.after(() => compiler.close());
    const text = padded(OFF_THREAD_MIN_BYTES);
    const policy = await compiler.parse(text, { source: 'policy.yaml' });
    assert.equal(policy.hash, parsePolicy(text, { source: 'policy.yaml' }).hash);
    assert.equal(spawned(), 1);
  });
});
