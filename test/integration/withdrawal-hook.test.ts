// The command withdrawal hook against real processes (argv, stdin, env, exit codes, timeouts) and the hook
// runner's retries over the memory store. The webhook is withdrawal-webhook.test.ts, release-pod.mjs
// withdrawal-release-pod.test.ts.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { HOOK_ERROR_AFTER_ATTEMPTS } from '../../src/supervisor/hook-runner.js';
import type { StoredWithdrawal } from '../../src/supervisor/store/store.js';
import { createHookDelivery } from '../../src/supervisor/withdrawal-hook.js';
import { waiterList, withinDeadline } from '../harness/waiters.js';
import {
  assertNoTokenLogged,
  captureLogger,
  script,
  startRunner,
  storedWithdrawal,
  storeWithWithdrawal,
  tempDir,
  WAIT_MS,
  withdrawal,
} from '../harness/withdrawal-hooks.js';

/** A hook that hangs: sleeps this long in the background, far past any test. */
const HUNG_HOOK_S = 3_600;
/** Bounds a hang only: the hook's own 200 ms timeout ends the delivery long before. */
const HOOK_HANG_BOUND_MS = 60_000;

after(assertNoTokenLogged);

describe('command hook', () => {
  it('runs argv without a shell, with the withdrawal on stdin and in BOUNDARY_* variables on top of the inherited env', async () => {
    const dir = await tempDir();
    const hook = await script(dir, 'hook.sh', 'cat > "$HOOK_OUT/stdin"\nenv | grep -e ^BOUNDARY_ -e ^HOOK_OUT | sort > "$HOOK_OUT/env"\nprintf "%s\\n" "$@" > "$HOOK_OUT/args"');
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: [hook, 'two words', '$HOME;'] }, { logger, env: { PATH: process.env.PATH, HOOK_OUT: dir } });
    await deliver(withdrawal({ attempts: 3 }));
    assert.deepEqual(JSON.parse(await readFile(join(dir, 'stdin'), 'utf8')), {
      id: 'w-1',
      sandboxId: 'sb-1',
      instanceId: 'sandbox-sb-1',
      reason: 'did not attach within the attach deadline (60 s)',
      at: '2025-01-02T03:04:05.000Z',
      attempt: 3,
    });
    assert.equal(
      await readFile(join(dir, 'env'), 'utf8'),
      [
        'BOUNDARY_INSTANCE_ID=sandbox-sb-1',
        'BOUNDARY_SANDBOX_ID=sb-1',
        'BOUNDARY_WITHDRAWAL_AT=2025-01-02T03:04:05.000Z',
        'BOUNDARY_WITHDRAWAL_ATTEMPT=3',
        'BOUNDARY_WITHDRAWAL_ID=w-1',
        'BOUNDARY_WITHDRAWAL_REASON=did not attach within the attach deadline (60 s)',
        `HOOK_OUT=${dir}`,
        '',
      ].join('\n'),
    );
    assert.equal(await readFile(join(dir, 'args'), 'utf8'), 'two words\n$HOME;\n');
  });

  it('reports a non-zero exit with its code and the last lines of stderr', async () => {
    const dir = await tempDir();
    const lines = Array.from({ length: 30 }, (_, i) => `echo "line ${i}" >&2`).join('\n');
    const hook = await script(dir, 'fail.sh', `${lines}\necho "pod not found" >&2\nexit 3`);
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: [hook] }, { logger });
    await assert.rejects(deliver(withdrawal()), (err: Error) => {
      assert.match(err.message, /exited with code 3: .*line 29 \| pod not found$/);
      assert.doesNotMatch(err.message, /line 1 \|/, 'only the last lines are quoted');
      return true;
    });
  });

  it('kills a command that does not finish within the timeout, with what it started', async () => {
    const dir = await tempDir();
    // The hook's `sleep` is the subject (a command that hangs), not a wait: the test awaits the rejection. The
    // background sleep holds the hook's stderr: unless it is killed with the shell, the delivery waits for it.
    const hook = await script(dir, 'hang.sh', `echo "waiting for the API" >&2\nsleep ${HUNG_HOOK_S} &\nwait`);
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: [hook], timeoutMs: 200 }, { logger });
    // Only the hook's own timeout (200 ms) can end this before HOOK_HANG_BOUND_MS; the sleep would take far longer.
    await assert.rejects(withinDeadline(deliver(withdrawal()), 'the hook delivery', HOOK_HANG_BOUND_MS), /no answer within 200 ms and was killed: waiting for the API/);
  });

  it('reports a program that cannot be started', async () => {
    const { logger } = captureLogger();
    const deliver = createHookDelivery({ command: ['/nonexistent/hook'] }, { logger });
    await assert.rejects(deliver(withdrawal()), /\/nonexistent\/hook could not run: ENOENT/);
  });

  it('is retried by the runner while it fails and marked delivered once it exits 0', async () => {
    const dir = await tempDir();
    const ready = join(dir, 'ready');
    const hook = await script(dir, 'until.sh', `[ -e "${ready}" ] && exit 0\necho "gate still held" >&2\nexit 3`);
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-retry');
    const runner = await startRunner(store, createHookDelivery({ command: [hook] }, { logger }), logger);
    const failed = await waitFor((l) => l.msg === 'withdrawal hook failed; will retry' && l.attempts === 2, 'second failure');
    assert.match(failed.err ?? '', /exited with code 3: gate still held/);
    assert.ok(failed.nextAttemptAt !== undefined && !Number.isNaN(Date.parse(failed.nextAttemptAt)));
    await writeFile(ready, '');
    runner.kick();
    const delivered = await waitFor((l) => l.msg === 'withdrawal hook delivered' && l.withdrawalId === pending.id, 'delivery');
    const stored = await storedWithdrawal(store, pending.id);
    assert.equal(stored.hook, 'delivered');
    assert.equal(stored.attempts, delivered.attempts);
    assert.ok(stored.attempts >= 3);
    assert.ok(stored.deliveredAt !== null);
    assert.match(stored.lastError ?? '', /code 3/);
  });
});

