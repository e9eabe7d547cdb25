// The Agent Sandbox example (deploy/kubernetes/examples/sandbox-template.yaml), run as the controller and the kubelet
// would run it (root only). The SandboxTemplate and SandboxWarmPool are checked against the controller's v1beta1
// fields; the pod is the one the controller makes for a Sandbox whose name nobody wrote down (a fresh one each run);
// its env and args get the downward API and `$(VAR)` filled in; its client certificate comes from the cert-manager
// CSI volume, made for that name and signed by cert-manager.yaml's ClusterIssuer. Then the scenario of
// test/e2e/pod.test.ts: attach as that name, ready, the agent's egress, the fence, binary identity. The sandbox is one
// the example's warm pool starts (named `<pool>-<random>`), and the supervisor serves it default.yaml, as it does
// every sandbox that has no file of its own.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { type CaIssuer, certManagerCsiDriver } from '../harness/k8s-csi-cert.js';
import { container, type Manifests, type PodSpec, readManifests } from '../harness/k8s-manifest.js';
import { materialiseVolumes, type VolumeSources } from '../harness/k8s-pod.js';
import { agentSandboxObjects, sandboxPod, warmSandboxName } from '../harness/k8s-sandbox-template.js';
import { arg, SANDBOX_IP, SUPERVISOR_IP, skipReason } from '../harness/pod-cluster.js';
import { checkAgentEgress } from '../harness/pod-egress.js';
import { checkBinaryIdentity } from '../harness/pod-identity.js';
import { DEPLOY, openWorld, sandboxAgent, startSandboxPod, startSupervisorPod } from '../harness/pod-run.js';
import { sandboxPolicy, tlsSecret } from '../harness/pod-workload.js';

const TEST_BUDGET_MS = 300_000;
const POOL = 'boundary-pool';
const TRUST_DOMAIN = 'boundary.internal';

type Labelled = { podSelector?: { matchLabels?: Record<string, string> } };
type NetworkPolicyDoc = { spec: { podSelector: { matchLabels?: Record<string, string> }; ingress?: { from: Labelled[]; ports: { port: number }[] }[] } };

/** The control ports supervisor.yaml's NetworkPolicies open to a pod with these labels (enforced by a CNI, not here). */
function supervisorPortsFor(manifests: Manifests, supervisor: PodSpec, pod: PodSpec): number[] {
  const selects = (selector: Record<string, string> | undefined, labels: Readonly<Record<string, string>>) => Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);
  return (manifests.documents.filter((d) => d.kind === 'NetworkPolicy') as NetworkPolicyDoc[])
    .filter((p) => selects(p.spec.podSelector.matchLabels, supervisor.labels))
    .flatMap((p) => p.spec.ingress ?? [])
    .filter((rule) => rule.from.some((peer) => peer.podSelector !== undefined && selects(peer.podSelector.matchLabels, pod.labels)))
    .flatMap((rule) => rule.ports.map((port) => port.port));
}

/** cert-manager.yaml's CA issuers, each standing on the test's control CA (the Secret its CA Certificate fills). */
function caIssuers(manifests: Manifests, pkiDir: string): Map<string, CaIssuer> {
  const caSecrets = new Set(
    manifests.documents.filter((d) => d.kind === 'Certificate' && (d.spec as { isCA?: boolean }).isCA === true).map((d) => (d.spec as { secretName: string }).secretName),
  );
  const issuers = new Map<string, CaIssuer>();
  for (const doc of manifests.documents) {
    const ca = (doc.spec as { ca?: { secretName: string } } | undefined)?.ca;
    if (doc.kind !== 'ClusterIssuer' || ca === undefined || !caSecrets.has(ca.secretName)) continue;
    issuers.set(`cert-manager.io/ClusterIssuer/${(doc.metadata as { name: string }).name}`, { certFile: join(pkiDir, 'ca.pem'), keyFile: join(pkiDir, 'ca.key') });
  }
  return issuers;
}

