// The pod tests' stand-ins for Kubernetes parts, checked without root: the kubelet's `$(VAR)` expansion and
// downward API, the Agent Sandbox controller's pod from the example template (its name, labels and refusals), and
// the cert-manager CSI driver emulation (its variables, defaults and errors) with a real openssl signing, and the
// mount points two pod tests share (the first to finish must leave them to the other).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { createCertificateAuthority } from '../../src/pki/ca.js';
import { withStateDir } from '../harness/state-dir.js';
import { certManagerCsiDriver, type CsiVolume } from '../harness/k8s-csi-cert.js';
import { expandVars } from '../harness/k8s-expand.js';
import { container, readManifests } from '../harness/k8s-manifest.js';
import { ensureMountpoints } from '../harness/k8s-pod.js';
import { agentSandboxObjects, SANDBOX_NAME_HASH_LABEL, sandboxPod } from '../harness/k8s-sandbox-template.js';
import { arg } from '../harness/pod-cluster.js';
import { DEPLOY } from '../harness/pod-run.js';

const example = async () => agentSandboxObjects(await readManifests(DEPLOY, ['examples/sandbox-template.yaml']));

describe('the kubelet: $(VAR) expansion', () => {
  it('replaces defined names, leaves undefined ones, and reads $$ as one $', () => {
    const vars = new Map([['A', 'x'], ['B', '$(A)']]);
    assert.equal(expandVars('--id=$(A)', vars), '--id=x');
    assert.equal(expandVars('$(B)', vars), '$(A)', 'a value is not expanded twice');
    assert.equal(expandVars('$(NOPE)-$$(A)-$A-$', vars), '$(NOPE)-$(A)-$A-$');
    assert.equal(expandVars('$(A', vars), '$(A');
  });
});

describe('the Agent Sandbox controller: the pod of the example template', () => {
  it('names the pod after the Sandbox, which reaches --sandbox-id only through the downward API', async () => {
    const { templates, pools } = await example();
    const template = templates.get(pools.get('boundary-pool')?.templateName ?? '');
    assert.ok(template !== undefined);
    const pod = sandboxPod(template, 'a');
    assert.equal(pod.name, 'a');
    assert.equal(arg(container(pod, 'boundary'), '--sandbox-id'), 'a');
    // Go's FNV-1a of "a", as the controller writes it.
    assert.equal(pod.labels[SANDBOX_NAME_HASH_LABEL], 'e40c292c');
    assert.equal(pod.labels.app, 'sandbox');
  });

  it('drops reserved labels and refuses the defaults that would cut boundary off', async () => {
    const { templates } = await example();
    const template = templates.get('boundary-sandbox');
    assert.ok(template !== undefined);
    const relabelled = { ...template, podMetadata: { labels: { app: 'sandbox', 'agents.x-k8s.io/sandbox-name-hash': 'forged' } } };
    assert.notEqual(sandboxPod(relabelled, 'b').labels[SANDBOX_NAME_HASH_LABEL], 'forged');
    assert.throws(() => sandboxPod({ ...template, networkPolicyManagement: 'Managed' }, 'c'), /default NetworkPolicy/);
    assert.doesNotThrow(() => sandboxPod({ ...template, networkPolicyManagement: 'Managed', networkPolicy: { ingress: [], egress: [] } }, 'd'));
  });
});

