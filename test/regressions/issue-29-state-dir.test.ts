// Issue 29: `--state-dir` that was not durable. A missing directory is created (0700); one that cannot be created
// refuses the start with STATE_DIR_UNUSABLE; a state write that fails is never acknowledged (the admin call answers
// 503, /readyz says why, and a later call is not answered 202 on the strength of what only memory holds); once the
// cause is gone the file is written again, writes work and what was expected survives a restart.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { CliIo } from '../../src/app/cli/io.js';
import { supervisorCommand } from '../../src/app/cli/supervisor.js';
import { createSupervisor } from '../../src/supervisor/supervisor.js';
import { adminRequest } from '../harness/admin-client.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { policyYaml, quietLogger, startTestSupervisor, type TestSupervisor } from '../harness/control.js';
import { freePort, writeSupervisorFiles } from '../harness/supervisor-cli.js';

const run = promisify(execFile);
const IS_ROOT = process.getuid?.() === 0;
/** Room for the state file, nothing more: filling it makes every later write fail with ENOSPC. */
const TMPFS_BYTES = 65_536;
const FILLER_BYTES = 1_048_576;

async function expect(sup: TestSupervisor, instanceId: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const port = sup.supervisor.adminAddress()?.port ?? 0;
  return adminRequest({ port, method: 'PUT', path: `/v1/sandboxes/sb-1/instances/${instanceId}`, headers: sup.adminHeaders });
}

async function readyz(sup: TestSupervisor): Promise<{ status: number; body: Record<string, unknown> }> {
  return adminRequest({ port: sup.supervisor.adminAddress()?.port ?? 0, method: 'GET', path: '/readyz', headers: sup.adminHeaders });
}

/**
 * Makes writes in `dir` fail and returns what undoes it. As root (who writes through any mode) `dir` is a tiny
 * tmpfs this test mounted, and a filler takes its last page; otherwise the directory is made read-only.
 */
async function breakWrites(dir: string): Promise<() => Promise<void>> {
  if (!IS_ROOT) {
    await chmod(dir, 0o500);
    return () => chmod(dir, 0o700);
  }
  const filler = join(dir, 'filler');
  await writeFile(filler, Buffer.alloc(FILLER_BYTES)).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOSPC') throw err;
  });
  return () => rm(filler, { force: true });
}

describe('issue 29: --state-dir is durable or refused', () => {
  let pki: TestPki;
  before(async () => {
    pki = await makeTestPki();
  });

  it('creates a missing state directory with mode 0700 and writes the state file at start', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'boundary-issue-29-'));
    const stateDir = join(root, 'missing', 'state');
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': policyYaml('a.example.test') }, config: { stateDir } });
    t.after(async () => {
      await sup.close();
      await rm(root, { recursive: true, force: true });
    });
    assert.equal((await stat(stateDir)).mode & 0o777, 0o700);
    assert.ok((await stat(join(stateDir, 'supervisor-state.json'))).isFile());
  });

  it('refuses to start when the state directory cannot be created, with STATE_DIR_UNUSABLE (library and CLI)', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'boundary-issue-29-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    await writeFile(join(root, 'a-file'), 'not a directory\n');
    await mkdir(join(root, 'policies'));
    const stateDir = join(root, 'a-file', 'state');
    const supervisor = createSupervisor(
      {
        listen: { host: '127.0.0.1', port: 0 },
        tls: { caPem: pki.ca.certPem, certPem: pki.server.certPem, keyPem: pki.server.keyPem },
        policiesDir: join(root, 'policies'),
        stateDir,
      },
      { now: Date.now, logger: quietLogger().logger },
    );
    await assert.rejects(supervisor.start(), { code: 'STATE_DIR_UNUSABLE' });

    const files = await writeSupervisorFiles(root, pki, ['127.0.0.1']);
    const stderr: string[] = [];
    const io: CliIo = {
      stdout: { write: () => true },
      stderr: { write: (text: string) => stderr.push(text) },
      env: {},
      cwd: root,
      signal: AbortSignal.abort(),
      now: Date.now,
    };
    const argv = ['--tls-dir', files.tlsDir, '--policies', 'policies', '--admin-listen', 'off', '--listen', `127.0.0.1:${await freePort()}`, '--state-dir', stateDir];
    assert.equal(await supervisorCommand(argv, io), 1);
    assert.match(stderr.join(''), /\(STATE_DIR_UNUSABLE\)/);
  });

  it('answers 503 and is not ready while the state cannot be written, never 202; then writes again and keeps it across a restart', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'boundary-issue-29-'));
    const stateDir = join(root, 'state');
    await mkdir(stateDir);
    if (IS_ROOT) await run('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_BYTES},mode=0700`, 'tmpfs', stateDir]);
    let sup: TestSupervisor | undefined;
    t.after(async () => {
      await sup?.close();
      if (IS_ROOT) await run('umount', [stateDir]);
      await chmod(stateDir, 0o700).catch(() => undefined);
      await rm(root, { recursive: true, force: true });
    });
    sup = await startTestSupervisor(pki, { policies: { 'sb-1': policyYaml('a.example.test') }, config: { stateDir } });
    assert.equal((await expect(sup, 'before')).status, 202);

    const repair = await breakWrites(stateDir);
    const refused = await expect(sup, 'during');
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'STORE_UNAVAILABLE');
    // The old bug: the same call again found the instance in memory and answered 202.
    assert.equal((await expect(sup, 'during')).status, 503);
    assert.equal((await expect(sup, 'before')).status, 503);
    const notReady = await readyz(sup);
    assert.equal(notReady.status, 503);
    const reasons = notReady.body.reasons as string[];
    assert.ok(reasons.some((r) => /^store-write-failed: writing state file .*supervisor-state\.json failed: .*(ENOSPC|EACCES)/.test(r)), JSON.stringify(reasons));

    await repair();
    await sup.waitForLog((line) => line.includes('supervisor state file written again'));
    assert.equal((await readyz(sup)).status, 200);
    assert.equal((await expect(sup, 'after')).status, 202);

    await sup.restart();
    const answer = await adminRequest({ port: sup.supervisor.adminAddress()?.port ?? 0, method: 'GET', path: '/v1/sandboxes', headers: sup.adminHeaders });
    const stored = ((answer.body.store as { instances: { instanceId: string }[] }).instances ?? []).map((i) => i.instanceId).sort();
    // `during` was refused, not lost: memory held it, and the first write that succeeded made it durable.
    assert.deepEqual(stored, ['after', 'before', 'during']);
  });
});
