// `boundary run` enables no async `destroy` hook, once started and after a request: with one enabled, every
// AsyncResource made registers a weak handle, which costs the garbage collector on every request and which Node 22's
// teardown of the environment has been seen to crash on (docs/development.md). A dependency that starts to enable
// one fails this. The probe (test/harness/destroy-hook-probe.mjs) is first shown to see a hook where there is one.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { type LoggedChild, spawnLogged } from '../harness/child-lines.js';
import { MAIN, PROJECT_ROOT, standaloneFlags } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { rawClient } from '../harness/liveness.js';
import { withinDeadline } from '../harness/waiters.js';

const PROBE = fileURLToPath(new URL('../harness/destroy-hook-probe.mjs', import.meta.url));
const PROBE_FLAGS = ['--expose-internals', '--import', PROBE];

/** What the probe in `child` answers when asked for the `nth` time. */
async function destroyHooks(child: LoggedChild, nth: number): Promise<string> {
  child.child.kill('SIGUSR2');
  const prefix = `destroy-hooks ${nth} `;
  return (await child.waitForText((text) => text.startsWith(prefix))).slice(prefix.length);
}

function started(t: TestContext, child: LoggedChild): LoggedChild {
  t.after(() => (child.child.exitCode === null && child.child.signalCode === null ? child.kill() : undefined));
  return child;
}

describe('async destroy hooks', () => {
  it('the probe sees one that a process enables', async (t) => {
    const script = "require('node:async_hooks').createHook({ destroy() {} }).enable(); console.log('enabled'); setInterval(() => {}, 1000);";
    const child = started(t, spawnLogged([process.execPath, ...PROBE_FLAGS, '-e', script], { label: 'hooked' }));
    await child.waitForText((text) => text === 'enabled');
    assert.equal(await destroyHooks(child, 1), 'true');
  });

  it('boundary run enables none, started and after a request', async (t) => {
    // dir holds boundary's --state-dir: removed after the hook that kills boundary.
    await withStateDir(t, 'boundary-destroy-hooks-', async (dir) => {
      await writeFile(join(dir, 'policy.yaml'), 'version: 1\nnetwork_policies: {}\n');
      await writeFile(join(dir, 'hosts'), '127.0.0.1 api.example.test\n');
      const cli = started(t, spawnLogged([process.execPath, ...PROBE_FLAGS, '--import', 'tsx', MAIN, 'run', ...standaloneFlags(dir)], { cwd: PROJECT_ROOT, label: 'boundary' }));
      const listening = await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
      assert.equal(await destroyHooks(cli, 1), 'false');
      const client = await rawClient(Number(/:(\d+)$/.exec(listening.ocsf?.message ?? '')?.[1]));
      t.after(() => client.destroy());
      const answered = new Promise<string>((resolve) => client.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))));
      client.write('GET http://api.example.test/ HTTP/1.1\r\nhost: api.example.test\r\n\r\n');
      assert.match(await withinDeadline(answered, 'the denial'), /^HTTP\/1\.1 403 /);
      assert.equal(await destroyHooks(cli, 2), 'false');
    });
  });
});
