// A new user's first run, as the README's "Try it" says it (root only): `npm start`'s command on a terminal in a
// network namespace of the test's own (a laptop without the synthetic route), the banner's export block sourced
// in a real shell, then every line of the README's walk-through run as written, each checked against what the
// README says it does. The README's hosts are public names: here a hosts file (--hosts) sends them to stand-ins in
// a second namespace, whose CA boundary trusts as it would the public roots (--upstream-ca); the default policy and
// the README's commands are used unchanged, and nothing leaves the two namespaces. The checkout's dist/ is a
// staged build, for the walk-through's `node dist/app/main.js` lines.

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { MAIN, PROJECT_ROOT } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { createNetnsPair, netnsSkipReason, stopChild } from '../harness/netns-pair.js';
import { NPM_PACKAGE, REPO_README, type ReadmeWorld, startReadmeWorld, WHEEL_NAME } from '../harness/readme-world.js';
import { type GroupOutcome, runGroup } from '../harness/run-group.js';
import { stageBoundary } from '../harness/stage.js';

const run = promisify(execFile);
const TEST_BUDGET_MS = 300_000;
const COMMAND_TIMEOUT_MS = 60_000;
/** boundary through tsx on a loaded machine: a bound for the wait, not a budget the test asserts. */
const BANNER_WAIT_MS = 90_000;

/** What the README says each line of the walk-through does; a line this table does not know fails the test. */
const EXPECTED: Readonly<Record<string, (out: GroupOutcome, ctx: { checkout: string; world: ReadmeWorld }) => Promise<void> | void>> = {
  'curl https://pypi.org/simple/requests/': (out) => assert.ok(out.code === 0 && out.stdout.includes(WHEEL_NAME), out.stdout + out.stderr),
  'curl -X POST https://pypi.org/legacy/': (out, { world }) => {
    assert.equal((JSON.parse(out.stdout) as { error?: string }).error, 'policy_denied', out.stdout);
    assert.ok(!world.hits().some((h) => h.path === '/legacy/'), 'the denied POST never reached the origin');
  },
  'curl http://example.com/': (out, { world }) => {
    assert.equal((JSON.parse(out.stdout) as { error?: string }).error, 'policy_denied', out.stdout);
    assert.ok(!world.hits().some((h) => h.host === 'example.com'), 'example.com was never dialled');
  },
  "curl -s '127.0.0.1:9901/v1/denials?last=1'": (out) => {
    const { denials } = JSON.parse(out.stdout) as { denials: { host?: string; reason?: string; suggestion?: string }[] };
    assert.equal(denials.length, 1, out.stdout);
    assert.deepEqual([denials[0]?.host, denials[0]?.reason], ['example.com', 'no-endpoint-matched'], out.stdout);
    assert.match(denials[0]?.suggestion ?? '', /host: example\.com/, out.stdout);
  },
  'python3 -c \'import requests; print(requests.get("https://pypi.org/simple/requests/").status_code)\'': (out) => assert.equal(out.stdout.trim(), '200', out.stderr),
  'pip download --no-deps -d wheels requests': async (out, { checkout }) => {
    assert.equal(out.code, 0, out.stdout + out.stderr);
    await stat(join(checkout, 'wheels', WHEEL_NAME));
  },
  'git clone https://github.com/psf/requests.git': async (out, { checkout }) => {
    assert.equal(out.code, 0, out.stderr);
    assert.equal(await readFile(join(checkout, 'requests', 'README.md'), 'utf8'), REPO_README);
  },
  'npm view left-pad version': (out) => assert.equal(out.stdout.trim(), NPM_PACKAGE.version, JSON.stringify(out)),
  'wget -qO- --ca-certificate=.boundary/ca-bundle.pem https://pypi.org/simple/requests/': (out) => assert.ok(out.code === 0 && out.stdout.includes(WHEEL_NAME), out.stderr),
  'dig @127.0.0.1 -p 15053 pypi.org A': (out) => assert.match(out.stdout, /^pypi\.org\.\s+\d+\s+IN\s+A\s+198\.1[89]\.\d+\.\d+$/m),
  'dig @127.0.0.1 -p 15053 example.com A': (out) => assert.match(out.stdout, /status: NXDOMAIN/),
  'curl -s 127.0.0.1:9901/readyz; curl -s 127.0.0.1:9901/metrics': (out) => {
    const cut = out.stdout.indexOf('# HELP');
    const ready = JSON.parse(out.stdout.slice(0, cut)) as { ready?: boolean; capture?: { mode: string; state: string } };
    // No route here, as on a laptop: capture is optional, so ready, and the body says it is unavailable.
    assert.equal(ready.ready, true, out.stdout.slice(0, cut));
    assert.deepEqual([ready.capture?.mode, ready.capture?.state], ['optional', 'unavailable']);
    assert.match(out.stdout.slice(cut), /^boundary_/m);
  },
  'node dist/app/main.js policy check policies/*.yaml': (out) => {
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const lines = out.stdout.trim().split('\n');
    assert.ok(lines.length > 1 && lines.every((line) => /^policies\/[\w-]+\.yaml: ok$/.test(line)), out.stdout);
  },
  "node dist/app/main.js policy explain policies/default.yaml 'https://github.com/o/r.git/info/refs?service=git-receive-pack'": (out) => {
    assert.match(out.stdout, /^DENY GET \/o\/r\.git\/info\/refs to github\.com:443$/m, out.stdout + out.stderr);
    assert.match(out.stdout, /^\s+reason\s+deny-rule-matched$/m, out.stdout);
  },
};

