// `boundary supervisor`'s state and hook flags: the combinations it refuses (exit 2, USAGE), and a database URL
// read from a file that names an unreachable server: exit 1 with STORE_UNAVAILABLE, the password nowhere in
// the output. The server is a unix socket path in a fresh directory with nothing listening.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliIo } from '../../src/app/cli/io.js';
import { supervisorCommand } from '../../src/app/cli/supervisor.js';
import { makeTestPki } from '../harness/certs.js';
import { freePort, writeSupervisorFiles } from '../harness/supervisor-cli.js';

async function run(argv: readonly string[], cwd: string): Promise<{ code: number; stderr: string; stdout: string }> {
  const err: string[] = [];
  const out: string[] = [];
  const io: CliIo = {
    stdout: { write: (text: string) => out.push(text) },
    stderr: { write: (text: string) => err.push(text) },
    env: {},
    cwd,
    signal: AbortSignal.abort(),
    now: Date.now,
  };
  const code = await supervisorCommand(argv, io);
  return { code, stderr: err.join(''), stdout: out.join('') };
}

describe('boundary supervisor state and hook flags', () => {
  let dir: string;
  const base = ['--tls-dir', 'tls', '--policies', 'policies', '--admin-listen', 'off'];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'boundary-supervisor-flags-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const refusals: [string, readonly string[], RegExp][] = [
    ['a state directory and a database', ['--state-dir', 's', '--database-url', 'postgresql://x@/y'], /give one of --state-dir, --database-url and --database-url-file/],
    ['a database URL and a URL file', ['--database-url', 'postgresql://x@/y', '--database-url-file', 'f'], /give one of/],
    ['a hook argument without a hook', ['--withdrawal-hook-arg', 'x'], /--withdrawal-hook-arg needs --withdrawal-hook PATH/],
    ['a webhook token without a webhook', ['--withdrawal-webhook-token-file', 't'], /need --withdrawal-webhook URL/],
    ['a webhook that is not http(s)', ['--withdrawal-webhook', 'ftp://hooks.test/x'], /must be an http:\/\/ or https:\/\/ URL/],
    ['the state directory twice', ['--state-dir', 'a', '--state-dir', 'b'], /--state-dir given twice/],
  ];
  for (const [what, extra, message] of refusals) {
    it(`refuses ${what} (exit 2)`, async () => {
      const result = await run([...base, ...extra], dir);
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, message);
      assert.match(result.stderr, /\(USAGE\)/);
    });
  }

  it('takes hook arguments that look like flags, in order', async () => {
    // Past parsing, the run fails on the missing TLS folder (exit 1), not on the arguments (exit 2).
    const result = await run([...base, '--withdrawal-hook', '/bin/true', '--withdrawal-hook-arg', '--pvc', '--withdrawal-hook-arg=--namespace'], dir);
    assert.equal(result.code, 1, result.stderr);
    assert.doesNotMatch(result.stderr, /USAGE/);
  });

  it('reads the database URL from its file, and an unreachable database fails the start without printing the password', async () => {
    const pki = await makeTestPki();
    const files = await writeSupervisorFiles(dir, pki, ['127.0.0.1']);
    await mkdir(join(dir, 'policies'), { recursive: true });
    const socketDir = await mkdtemp(join(dir, 'no-server-'));
    const password = 'pw-never-printed-7f3a91';
    await writeFile(join(dir, 'db-url'), `postgresql://boundary:${password}@/boundary?host=${socketDir}\n`, { mode: 0o600 });
    const result = await run(
      ['--tls-dir', files.tlsDir, '--policies', join(dir, 'policies'), '--admin-listen', 'off', '--listen', `127.0.0.1:${await freePort()}`, '--database-url-file', 'db-url'],
      dir,
    );
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /\(STORE_UNAVAILABLE\)/);
    assert.ok(!result.stderr.includes(password) && !result.stdout.includes(password), `the password was printed:\n${result.stderr}${result.stdout}`);
  });
});
