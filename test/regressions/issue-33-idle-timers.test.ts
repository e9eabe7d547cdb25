// Regression of issue 33, "Every sandbox pays for its sidecar's CPU": an idle boundary ran three timers of a second
// each (the event-loop sampler, policy DNS's housekeeping and the HTTP/1.1 server's deadline sweep, with no
// connection open), which drifted apart and woke it up to three times a second. The sweep now runs only while a
// connection is open, and the other two share one tick. This starts the real `boundary run` with the shipped default
// policy and a preload that records every timer callback it runs, and counts them while nothing asks anything of it.

import assert from 'node:assert/strict';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { isDnsReady, PROJECT_ROOT, spawnBoundaryCli, standaloneFlags } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';

const PRELOAD = pathToFileURL(join(PROJECT_ROOT, 'test', 'harness', 'timer-fires.mjs')).href;
/** After both listeners are up, so that start-up's own timers (a pending log line's flush) are behind it. */
const SETTLE_MS = 2_000;
const WINDOW_MS = 6_000;
/** One tick a second, and one more where the window's edges cut a second in two. */
const FIRES_MAX = WINDOW_MS / 1_000 + 1;

describe('issue 33: an idle sidecar wakes once a second', () => {
  it('runs one timer a second while nothing is connected or asked', async (t) => {
    await withStateDir(t, 'boundary-issue-33-timers-', async (dir) => {
      await copyFile(join(PROJECT_ROOT, 'policies', 'default.yaml'), join(dir, 'policy.yaml'));
      await writeFile(join(dir, 'hosts'), '');
      const fires = join(dir, 'timer-fires');
      await writeFile(fires, '');
      const cli = spawnBoundaryCli(standaloneFlags(dir), { env: { ...process.env, NODE_OPTIONS: `--import=${PRELOAD}`, TIMER_FIRES_FILE: fires } });
      t.after(() => (cli.child.exitCode === null && cli.child.signalCode === null ? cli.kill() : undefined));
      await cli.waitFor(isDnsReady);
      await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
      await sleep(SETTLE_MS);
      const from = Date.now();
      await sleep(WINDOW_MS);
      const to = Date.now();
      const times = (await readFile(fires, 'utf8')).split('\n').filter((line) => line !== '').map(Number);
      const inWindow = times.filter((time) => time >= from && time < to);
      assert.ok(inWindow.length > 0, 'the preload saw the housekeeping tick: the count below means something');
      assert.ok(inWindow.length <= FIRES_MAX, `timer callbacks in ${WINDOW_MS} ms idle: ${inWindow.map((time) => time - from).join(', ')}`);
    });
  });
});