/** The README's walk-through: the sh block after "Paste the export block the banner printed". */
async function readmeWalkthrough(): Promise<{ exports: string[]; commands: string[] }> {
  const readme = await readFile(join(PROJECT_ROOT, 'README.md'), 'utf8');
  const after = readme.split('Paste the export block the banner printed')[1] ?? '';
  const block = /```sh\n([\s\S]*?)```/.exec(after)?.[1] ?? '';
  const lines = block.split('\n').filter((line) => line.trim() !== '');
  assert.ok(lines.length > 5, 'the README has its walk-through');
  return {
    exports: lines.filter((line) => line.startsWith('export ')),
    // A trailing `# ...` is the README's comment, not part of the command.
    commands: lines.filter((line) => !line.startsWith('export ')).map((line) => line.replace(/\s+# [^'"]*$/, '')),
  };
}

/** `npm start`'s run arguments: package.json's start script after its build step, which tsx makes unneeded. */
async function npmStartArgs(): Promise<string[]> {
  const pkg = JSON.parse(await readFile(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const match = /^tsc -b tsconfig\.build\.json && node dist\/app\/main\.js (.+)$/.exec(pkg.scripts.start ?? '');
  assert.ok(match !== null, `npm start is the build and node dist/app/main.js: ${pkg.scripts.start}`);
  return (match[1] ?? '').split(' ');
}

function quote(word: string): string {
  return `'${word.replaceAll("'", "'\\''")}'`;
}

/** boundary on a pseudo-terminal (util-linux `script`), as a person starts it, until the banner has been printed. */
async function startOnTerminal(t: TestContext, netns: string, checkout: string, args: readonly string[]): Promise<{ child: ChildProcessWithoutNullStreams; output: () => string }> {
  const command = `exec ${[process.execPath, '--import', import.meta.resolve('tsx'), MAIN, ...args].map(quote).join(' ')}`;
  const child = spawn('ip', ['netns', 'exec', netns, 'script', '-qfec', command, '/dev/null'], {
    cwd: checkout,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SHELL: '/bin/sh', TERM: 'dumb' },
  });
  t.after(() => stopChild(child));
  let output = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => (output += chunk));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner within ${BANNER_WAIT_MS} ms:\n${output}`)), BANNER_WAIT_MS);
    const check = (): void => {
      if (!/# wget reads none of these: .*\r?\n/.test(output)) return;
      clearTimeout(timer);
      resolve();
    };
    child.stdout.on('data', check);
    child.once('exit', () => reject(new Error(`exited before the banner:\n${output}`)));
  });
  return { child, output: () => output.replaceAll('\r\n', '\n') };
}

it("runs the README's first steps as written: npm start, the banner's exports, every walk-through line", { timeout: TEST_BUDGET_MS }, async (t) => {
  const reason = await netnsSkipReason(['curl', 'dig', 'git', 'wget', 'script', 'bash', 'npm', 'python3']);
  if (reason !== undefined) return t.skip(`first-run test skipped: ${reason}`);
  try {
    await run('python3', ['-c', 'import requests, pip'], { env: process.env });
  } catch {
    return t.skip('first-run test skipped: python3 has no requests or pip (Debian: python3-requests python3-pip)');
  }
  // boundary keeps its state in dir (checkout/.boundary): removed after the hook that stops it.
  await withStateDir(t, 'boundary-first-run-', (dir) => firstRun(t, dir));
});

async function firstRun(t: TestContext, dir: string): Promise<void> {
  const pair = await createNetnsPair(t, 'fr');
  // boundary's own lookups go to the outside namespace, where no DNS server runs: the hosts file answers.
  await mkdir(pair.etc, { recursive: true });
  await writeFile(join(pair.etc, 'resolv.conf'), `nameserver ${pair.outsideIp}\n`);
  const world = await startReadmeWorld(t, pair, dir);
  // Built while boundary starts; awaited before the walk-through needs it.
  const staged = stageBoundary();
  staged.catch(() => undefined);

  // The clone as the README leaves it: the shipped policies, and nothing of boundary's state yet.
  const checkout = join(dir, 'checkout');
  const home = join(dir, 'home');
  await cp(join(PROJECT_ROOT, 'policies'), join(checkout, 'policies'), { recursive: true });
  await mkdir(home);
  const args = [...(await npmStartArgs()), '--hosts', world.hostsFile, '--upstream-ca', world.caFile];
  const boundary = await startOnTerminal(t, pair.pod, checkout, args);

  // The banner's export block, pasted into a shell: what the README's own export lines are, with absolute paths.
  const banner = boundary.output();
  const exported = banner.split('\n').filter((line) => line.startsWith('  export ')).map((line) => line.trim());
  const walkthrough = await readmeWalkthrough();
  assert.deepEqual(exported.map((line) => line.replaceAll(`${checkout}/`, '')), walkthrough.exports, banner);
  const exportsFile = join(dir, 'exports.sh');
  await writeFile(exportsFile, `${exported.join('\n')}\n`);
  // What `npm start` leaves besides .boundary/: the build the walk-through's `node dist/app/main.js` lines run.
  await symlink(join((await staged).dir, 'dist'), join(checkout, 'dist'));

  for (const command of walkthrough.commands) {
    const check = EXPECTED[command];
    assert.ok(check !== undefined, `the README shows a command this test does not check: ${command}`);
    // Its own process group: npm or pip started by a command that times out stop with it, before dir is removed.
    const out = await runGroup('ip', ['netns', 'exec', pair.pod, 'bash', '-c', `. ${quote(exportsFile)}; ${command}`], {
      cwd: checkout,
      timeoutMs: COMMAND_TIMEOUT_MS,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, TERM: 'dumb', ...(process.env.PYENV_ROOT === undefined ? {} : { PYENV_ROOT: process.env.PYENV_ROOT }) },
    });
    await t.test(command, async () => {
      try {
        await check(out, { checkout, world });
      } catch (err) {
        t.diagnostic(`origins saw: ${JSON.stringify(world.hits())}`);
        throw err;
      }
    });
  }

  // What npm start left in the checkout: the CA's key owner-only, and git ignores all of it.
  assert.equal((await stat(join(checkout, '.boundary'))).mode & 0o777, 0o700);
  assert.equal((await stat(join(checkout, '.boundary', 'ca.key'))).mode & 0o777, 0o600);
  for (const file of ['.boundary/ca.key', '.boundary/ca-bundle.pem']) await run('git', ['-C', PROJECT_ROOT, 'check-ignore', '-q', file]);
  // One warning for the missing route, naming the command; no error and no stack per allowed name.
  const log = boundary.output();
  assert.equal(log.split('\n').filter((line) => line.includes('transparent capture unavailable')).length, 1, log);
  assert.match(log, /WARN transparent capture unavailable .*ip route add local 198\.18\.0\.0\/15 dev lo/);
  assert.doesNotMatch(log, / ERROR |^\s+at /m);
  assert.doesNotMatch(log, /denied GET 127\.0\.0\.1:9901/, 'the admin calls did not go through the proxy');

  // Ctrl-C drains and exits 0.
  const exited = once(boundary.child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  boundary.child.stdin.write('\x03');
  assert.equal((await exited)[0], 0, boundary.output().slice(-2_000));
}