describe('runner', () => {
  it('delivers a withdrawal claimed with hook=true and the store shows it delivered', async () => {
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-runner');
    assert.equal(pending.hook, 'pending');
    const seen: StoredWithdrawal[] = [];
    await startRunner(store, async (w) => void seen.push(w), logger);
    const line = await waitFor((l) => l.msg === 'withdrawal hook delivered', 'delivery');
    assert.equal(line.withdrawalId, pending.id);
    assert.equal(line.attempts, 1);
    assert.deepEqual(
      seen.map((w) => [w.id, w.attempts]),
      [[pending.id, 1]],
    );
    const stored = await storedWithdrawal(store, pending.id);
    assert.equal(stored.hook, 'delivered');
    assert.equal(stored.attempts, 1);
  });

  it(`keeps retrying a failing hook, and logs at error from attempt ${HOOK_ERROR_AFTER_ATTEMPTS}`, async () => {
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-stuck');
    const runner = await startRunner(store, async () => Promise.reject(new Error('receiver is down')), logger);
    const line = await waitFor((l) => l.level === 50, 'error line');
    assert.equal(line.attempts, HOOK_ERROR_AFTER_ATTEMPTS);
    assert.equal(line.msg, 'withdrawal hook keeps failing; retrying until acknowledged');
    const before = await waitFor((l) => l.attempts === HOOK_ERROR_AFTER_ATTEMPTS - 1, 'the attempt before');
    assert.equal(before.level, 40);
    assert.equal(line.err, 'receiver is down');
    await runner.close();
    const stored = await storedWithdrawal(store, pending.id);
    assert.equal(stored.hook, 'pending');
    assert.equal(stored.lastError, 'receiver is down');
  });

  it('close() waits for the delivery in flight and records its result', async () => {
    const { logger, waitFor } = captureLogger();
    const { store, withdrawal: pending } = await storeWithWithdrawal('sandbox-close');
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const started = waiterList<string>();
    const runner = await startRunner(
      store,
      async (w) => {
        started.push(w.id);
        await gate;
      },
      logger,
    );
    await started.waitFor((id) => id === pending.id, WAIT_MS, 'delivery start');
    const closing = runner.close();
    release();
    await closing;
    await waitFor((l) => l.msg === 'withdrawal hook delivered', 'delivery');
    assert.equal((await storedWithdrawal(store, pending.id)).hook, 'delivered');
  });
});
