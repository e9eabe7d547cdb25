import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyLibrary } from '../../src/supervisor/library.js';
import { makeTestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor } from '../harness/control.js';
import { type ProjectedDir, projectedDir } from '../harness/projected-dir.js';
import { withinDeadline } from '../harness/waiters.js';

const A = policyYaml('a.example.test');
const B = policyYaml('b.example.test');

/** Bound by both policies (a sandbox is given only what its policy binds). */
function credentialsYaml(token: string): string {
  return `providers:\n  api:\n    env:\n      API_TOKEN: "${token}"\n    endpoints:\n      - { host: a.example.test, port: 443 }\n      - { host: b.example.test, port: 443 }\n`;
}

async function mounted(t: TestContext, files: Record<string, string>): Promise<ProjectedDir> {
  const volume = await projectedDir(files);
  t.after(() => volume.remove());
  return volume;
}

describe('the supervisor with ConfigMap and Secret mounts', () => {
  it('reads only the policy symlinks of a ConfigMap folder, never the ..data entries, and follows a swap', async (t) => {
    const volume = await mounted(t, { 'default.yaml': A, 'sb-2.yaml': A });
    const errors: string[] = [];
    const changes: ReadonlySet<string>[] = [];
    let changed: (() => void) | undefined;
    const onChange = (names: ReadonlySet<string>) => {
      changes.push(names);
      changed?.();
    };
    const library = createPolicyLibrary({ dir: volume.dir, parsePolicy, onChange, onError: (file) => errors.push(file) });
    await library.start();
    t.after(() => library.close());
    const hashOf = (name: string) => {
      const found = library.lookup(name);
      return found.ok ? found.policy.hash : found.code;
    };
    assert.equal(hashOf('sb-2'), parsePolicy(A).hash);
    // The watcher's own rescan, driven by the kubelet's ..data events (no call to rescan() here).
    const swapped = withinDeadline(new Promise<void>((done) => (changed = done)), 'sb-2.yaml swap');
    await volume.update({ 'default.yaml': A, 'sb-2.yaml': B });
    await swapped;
    assert.equal(hashOf('sb-2'), parsePolicy(B).hash);
    assert.deepEqual(errors, []);
    assert.ok(
      changes.every((names) => [...names].every((name) => !name.startsWith('..'))),
      JSON.stringify(changes.map((c) => [...c])),
    );
    assert.deepEqual([...(await library.rescan())], [], 'a rescan of the swapped folder finds nothing new');
  });

  it('pushes a policy and credentials swapped in by the kubelet to an attached boundary', async (t) => {
    const pki = await makeTestPki();
    const policies = await mounted(t, { [`${pki.sandboxId}.yaml`]: A });
    const secret = await mounted(t, { 'credentials.yaml': credentialsYaml('tok-one') });
    const sup = await startTestSupervisor(pki, { config: { policiesDir: policies.dir, credentialsFile: secret.path('credentials.yaml') } });
    t.after(() => sup.close());
    const c = makeTestClient(pki, { port: sup.port(), credentials: { replace: () => undefined } });
    t.after(() => c.client.close());
    await c.client.start();
    const first = await c.waitState((s) => s.policy.effective && s.policy.policyHash === parsePolicy(A).hash && s.policy.credentialsHash !== undefined);

    await policies.update({ [`${pki.sandboxId}.yaml`]: B });
    await c.waitState((s) => s.policy.policyHash === parsePolicy(B).hash);

    await secret.update({ 'credentials.yaml': credentialsYaml('tok-two') });
    const rotated = await c.waitState((s) => s.policy.credentialsHash !== first.policy.credentialsHash);
    assert.equal(typeof rotated.policy.credentialsHash, 'string');
  });
});