describe('cert-manager csi-driver emulation', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-csi-'));
  after(() => rm(dir, { recursive: true, force: true }));
  const ca = await createCertificateAuthority({ commonName: 'csi test CA', now: Date.now });
  await writeFile(join(dir, 'ca.pem'), ca.certPem);
  await writeFile(join(dir, 'ca.key'), ca.keyPem);
  const driver = certManagerCsiDriver(new Map([['cert-manager.io/ClusterIssuer/control', { certFile: join(dir, 'ca.pem'), keyFile: join(dir, 'ca.key') }]]), dir);
  const { templates } = await example();
  const template = templates.get('boundary-sandbox');
  assert.ok(template !== undefined);
  const pod = sandboxPod(template, 'pool-x7k2q');
  const volume = (attributes: Record<string, string>, readOnly = true): CsiVolume => ({ name: 'tls', kind: 'csi', driver: 'csi.cert-manager.io', readOnly, attributes });
  const base = { 'csi.cert-manager.io/issuer-name': 'control', 'csi.cert-manager.io/issuer-kind': 'ClusterIssuer' };

  it('signs a certificate for the pod with the variables filled in, under the driver default file names', async () => {
    const content = await driver(volume({ ...base, 'csi.cert-manager.io/uri-sans': `spiffe://t/sandbox/\${POD_NAME},spiffe://t/ns/$POD_NAMESPACE`, 'csi.cert-manager.io/key-usages': 'client auth' }), pod);
    assert.deepEqual(Object.keys(content.files).sort(), ['ca.crt', 'tls.crt', 'tls.key']);
    assert.equal(content.gid, undefined);
    const cert = new X509Certificate(content.files['tls.crt'] ?? '');
    assert.equal(cert.subjectAltName, 'URI:spiffe://t/sandbox/pool-x7k2q, URI:spiffe://t/ns/default');
    assert.ok(cert.checkIssued(new X509Certificate(ca.certPem)));
    assert.match(content.files['tls.key'] ?? '', /^-----BEGIN RSA PRIVATE KEY-----/, 'RSA in PKCS#1 unless the attributes say otherwise');
  });

  it('refuses what the driver refuses or the emulation does not do', async () => {
    await assert.rejects(driver(volume(base, false), pod), /readOnly/);
    await assert.rejects(driver(volume({ ...base, 'csi.cert-manager.io/uri-san': 'x' }), pod), /not an attribute/);
    await assert.rejects(driver(volume({ ...base, 'csi.cert-manager.io/uri-sans': `spiffe://t/\${POD_IP}` }), pod), /undefined variable "POD_IP"/);
    await assert.rejects(driver(volume({ ...base, 'csi.cert-manager.io/pkcs12-enable': 'true' }), pod), /not emulated/);
    await assert.rejects(driver(volume({ 'csi.cert-manager.io/issuer-name': 'control' }), pod), /no CA issuer cert-manager.io\/Issuer\/default\/control/);
  });
});

describe('mount points shared by pod tests running at once', () => {
  const K8S_POD = new URL('../harness/k8s-pod.ts', import.meta.url).href;
  const exists = (path: string) => access(path).then(() => true, () => false);

  /** Another test process: makes the same mount point, says "held", cleans up when its stdin ends (or never: `exit`). */
  async function otherProcess(t: TestContext, path: string, registry: string, then: 'clean' | 'exit') {
    const source = `
      const { ensureMountpoints } = await import(${JSON.stringify(K8S_POD)});
      const cleanup = await ensureMountpoints([${JSON.stringify(path)}], ${JSON.stringify(registry)});
      process.stdout.write('held\\n');
      if (${JSON.stringify(then)} === 'exit') process.exit(0);
      process.stdin.resume();
      process.stdin.on('end', async () => { await cleanup(); process.exit(0); });
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], { stdio: ['pipe', 'pipe', 'inherit'] });
    // Dead before the test's directory goes: it writes the registry there.
    const exited = new Promise((resolve) => child.once('exit', resolve));
    t.after(async () => {
      child.kill('SIGKILL');
      await exited;
    });
    const [chunk] = (await once(child.stdout, 'data')) as [Buffer];
    assert.equal(chunk.toString(), 'held\n');
    return child;
  }

  it('keeps a directory another live process needs, and the last one out removes every one made', async (t) => {
    await withStateDir(t, 'boundary-mountpoints-', async (dir) => {
      const registry = join(dir, 'registry');
      const path = join(dir, 'var/run/boundary-ca');
      const mine = await ensureMountpoints([path], registry);
      const other = await otherProcess(t, path, registry, 'clean');
      await mine();
      assert.ok(await exists(path), 'the other test still bind-mounts over it');
      other.stdin?.end();
      await once(other, 'exit');
      assert.equal(await exists(join(dir, 'var')), false, 'every directory a test made is gone');
      assert.equal(await exists(registry), false, 'and the registry with them');
    });
  });

  it('does not wait for a process that died holding one', async (t) => {
    await withStateDir(t, 'boundary-mountpoints-', async (dir) => {
      const registry = join(dir, 'registry');
      const path = join(dir, 'var/run/boundary-ca');
      await once(await otherProcess(t, path, registry, 'exit'), 'exit');
      const mine = await ensureMountpoints([path], registry);
      await mine();
      assert.equal(await exists(join(dir, 'var')), false);
    });
  });
});
