// Issue 12: one supervisor with --state-dir survives a crash. The real CLI is killed with SIGKILL right after it
// answered an expectation; the restarted process still withdraws that instance (and a boundary that left before
// the crash) at its deadline, runs the hook once for each, and admits a new boundary at the generation reached
// before the crash. Without --state-dir the same crash forgets the expected instance: the contrast is asserted too.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml } from '../harness/control.js';
import {
  expectInstance,
  freePort,
  type SupervisorFiles,
  type SupervisorProcess,
  spawnSupervisorCli,
  waitForHookDelivered,
  writeSupervisorFiles,
} from '../harness/supervisor-cli.js';

const ATTACH_DEADLINE_S = 2;
const WAIT_MS = 30_000;

describe('supervisor state in --state-dir', () => {
  let dir: string;
  let pki: TestPki;
  let files: SupervisorFiles;
  let port: number;
  let adminPort: number;
  const running: SupervisorProcess[] = [];

  async function start(extra: readonly string[]): Promise<SupervisorProcess> {
    const started = await spawnSupervisorCli(
      [
        `--listen=127.0.0.1:${port}`,
        `--tls-dir=${files.tlsDir}`,
        `--policies=${join(dir, 'policies')}`,
        `--admin-listen=127.0.0.1:${adminPort}`,
        `--admin-token-file=${files.tokenFile}`,
        `--attach-deadline=${ATTACH_DEADLINE_S}`,
        `--withdrawal-hook=${files.hook}`,
        ...extra,
      ],
      'supervisor',
    );
    running.push(started);
    return started;
  }

  async function writePolicy(host: string): Promise<void> {
    await writeFile(join(dir, 'policies', '.sb-1.tmp'), policyYaml(host));
    await rename(join(dir, 'policies', '.sb-1.tmp'), join(dir, 'policies', 'sb-1.yaml'));
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'boundary-state-dir-'));
    pki = await makeTestPki();
    files = await writeSupervisorFiles(dir, pki, ['127.0.0.1']);
    await mkdir(join(dir, 'policies'));
    await writePolicy('one.example.test');
    port = await freePort();
    adminPort = await freePort();
  });

  after(async () => {
    for (const p of running) await p.child.kill().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps expected instances, deadlines and generations across a SIGKILL', async () => {
    const state = ['--state-dir', join(dir, 'state')];
    await mkdir(join(dir, 'state'));
    const first = await start(state);
    const leaver = makeTestClient(pki, { port, instanceId: 'pod-leaves' });
    await leaver.client.start();
    await leaver.waitState((s) => s.policy.effective, WAIT_MS);
    await writePolicy('two.example.test');
    const moved = await leaver.waitState((s) => (s.policy.generation ?? 0) >= 2, WAIT_MS);
    const generation = moved.policy.generation ?? 0;
    // It leaves for good: detached, its deadline now running.
    await leaver.client.close();
    await first.child.waitFor((l) => l.msg === 'boundary detached' && l.instanceId === 'pod-leaves', WAIT_MS);
    assert.equal(await expectInstance(adminPort, 'sb-1', 'never-attaches'), 202);
    await first.child.kill();

    const second = await start(state);
    // A boundary that holds nothing is admitted at the generation reached before the crash, not at 1.
    const fresh = makeTestClient(pki, { port, instanceId: 'pod-new' });
    await fresh.client.start();
    const admitted = await fresh.waitState((s) => s.policy.effective, WAIT_MS);
    assert.equal(admitted.policy.generation, generation);
    await Promise.all([waitForHookDelivered([second.child], 'never-attaches', WAIT_MS), waitForHookDelivered([second.child], 'pod-leaves', WAIT_MS)]);
    const calls = await files.hookCalls();
    assert.equal(calls.filter((l) => l.includes(' never-attaches ')).length, 1, calls.join('\n'));
    assert.equal(calls.filter((l) => l.includes(' pod-leaves ')).length, 1, calls.join('\n'));
    assert.equal(fresh.client.state().phase, 'attached', 'the live boundary was not withdrawn');
    await fresh.client.close();
    await second.child.stop();
  });

  it('forgets an expected instance across a SIGKILL without --state-dir (the failure this option exists for)', async () => {
    const first = await start([]);
    assert.equal(await expectInstance(adminPort, 'sb-1', 'forgotten'), 202);
    await first.child.kill();
    const second = await start([]);
    // Something is withdrawn in the next two deadlines only if it was remembered; nothing was.
    const probe = makeTestClient(pki, { port, instanceId: 'probe' });
    await probe.client.start();
    await probe.waitState((s) => s.policy.effective, WAIT_MS);
    await probe.client.close();
    await waitForHookDelivered([second.child], 'probe', WAIT_MS);
    assert.equal((await files.hookCalls()).filter((l) => l.includes(' forgotten ')).length, 0);
    await second.child.stop();
  });
});
