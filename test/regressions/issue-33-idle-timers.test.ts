// Regression of issue 33, "Every sandbox pays for its sidecar's CPU": an idle boundary ran three timers of a second
// each (the event-loop sampler, policy DNS's housekeeping and the HTTP/1.1 server's deadline sweep, with no
// connection open), which drifted apart and woke it up to three times a second. The sweep now runs only while a
// connection is open, and the other two share one tick. This starts the real `boundary run` with the shipped default
// policy and a preload that records every timer callback it runs, and counts them while nothing asks anything of it.

import assert from 'node:assert/strict';
import { copyFile, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { isDnsReady, PROJECT_ROOT, spawnBoundaryCli, standaloneFlags } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';

const PRELOAD = pathToFileURL(join(PROJECT_ROOT, 'test', 'harness', 'timer-fires.mjs')).href;
const WINDOW_MS = 3_000;
/** One tick a second, and one more where a window's edges cut a second in two. */
const FIRES_MAX = WINDOW_MS / 1_000 + 1;
/** Start-up work, and on a loaded host the event-loop sampler's busy cadence, end at different times: windows are
 *  tried until one is quiet. Three timers a second are never quiet, however many are tried. */
const MAX_WINDOWS = 15;
/** How long the preload may take to write what it holds after SIGUSR2. */
const DUMP_WAIT_MS = 10_000;
const DUMP_POLL_MS = 20;

describe('issue 33: an idle sidecar wakes once a second', () => {
  it('runs one timer a second while nothing is connected or asked', async (t) => {
    await withStateDir(t, 'boundary-issue-33-timers-', async (dir) => {
      await copyFile(join(PROJECT_ROOT, 'policies', 'default.yaml'), join(dir, 'policy.yaml'));
      await writeFile(join(dir, 'hosts'), '');
      const fires = join(dir, 'timer-fires');
      const cli = spawnBoundaryCli(standaloneFlags(dir), { env: { ...process.env, NODE_OPTIONS: `--import=${PRELOAD}`, TIMER_FIRES_FILE: fires } });
      t.after(() => (cli.child.exitCode === null && cli.child.signalCode === null ? cli.kill() : undefined));
      await cli.waitFor(isDnsReady);
      await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));

      /** Every timer callback's time so far, as the preload writes them on SIGUSR2. */
      const callbacks = async (): Promise<number[]> => {
        await rm(fires, { force: true });
        cli.child.kill('SIGUSR2');
        for (let waited = 0; waited < DUMP_WAIT_MS; waited += DUMP_POLL_MS) {
          const text = await readFile(fires, 'utf8').catch(() => undefined);
          if (text !== undefined) return text.split('\n').filter((line) => line !== '').map(Number);
          await sleep(DUMP_POLL_MS);
        }
        throw new Error(`no timer record within ${DUMP_WAIT_MS} ms of SIGUSR2`);
      };
      const windows: number[][] = [];
      for (let window = 0; window < MAX_WINDOWS; window++) {
        const from = Date.now();
        await sleep(WINDOW_MS);
        const to = Date.now();
        windows.push((await callbacks()).filter((time) => time >= from && time < to).map((time) => time - from));
        if ((windows.at(-1) as number[]).length <= FIRES_MAX) break;
      }
      const quietest = windows.reduce((a, b) => (b.length < a.length ? b : a));
      assert.ok(quietest.length > 0, 'the preload saw the housekeeping tick: the count below means something');
      assert.ok(quietest.length <= FIRES_MAX, `timer callbacks in each ${WINDOW_MS} ms idle window: ${windows.map((w) => w.length).join(', ')}; the quietest at ${quietest.join(', ')} ms`);
    });
  });
});
