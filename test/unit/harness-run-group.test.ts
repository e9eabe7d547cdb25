// The harness's runGroup: what a command started must not outlive it, on its timeout or on its own exit.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { runGroup } from '../harness/run-group.js';

/** A bound for a command that is never killed (the bug these tests catch), not a budget. */
const TEST_TIMEOUT_MS = 30_000;
/** Long enough for bash to print on a loaded machine: the first test needs its output before the kill. */
const COMMAND_TIMEOUT_MS = 3_000;
/** A SIGKILL is acted on when the process next runs; on a loaded machine that can take a moment. */
const STOP_POLL_MS = 20;

/** Gone, or a zombie waiting for its new parent to reap it: either way it runs no more. */
async function stopped(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat === undefined || stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}

/** The pid bash printed, once that process has stopped (the test's own timeout bounds the wait). */
async function printedPidStops(stdout: string): Promise<void> {
  const pid = Number(stdout.trim());
  assert.ok(Number.isInteger(pid) && pid > 0, `bash printed its child's pid: ${JSON.stringify(stdout)}`);
  while (!(await stopped(pid))) await delay(STOP_POLL_MS);
}

it('kills what the command started when its timeout passes', { timeout: TEST_TIMEOUT_MS }, async () => {
  const out = await runGroup('bash', ['-c', 'sleep 300 & echo $!; wait'], { timeoutMs: COMMAND_TIMEOUT_MS });
  assert.equal(out.timedOut, true);
  assert.equal(out.code, -1);
  await printedPidStops(out.stdout);
});

it('kills what the command left running when it exits', { timeout: TEST_TIMEOUT_MS }, async () => {
  const out = await runGroup('bash', ['-c', 'sleep 300 >/dev/null 2>&1 & echo $!; exit 3'], { timeoutMs: TEST_TIMEOUT_MS });
  assert.equal(out.timedOut, false);
  assert.equal(out.code, 3);
  await printedPidStops(out.stdout);
});

it('returns what the command printed', { timeout: TEST_TIMEOUT_MS }, async () => {
  const out = await runGroup('bash', ['-c', 'echo out; echo err >&2'], { timeoutMs: TEST_TIMEOUT_MS });
  assert.deepEqual(out, { code: 0, stdout: 'out\n', stderr: 'err\n', timedOut: false });
});
