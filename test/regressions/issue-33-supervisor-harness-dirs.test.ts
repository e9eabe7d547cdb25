// The test supervisor's folders are removed when it does not start, as when it closes (issue 33's CI runs).
//
// startTestSupervisor made its policies and admin-token folders under os.tmpdir() before it started the supervisor,
// and removed them only in close(). A test of a configuration the supervisor refuses never gets a handle to close,
// so each CI run left two folders behind (attached-middleware-services' refused --middleware-config).

import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { makeTestPki } from '../harness/certs.js';
import { startTestSupervisor } from '../harness/control.js';

it('leaves no folder behind when the supervisor refuses its configuration, nor after close()', async (t) => {
  const pki = await makeTestPki();
  const dir = await mkdtemp(join(tmpdir(), 'boundary-harness-dirs-'));
  // The harness makes its folders under os.tmpdir(): here, a folder no other test process writes to.
  const shared = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  t.after(async () => {
    if (shared === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = shared;
    await rm(dir, { recursive: true, force: true });
  });
  const supervisorFolders = async (): Promise<string[]> => (await readdir(dir)).filter((name) => name.startsWith('boundary-supervisor-')).sort();
  const bad = join(dir, 'middleware.yaml');
  // A gRPC endpoint in cleartext: the supervisor refuses the file at start.
  await writeFile(bad, 'services:\n  - name: acme/dlp\n    grpc_endpoint: http://127.0.0.1:1\n    max_payload_bytes: 65536\n');

  await assert.rejects(startTestSupervisor(pki, { config: { middlewareConfig: bad } }), { code: 'CONFIG_INVALID' });
  assert.deepEqual(await supervisorFolders(), [], 'a refused start');

  const started = await startTestSupervisor(pki);
  assert.equal((await supervisorFolders()).length, 2, 'the policies and the admin-token folders');
  await started.close();
  assert.deepEqual(await supervisorFolders(), [], 'after close()');
});
