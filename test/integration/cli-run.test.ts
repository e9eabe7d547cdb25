// `boundary run` as a person and as a pod see it: a usage error without a policy source, the banner and
// shorthand logs on a terminal (a real pseudo-terminal through util-linux `script`), JSON and no banner on a pipe.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { CliIo } from '../../src/app/cli/io.js';
import { runCommand } from '../../src/app/cli/run.js';
import { BUNDLE_VARIABLES } from '../../src/app/cli/run-banner.js';
import { CLI_WAIT_TIMEOUT_MS, MAIN, PROJECT_ROOT, spawnBoundaryCli } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { stopChild } from '../harness/netns-pair.js';

const POLICY = 'version: 1\nnetwork_policies: {}\n';

async function tempDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-cli-run-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The run flags of a standalone boundary on loopback port 0 with everything under `dir`. */
async function runArgs(dir: string, dns: { listen: string; upstream: string } = { listen: '127.0.0.1:0', upstream: '127.0.0.1:9' }): Promise<string[]> {
  await writeFile(join(dir, 'policy.yaml'), POLICY);
  return [
    '--policy', join(dir, 'policy.yaml'),
    '--proxy-listen', '127.0.0.1:0',
    '--admin-listen', '127.0.0.1:0',
    '--dns-listen', dns.listen,
    // Never asked (no request is made); set so /etc/resolv.conf is not read.
    '--upstream-dns', dns.upstream,
    '--state-dir', join(dir, 'state'),
  ];
}

/** An in-process CliIo whose stderr is kept in `errors.text`; already aborted, so a started run returns at once. */
function pipeIo(cwd: string, errors = { text: '' }): CliIo {
  return {
    stdout: { write: () => true },
    stderr: { write: (text: string) => (errors.text += text) },
    env: {},
    cwd,
    signal: AbortSignal.abort(),
    now: Date.now,
  };
}

describe('boundary run without --policy or --supervisor', () => {
  it('is a usage error naming both options', async () => {
    for (const argv of [[], ['--proxy-listen', '127.0.0.1:0']]) {
      const errors = { text: '' };
      assert.equal(await runCommand(argv, pipeIo(tmpdir(), errors)), 2);
      const first = errors.text.split('\n')[0] ?? '';
      assert.match(first, /--policy/);
      assert.match(first, /--supervisor/);
      assert.match(first, /\(USAGE\)$/);
    }
  });
});

describe('boundary run with --upstream-dns on its own --dns-listen', () => {
  it('refuses to start and points at the pod fix', async (t) => {
    const dir = await tempDir(t);
    const argv = await runArgs(dir, { listen: '127.0.0.1:5353', upstream: '127.0.0.1:5353' });
    await assert.rejects(runCommand(argv, pipeIo(dir)), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'CONFIG_INVALID');
      assert.match(err.message, /dnsPolicy: ClusterFirst/);
      return true;
    });
  });

  it('refuses a loopback upstream on its port when it listens on every address', async (t) => {
    const dir = await tempDir(t);
    for (const listen of ['0.0.0.0:5353', '[::]:5353']) {
      const argv = await runArgs(dir, { listen, upstream: '127.0.0.2:5353' });
      await assert.rejects(runCommand(argv, pipeIo(dir)), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'CONFIG_INVALID');
        assert.match(err.message, /127\.0\.0\.2:5353 reaches boundary's own --dns-listen/);
        return true;
      });
    }
  });
});

