// The harness's runGroup: what a command started must not outlive it, on its timeout or on its own exit.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { it } from 'node:test';
import { runGroup } from '../harness/run-group.js';

/** A bound for a command that is never killed (the bug these tests catch), not a budget. */
const TEST_TIMEOUT_MS = 30_000;

/** Gone, or a zombie waiting for its new parent to reap it: either way it runs no more. */
async function stopped(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat === undefined || stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}

it('kills what the command started when its timeout passes', { timeout: TEST_TIMEOUT_MS }, async () => {
  const out = await runGroup('bash', ['-c', 'sleep 300 & echo $!; wait'], { timeoutMs: 300 });
  assert.equal(out.timedOut, true);
  assert.equal(out.code, -1);
  assert.ok(await stopped(Number(out.stdout.trim())), 'the sleep bash started is stopped');
});

it('kills what the command left running when it exits', { timeout: TEST_TIMEOUT_MS }, async () => {
  const out = await runGroup('bash', ['-c', 'sleep 300 >/dev/null 2>&1 & echo $!; exit 3'], { timeoutMs: 60_000 });
  assert.equal(out.timedOut, false);
  assert.equal(out.code, 3);
  assert.ok(await stopped(Number(out.stdout.trim())), 'the sleep bash left behind is stopped');
});

it('returns what the command printed', { timeout: TEST_TIMEOUT_MS }, async () => {
  const out = await runGroup('bash', ['-c', 'echo out; echo err >&2'], { timeoutMs: 60_000 });
  assert.deepEqual(out, { code: 0, stdout: 'out\n', stderr: 'err\n', timedOut: false });
});
