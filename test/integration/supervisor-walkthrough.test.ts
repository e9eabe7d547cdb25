// docs/supervisor.md's "Try it", run as written (root only): its setup block in one shell (certificates, the
// admin token, creds.yaml, policy check), the supervisor and the boundary as its two long-running lines, then
// its curl. All of it in a network namespace of the test's own, so the page's fixed ports clash with nothing;
// the checkout's dist/ is a staged build, as after `npm run build`.

import assert from 'node:assert/strict';
import { cp, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it } from 'node:test';
import { spawnLogged } from '../harness/child-lines.js';
import { PROJECT_ROOT } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { createNetnsPair, netnsSkipReason } from '../harness/netns-pair.js';
import { runGroup } from '../harness/run-group.js';
import { stageBoundary } from '../harness/stage.js';

const TEST_BUDGET_MS = 240_000;
const COMMAND_TIMEOUT_MS = 60_000;
/** A bound for the attach on a loaded machine, not a budget the test asserts. */
const ATTACH_WAIT_MS = 60_000;

/** The sh blocks of the page's "Try it" section, continuation lines joined. */
async function tryItBlocks(): Promise<string[]> {
  const page = await readFile(join(PROJECT_ROOT, 'docs', 'supervisor.md'), 'utf8');
  const section = page.split(/^## Try it$/m)[1]?.split(/^## /m)[0] ?? '';
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => (m[1] ?? '').replaceAll('\\\n', ' '));
}

it("runs docs/supervisor.md's walk-through as written: certificates, creds.yaml, a supervisor, an attached boundary", { timeout: TEST_BUDGET_MS }, async (t) => {
  const reason = await netnsSkipReason(['bash', 'curl', 'openssl']);
  if (reason !== undefined) return t.skip(`supervisor walk-through skipped: ${reason}`);
  const [setup, daemons, query] = await tryItBlocks();
  assert.ok(setup !== undefined && daemons !== undefined && query !== undefined, 'the page has its three sh blocks');

  // The daemons keep state under dir (boundary's .boundary): removed after the hooks that stop them.
  await withStateDir(t, 'boundary-supervisor-walkthrough-', async (dir) => {
    const pair = await createNetnsPair(t, 'sw');
    await mkdir(pair.etc, { recursive: true });
    await writeFile(join(pair.etc, 'resolv.conf'), `nameserver ${pair.outsideIp}\n`);
    const checkout = join(dir, 'checkout');
    await cp(join(PROJECT_ROOT, 'policies'), join(checkout, 'policies'), { recursive: true });
    await symlink(join((await stageBoundary()).dir, 'dist'), join(checkout, 'dist'));
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir };
    const shell = (script: string) => ['ip', 'netns', 'exec', pair.pod, 'bash', '-c', script];
    // Its own process group, so that a command that times out leaves nothing writing under dir; each must succeed.
    const inPod = async (script: string) => {
      const out = await runGroup('ip', shell(script).slice(1), { cwd: checkout, env, timeoutMs: COMMAND_TIMEOUT_MS });
      assert.equal(out.code, 0, `${script}\n${out.stdout}${out.stderr}`);
      return out;
    };

    // The setup block as one script: its heredoc spans lines. Every command must succeed.
    const setupRun = await inPod(`set -e\n${setup}`);
    assert.match(setupRun.stdout, /^creds\.yaml: ok$/m, setupRun.stdout + setupRun.stderr);
    assert.match(setupRun.stdout, /^policies\/default\.yaml: ok$/m, setupRun.stdout);

    const [supervisorLine, boundaryLine, ...rest] = daemons.split('\n').filter((line) => line.trim() !== '');
    assert.ok(supervisorLine?.includes(' supervisor ') && boundaryLine?.includes(' run ') && rest.length === 0, daemons);
    const supervisor = spawnLogged(shell(`exec ${supervisorLine}`), { cwd: checkout, env, label: 'supervisor' });
    t.after(() => supervisor.stop());
    await supervisor.waitFor((line) => line.msg === 'supervisor listening', ATTACH_WAIT_MS);
    const boundary = spawnLogged(shell(`exec ${boundaryLine}`), { cwd: checkout, env, label: 'boundary' });
    t.after(() => boundary.stop());
    await supervisor.waitFor((line) => line.msg === 'boundary acknowledged its configuration' && line.sandboxId === 'sb-1', ATTACH_WAIT_MS);

    const commands = query.split('\n').filter((line) => line.trim() !== '');
    assert.equal(commands.length, 1, query);
    const answer = await inPod(commands[0] as string);
    const { sandboxes } = JSON.parse(answer.stdout) as { sandboxes: { sandboxId: string; attached: boolean; lastStatus: string }[] };
    assert.deepEqual(
      sandboxes.map((s) => [s.sandboxId, s.attached, s.lastStatus]),
      [['sb-1', true, 'effective']],
      answer.stdout,
    );
  });
});