it('runs the pod the Agent Sandbox controller makes from the example SandboxTemplate: its own id and certificate, attach, egress, fence, identity', { timeout: TEST_BUDGET_MS }, async (t: TestContext) => {
  const reason = await skipReason();
  if (reason !== undefined) {
    t.skip(`Agent Sandbox template end-to-end test skipped: ${reason}`);
    return;
  }
  const started = performance.now();

  // --- What the manifests say, and the pod the controller makes for the warm pool's next Sandbox.
  const manifests = await readManifests(DEPLOY, ['supervisor.yaml', 'cert-manager.yaml', 'examples/sandbox-template.yaml']);
  const { templates, pools } = agentSandboxObjects(manifests);
  const pool = pools.get(POOL);
  assert.ok(pool !== undefined, `examples/sandbox-template.yaml holds the SandboxWarmPool ${POOL}`);
  const template = templates.get(pool.templateName);
  assert.ok(template !== undefined, `the pool's template ${pool.templateName} is in the same file`);
  assert.equal(template.networkPolicyManagement, 'Unmanaged', 'egress is left to the fence, not to the controller’s NetworkPolicy');
  assert.equal(template.envVarsInjectionPolicy, 'Disallowed', 'a claim cannot set env in the sidecar');
  const sandboxName = warmSandboxName(pool);
  const pod = sandboxPod(template, sandboxName);
  const supervisorPod = manifests.pods.get('boundary-supervisor');
  assert.ok(supervisorPod !== undefined);
  const sidecar = container(pod, 'boundary');
  const agent = container(pod, 'agent');
  assert.equal(arg(sidecar, '--sandbox-id'), sandboxName, 'boundary attaches as the Sandbox’s name, from the pod’s own');
  assert.deepEqual(supervisorPortsFor(manifests, supervisorPod, pod), [Number(arg(sidecar, '--supervisor').split(':')[1])], 'the supervisor admits these pods to its control port');

  const world = await openWorld(t, manifests, agent);
  const { dir, files, figures } = world;

  // --- Volumes: the supervisor's projected as the kubelet does, the sandbox's certificate by the CSI driver.
  const sources: VolumeSources = {
    'boundary-supervisor-tls': await tlsSecret(join(dir, 'sup')),
    'boundary-admin-token': { token: `${'a1b2c3d4'.repeat(8)}\n` },
    'boundary-policies': { 'default.yaml': sandboxPolicy(files.gh) },
    'boundary-credentials': { 'credentials.yaml': 'providers: {}\n' },
  };
  const issuers = caIssuers(manifests, world.pkiDir);
  const volumes = {
    supervisor: await materialiseVolumes(supervisorPod, sources, join(dir, 'volumes')),
    sandbox: await materialiseVolumes(pod, {}, join(dir, 'volumes'), certManagerCsiDriver(issuers, dir)),
  };
  const tlsMount = sidecar.volumeMounts.find((m) => m.mountPath === arg(sidecar, '--tls-dir'));
  assert.ok(tlsMount !== undefined, 'boundary’s --tls-dir is a volume');
  const issued = new X509Certificate(await readFile(join(volumes.sandbox.get(tlsMount.name) ?? '', 'cert.pem')));
  assert.equal(issued.subjectAltName, `URI:spiffe://${TRUST_DOMAIN}/sandbox/${sandboxName}`, 'the certificate names this sandbox');
  await world.mountpoints(supervisorPod, pod);
  const supervisor = await startSupervisorPod(t, world, supervisorPod, volumes.supervisor, SUPERVISOR_IP);

  // --- The sandbox pod: attached as its own name with the certificate made for it, ready, then the agent.
  const boundary = await startSandboxPod(t, world, { pod, volumes: volumes.sandbox, podIp: SANDBOX_IP, supervisor });
  const agentClients = sandboxAgent(world, pod, volumes.sandbox);
  await checkAgentEgress(world, { pod, podIp: SANDBOX_IP, agent: agentClients });
  figures.identity = await checkBinaryIdentity({
    pod,
    identity: container(pod, 'boundary-identity'),
    sidecar,
    agent,
    volumes: volumes.sandbox,
    files,
    boundary,
    run: agentClients.run,
    curl: agentClients.curl,
    entrypoint: world.entrypoint,
    cwd: world.cwd,
    log: world.log,
  });
  figures.sandbox = sandboxName;
  figures.totalMs = Math.round(performance.now() - started);
  t.diagnostic(`sandbox template figures: ${JSON.stringify(figures)}`);
  world.log.pass();
});