describe('boundary run on a terminal', () => {
  it('prints the banner with the bound addresses and files, logs shorthand, and stops on Ctrl-C', async (t) => {
    // dir holds boundary's --state-dir: removed after the hook that stops it.
    await withStateDir(t, 'boundary-cli-run-', async (dir) => {
      const quote = (word: string): string => `'${word.replaceAll("'", "'\\''")}'`;
      // exec: the shell would otherwise get the SIGINT too and exit 130 after boundary exited 0.
      const command = `exec ${[process.execPath, '--import', 'tsx', MAIN, 'run', ...(await runArgs(dir))].map(quote).join(' ')}`;
      // script gives the command a pseudo-terminal for stdin, stdout and stderr and copies it to our pipe.
      const child = spawn('script', ['-qfec', command, '/dev/null'], {
        cwd: PROJECT_ROOT,
        stdio: ['pipe', 'pipe', 'pipe'],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SHELL: '/bin/sh', TERM: 'dumb' },
      });
      const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
      t.after(() => stopChild(child));
      let output = '';
      child.stdout.setEncoding('utf8');
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no banner within ${CLI_WAIT_TIMEOUT_MS} ms:\n${output}`)), CLI_WAIT_TIMEOUT_MS);
        child.stdout.on('data', (chunk: string) => {
          output += chunk;
          if (/# wget reads none of these: .*\r?\n/.test(output)) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once('exit', () => reject(new Error(`exited before the banner:\n${output}`)));
      });
      const text = output.replaceAll('\r\n', '\n');
      const proxy = /^ {2}proxy +http:\/\/127\.0\.0\.1:(\d+) /m.exec(text);
      const admin = /^ {2}admin +http:\/\/127\.0\.0\.1:(\d+)\/readyz/m.exec(text);
      assert.ok(proxy !== null && admin !== null, text);
      assert.notEqual(Number(proxy[1]), 0, 'the bound port, not the flag');
      assert.match(text, /^ {2}policy DNS +127\.0\.0\.1:[1-9]\d* \(udp, tcp\)$/m);
      const caFile = join(dir, 'state', 'ca.pem');
      const bundleFile = join(dir, 'state', 'ca-bundle.pem');
      const url = `http://127.0.0.1:${proxy[1]}`;
      // The whole export block: both spellings of the proxy variables, loopback kept off the proxy, every client's CA.
      const block = [
        `  export http_proxy=${url} https_proxy=${url} HTTP_PROXY=${url} HTTPS_PROXY=${url}`,
        '  export no_proxy=127.0.0.1,localhost,::1 NO_PROXY=127.0.0.1,localhost,::1',
        `  export ${BUNDLE_VARIABLES.map((name) => `${name}=${bundleFile}`).join(' ')}`,
        `  export NODE_EXTRA_CA_CERTS=${caFile}`,
        `  # wget reads none of these: wget --ca-certificate=${bundleFile} URL (or ca_certificate in ~/.wgetrc)`,
      ];
      assert.ok(text.includes(`Point a client at it (paste into a shell):\n${block.join('\n')}\n`), text);
      await stat(bundleFile);
      assert.equal((await fetch(`http://127.0.0.1:${admin[1]}/healthz`)).status, 200);
      // The default synthetic range is not routed here: optional capture leaves the boundary ready and says so.
      if (!/^ {2}capture +198\.18\.0\.0\/15 \(transparent\)$/m.test(text)) {
        assert.match(text, /^ {2}capture +capture-unavailable: EADDRNOTAVAIL .*; optional: \/readyz stays 200, clients use the proxy$/m);
      }
      assert.equal((await fetch(`http://127.0.0.1:${admin[1]}/readyz`)).status, 200);
      // Shorthand start lines, flushed before the banner.
      assert.match(text, new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\S+ OCSF NET:LISTEN .* -> 127\\.0\\.0\\.1:${proxy[1]} \\[msg:proxy listening on 127\\.0\\.0\\.1:${proxy[1]}\\]$`, 'm'));
      assert.match(text, /OCSF CONFIG:ENABLED .*\[msg:workload trust bundle written to \S+: \d+ system roots from /);

      // Ctrl-C through the terminal: SIGINT to the foreground process, which drains and exits 0.
      child.stdin.write('\x03');
      const [code] = await exited;
      assert.equal(code, 0, output);
      assert.doesNotMatch(output, /^\{"level"/m, 'no JSON lines');
    });
  });
});

describe('boundary run on a pipe', () => {
  it('writes JSON lines only and no banner', async (t) => {
    await withStateDir(t, 'boundary-cli-run-', async (dir) => {
      const cli = spawnBoundaryCli(await runArgs(dir));
      t.after(() => cli.stop());
      await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
      await cli.stop();
      assert.doesNotMatch(cli.stderr(), /boundary is running|Point a client/);
      const lines = cli.stdout().split('\n').filter((line) => line.length > 0);
      assert.ok(lines.length > 0);
      for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), line);
    });
  });
});
