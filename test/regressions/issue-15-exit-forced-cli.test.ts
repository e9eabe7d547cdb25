// Regression of issue 15, "Holds against a hostile workload" (`issues show 15`): "Shutdown must be bounded whatever
// state it is in: a drain deadline, then force-close everything, exit code saying which". The forced path (exit 3)
// was reachable only in-process: `boundary run` had no flag for the drain deadline or the in-flight grace, so an
// operator could not fit the drain into a pod's terminationGracePeriodSeconds. Now `--shutdown-drain-ms` and
// `--close-grace-ms` set them, validated like the other numeric flags; this runs the real CLI and sends SIGTERM.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { EXIT_DRAIN_FORCED, EXIT_OK } from '../../src/app/cli/run.js';
import { CLOSE_GRACE_MS } from '../../src/proxy/limits.js';
import { type BoundaryCli, spawnBoundaryCli, standaloneFlags } from '../harness/cli-boundary.js';
import { l7Policy, rawClient, tcpOrigin } from '../harness/liveness.js';
import { withinDeadline } from '../harness/waiters.js';

/** Far below the 5 s in-flight grace (CLOSE_GRACE_MS): only the deadline can end the stuck request. */
const SHORT_DRAIN_MS = 300;
const SHORT_GRACE_MS = 200;
/**
 * Shorter than the default in-flight grace: were --close-grace-ms ignored, this deadline would force the exit (3),
 * so the exit code alone says which flag ended the request, however long a loaded host takes.
 */
const DRAIN_BELOW_DEFAULT_GRACE_MS = CLOSE_GRACE_MS / 2;
/** Bounds a hang only: the exit code says what ended the drain, never the time it took. */
const EXIT_MARGIN_MS = 60_000;

type Exit = [number | null, NodeJS.Signals | null];

/**
 * `boundary run` in standalone mode with `flags`, and one request in flight to an origin that accepts and never
 * answers; resolves once the origin holds it.
 */
async function runWithStuckRequest(t: TestContext, flags: readonly string[]): Promise<{ cli: BoundaryCli; client: Socket }> {
  const origin = await tcpOrigin(() => undefined);
  const dir = await mkdtemp(join(tmpdir(), 'boundary-issue-15-exit-'));
  let cli: BoundaryCli | undefined;
  // boundary first: it keeps its state in dir until it has exited. SIGKILL: a failed test must not leave a child
  // that SIGTERM did not end.
  t.after(async () => {
    await cli?.kill();
    await origin.close();
    await rm(dir, { recursive: true, force: true });
  });
  await writeFile(join(dir, 'policy.yaml'), `version: 1\nnetwork_policies:\n${l7Policy('api.example.test', [origin.port])}`);
  await writeFile(join(dir, 'hosts'), '127.0.0.1 api.example.test\n');
  cli = spawnBoundaryCli([...standaloneFlags(dir), ...flags]);
  const listening = await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
  const port = Number(/:(\d+)$/.exec(listening.ocsf?.message ?? '')?.[1]);
  const client = await rawClient(port);
  t.after(() => client.destroy());
  client.write(`GET http://api.example.test:${origin.port}/stuck HTTP/1.1\r\nhost: api.example.test\r\n\r\n`);
  await withinDeadline(origin.next(), 'the request reaching the origin');
  return { cli, client };
}

/** SIGTERM, then the exit code and signal and how long after the signal it came. */
async function sigterm(cli: BoundaryCli, t: TestContext, deadlineMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; tookMs: number }> {
  const exited = once(cli.child, 'exit') as Promise<Exit>;
  const started = performance.now();
  cli.child.kill('SIGTERM');
  const [code, signal] = await withinDeadline(exited, 'exit after SIGTERM', deadlineMs);
  const tookMs = performance.now() - started;
  t.diagnostic(`exit ${code} ${Math.round(tookMs)} ms after SIGTERM`);
  return { code, signal, tookMs };
}

describe('issue 15: boundary run with a request that cannot finish by the drain deadline', () => {
  it('exits 3 at --shutdown-drain-ms, having destroyed the request in flight', async (t) => {
    const { cli, client } = await runWithStuckRequest(t, ['--shutdown-drain-ms', String(SHORT_DRAIN_MS)]);
    const clientClosed = once(client, 'close');
    const exit = await sigterm(cli, t, SHORT_DRAIN_MS + EXIT_MARGIN_MS);
    assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: EXIT_DRAIN_FORCED, signal: null }, cli.stderr());
    assert.ok(exit.tookMs >= SHORT_DRAIN_MS, `exited ${Math.round(exit.tookMs)} ms after SIGTERM, before the deadline`);
    assert.ok(cli.lines.some((line) => line.msg === 'drain deadline passed: the remaining connections and listeners were destroyed'));
    await withinDeadline(clientClosed, 'the in-flight connection destroyed');
  });

  it('exits 0 when --close-grace-ms ends the request before the deadline', async (t) => {
    const { cli } = await runWithStuckRequest(t, ['--close-grace-ms', String(SHORT_GRACE_MS), '--shutdown-drain-ms', String(DRAIN_BELOW_DEFAULT_GRACE_MS)]);
    const exit = await sigterm(cli, t, DRAIN_BELOW_DEFAULT_GRACE_MS + EXIT_MARGIN_MS);
    assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: EXIT_OK, signal: null }, cli.stderr());
    assert.ok(cli.lines.some((line) => line.ocsf?.status_detail === 'boundary_drained'));
  });
});
