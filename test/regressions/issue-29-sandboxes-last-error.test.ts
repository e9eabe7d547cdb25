// Issue 29: GET /v1/sandboxes showed `lastError: null` for a sandbox whose policy file no longer parsed. Its rows now
// carry that file's error (kind policy-file, the code, and that the last valid version is still served) until the
// file is fixed; an error a boundary reported itself still comes first.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adminRequest } from '../harness/admin-client.js';
import { makeTestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor, type TestSupervisor } from '../harness/control.js';

interface Row {
  readonly instanceId: string;
  readonly lastError: { kind: string; code?: string; message: string } | null;
}

async function rows(sup: TestSupervisor): Promise<Row[]> {
  const answer = await adminRequest({ port: sup.supervisor.adminAddress()?.port ?? 0, method: 'GET', path: '/v1/sandboxes', headers: sup.adminHeaders });
  return answer.body.sandboxes as Row[];
}

describe('issue 29: /v1/sandboxes and a broken policy file', () => {
  it('shows the broken policy file as lastError of the sandbox its rows belong to, until it is fixed', async (t) => {
    const pki = await makeTestPki();
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': policyYaml('a.example.test') } });
    t.after(() => sup.close());
    const boundary = makeTestClient(pki, { port: sup.port() });
    await boundary.client.start();
    t.after(() => boundary.client.close());
    await boundary.waitState((s) => s.policy.effective);
    assert.equal((await rows(sup))[0]?.lastError, null);

    await sup.writePolicy('sb-1', 'version: 1\nnetwork_policies:\n  api: { endpoints: [{ host: a.example.test, port: 99999 }] }\n');
    await sup.waitForLog((line) => line.includes('policy file rejected'));
    const [row] = await rows(sup);
    assert.equal(row?.lastError?.kind, 'policy-file');
    assert.equal(row?.lastError?.code, 'POLICY_INVALID');
    assert.match(row?.lastError?.message ?? '', /^sb-1\.yaml does not parse \(its last valid version is still served\): /);

    await sup.writePolicy('sb-1', policyYaml('b.example.test'));
    await boundary.waitState((s) => s.policy.generation === 2);
    assert.equal((await rows(sup))[0]?.lastError, null);
  });
});
