// The Kubernetes example withdrawal hook (deploy/kubernetes/examples/release-pod.mjs) run as a real process
// against a loopback https API server: ungate, delete, idempotent repeats, refusals and bad usage.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { waiterList } from '../harness/waiters.js';
import { assertNoTokenLogged, listen, newToken, type Received, recorder, WAIT_MS } from '../harness/withdrawal-hooks.js';

const RELEASE_POD = fileURLToPath(new URL('../../deploy/kubernetes/examples/release-pod.mjs', import.meta.url));

after(assertNoTokenLogged);

describe('release-pod.mjs (the Kubernetes example hook)', () => {
  let pki: TestPki;
  let saDir: string;
  let token: string;
  let port: number;
  let status: Map<string, number>;
  const requests = waiterList<Received>();

  before(async () => {
    pki = await makeTestPki();
    saDir = await mkdtemp(join(tmpdir(), 'boundary-sa-'));
    token = newToken();
    await writeFile(join(saDir, 'token'), `${token}\n`);
    await writeFile(join(saDir, 'ca.crt'), pki.ca.certPem);
    status = new Map();
    const { onRequest } = recorder((req, res) => {
      requests.push(req);
      const code = status.get(`${req.method} ${req.url}`) ?? 200;
      res.writeHead(code, { 'content-type': 'application/json' }).end(code === 200 ? '{"kind":"Pod"}' : `{"kind":"Status","code":${code}}`);
    });
    port = await listen(createHttpsServer({ cert: pki.server.certPem, key: pki.server.keyPem }, onRequest), (fn) => closers.push(fn));
  });
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const close of closers) await close();
    await rm(saDir, { recursive: true, force: true });
  });

  function run(args: string[], instanceId = 'sandbox-sb-1'): Promise<{ code: number; stdout: string; stderr: string }> {
    requests.items.length = 0;
    const env = { PATH: process.env.PATH, RELEASE_POD_API_URL: `https://127.0.0.1:${port}`, RELEASE_POD_SA_DIR: saDir, BOUNDARY_INSTANCE_ID: instanceId, BOUNDARY_WITHDRAWAL_ID: 'w-9' };
    return new Promise((resolve) => {
      execFile(process.execPath, [RELEASE_POD, ...args], { env, timeout: WAIT_MS }, (err, stdout, stderr) => {
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
      });
    });
  }

  const summary = (r: Received) => ({ method: r.method, path: r.url, authorization: r.headers.authorization, contentType: r.headers['content-type'], body: r.body });

  it('ungate removes the named scheduling gate with one strategic merge patch', async () => {
    const result = await run(['ungate', '--gate', 'boundary.example/attached', '--namespace', 'agents']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(requests.items.map(summary), [
      {
        method: 'PATCH',
        path: '/api/v1/namespaces/agents/pods/sandbox-sb-1',
        authorization: `Bearer ${token}`,
        contentType: 'application/strategic-merge-patch+json',
        body: '{"spec":{"schedulingGates":[{"$patch":"delete","name":"boundary.example/attached"}]}}',
      },
    ]);
  });

  it('delete removes the pod and then its PVC', async () => {
    const result = await run(['delete', '--pvc', '{instance}-workspace']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(requests.items.map(summary), [
      { method: 'DELETE', path: '/api/v1/namespaces/default/pods/sandbox-sb-1', authorization: `Bearer ${token}`, contentType: undefined, body: '' },
      {
        method: 'DELETE',
        path: '/api/v1/namespaces/default/persistentvolumeclaims/sandbox-sb-1-workspace',
        authorization: `Bearer ${token}`,
        contentType: undefined,
        body: '',
      },
    ]);
    assert.match(result.stdout, /delete pod default\/sandbox-sb-1: done; delete PVC default\/sandbox-sb-1-workspace: done \(withdrawal w-9\)/);
  });

  it('exits 0 when the pod and PVC are already gone, so a repeated delivery converges', async () => {
    status.set('DELETE /api/v1/namespaces/default/pods/sandbox-gone', 404);
    status.set('DELETE /api/v1/namespaces/default/persistentvolumeclaims/sandbox-gone-workspace', 404);
    status.set('PATCH /api/v1/namespaces/default/pods/sandbox-gone', 404);
    const deleted = await run(['delete', '--pvc', '{instance}-workspace'], 'sandbox-gone');
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /already gone.*already gone/);
    const ungated = await run(['ungate', '--gate', 'g'], 'sandbox-gone');
    assert.equal(ungated.code, 0, ungated.stderr);
  });

  it('exits 1 with the API status when the API refuses, and 2 on bad usage', async () => {
    status.set('DELETE /api/v1/namespaces/default/pods/sandbox-forbidden', 403);
    const refused = await run(['delete'], 'sandbox-forbidden');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /answered 403/);
    assert.ok(!refused.stderr.includes(token));
    const usage = await run(['ungate']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--gate/);
    const badName = await run(['delete'], '../secrets');
    assert.equal(badName.code, 2);
    assert.equal(requests.items.length, 0, 'a bad name never reaches the API');
  });
});
