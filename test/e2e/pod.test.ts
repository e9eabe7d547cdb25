// The shipped Kubernetes deployment, run as written (root only). Reads deploy/kubernetes/*.yaml and runs
// what they say as processes in network namespaces this test creates:
//   - "cluster": the cluster DNS (real dnsmasq) serving the supervisor's Service name and the origins' names,
//     and the origins themselves (HTTPS with L7 rules, HTTP/2 and HTTP/1.1; plain HTTP; HTTPS git; one origin the
//     policy denies);
//   - "supervisor" pod: the supervisor container's args, its Secrets/ConfigMaps as the kubelet projects them;
//   - "sandbox" pod: resolv.conf as the kubelet writes it for the pod's dnsPolicy, the init container's args
//     as uid 0 with its capabilities, the boundary sidecar's args as its runAsUser, then real clients (curl,
//     python3 urllib, git, node, musl getaddrinfo) with the agent container's env as the agent's uid.
// The processes run the image's entrypoint (`node dist/app/main.js`) from a world-readable staged build, on the
// Node major of the Dockerfile. Every namespace, mount point and file is removed even on failure. The scenario is
// shared with test/e2e/sandbox-template.test.ts (test/harness/pod-run.ts, pod-egress.ts, pod-identity.ts).

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { container, readManifests } from '../harness/k8s-manifest.js';
import { materialiseVolumes, type VolumeSources } from '../harness/k8s-pod.js';
import { arg, assertControlPortOnly, probe, SANDBOX_IP, SUPERVISOR_IP, skipReason } from '../harness/pod-cluster.js';
import { checkAgentEgress } from '../harness/pod-egress.js';
import { checkBinaryIdentity } from '../harness/pod-identity.js';
import { DEPLOY, openWorld, sandboxAgent, startSandboxPod, startSupervisorPod } from '../harness/pod-run.js';
import { sandboxPolicy, supervisorAdmin, tlsSecret } from '../harness/pod-workload.js';

const TEST_BUDGET_MS = 300_000;
const SUPERVISOR_KILLS = 10;
/** A boundary whose session was healthy re-attaches within about a second of the supervisor's return; generous for CI. */
const REATTACH_LIMIT_MS = 10_000;
/**
 * The scenario's cadence: each kill comes this long after the previous re-attach, a crash loop one second
 * apart. A session killed sooner than the boundary's healthy-session threshold counts as a failed attempt
 * by design (src/control/backoff.ts), and would meet the backoff instead of the quick re-attach.
 */
const KILL_INTERVAL_MS = 1_000;

it('runs the shipped sandbox pod and supervisor as the manifests say: attach, ready, egress, fence, 10 supervisor kills', { timeout: TEST_BUDGET_MS }, async (t: TestContext) => {
  const reason = await skipReason();
  if (reason !== undefined) {
    t.skip(`Kubernetes pod end-to-end test skipped: ${reason}`);
    return;
  }
  const started = performance.now();

  // --- What the manifests say.
  const manifests = await readManifests(DEPLOY, ['supervisor.yaml', 'sandbox-pod.yaml', 'cert-manager.yaml']);
  const sandboxPod = manifests.pods.get('sandbox-sb-1');
  const supervisorPod = manifests.pods.get('boundary-supervisor');
  assert.ok(sandboxPod !== undefined && supervisorPod !== undefined, 'both pods are in deploy/kubernetes');
  const sidecar = container(sandboxPod, 'boundary');
  const agent = container(sandboxPod, 'agent');
  const supervisorContainer = container(supervisorPod, 'supervisor');
  // The supervisor's address is its Service's cluster name; the port is the Service's control port.
  const service = manifests.documents.find((d) => d.kind === 'Service') as { metadata: { name: string; namespace: string }; spec: { ports: { name: string; port: number }[] } };
  const supervisorArg = arg(sidecar, '--supervisor');
  assert.equal(supervisorArg, `${service.metadata.name}.${service.metadata.namespace}.svc:${service.spec.ports.find((p) => p.name === 'control')?.port}`);
  assert.deepEqual(
    service.spec.ports.map((p) => p.name).sort(),
    ['control', 'metrics'],
    'the Service exposes the control port and a metrics port only (the admin API stays in the pod)',
  );
  // NetworkPolicies (enforced by a CNI, not here): sandbox pods reach the supervisor on its control port only.
  assertControlPortOnly(manifests, sandboxPod, supervisorPod, supervisorArg);
  const sandboxId = arg(sidecar, '--sandbox-id');

  const world = await openWorld(t, manifests, agent);
  const { dir, files, figures } = world;
  // The sandbox's certificate as docs/running.md (Kubernetes) says (`boundary pki issue`), stored under the keys cert-manager writes.
  await world.cli('pki', 'issue', '--dir', world.pkiDir, '--sandbox', sandboxId, '--out', join(dir, 'sb'));

  // --- Volumes as the kubelet projects them, mounted at the manifests' paths inside each container.
  const sources: VolumeSources = {
    'boundary-supervisor-tls': await tlsSecret(join(dir, 'sup')),
    [`boundary-${sandboxId}-tls`]: await tlsSecret(join(dir, 'sb')),
    'boundary-admin-token': { token: `${'a1b2c3d4'.repeat(8)}\n` },
    'boundary-policies': { [`${sandboxId}.yaml`]: sandboxPolicy(files.gh) },
    'boundary-credentials': { 'credentials.yaml': 'providers: {}\n' },
  };
  const volumes = {
    supervisor: await materialiseVolumes(supervisorPod, sources, join(dir, 'volumes')),
    sandbox: await materialiseVolumes(sandboxPod, sources, join(dir, 'volumes')),
  };
  await world.mountpoints(supervisorPod, sandboxPod);
  const supervisor = await startSupervisorPod(t, world, supervisorPod, volumes.supervisor, SUPERVISOR_IP);

  // --- The sandbox pod: init containers in order (a native sidecar runs on), then the agent.
  const boundary = await startSandboxPod(t, world, { pod: sandboxPod, volumes: volumes.sandbox, podIp: SANDBOX_IP, supervisor });
  const readiness = sidecar.readinessProbe;
  assert.ok(readiness !== undefined);

  // --- The agent: real clients with the agent container's env, uid and mounts.
  const agentClients = sandboxAgent(world, sandboxPod, volumes.sandbox);
  await checkAgentEgress(world, { pod: sandboxPod, podIp: SANDBOX_IP, agent: agentClients });

  // --- Binary identity: the same endpoints allowed and denied by the process that opened the connection.
  const identity = container(sandboxPod, 'boundary-identity');
  figures.identity = await checkBinaryIdentity({ pod: sandboxPod, identity, sidecar, agent, volumes: volumes.sandbox, files, boundary, run: agentClients.run, curl: agentClients.curl, entrypoint: world.entrypoint, cwd: world.cwd, log: world.log });

  // --- An instance the supervisor expects, kept on the state volume (--state-dir) through every kill below.
  const adminUrl = `http://${arg(supervisorContainer, '--admin-listen')}/v1/sandboxes`;
  const { call: adminCall, expectedInstance } = supervisorAdmin(adminUrl, (sources['boundary-admin-token']?.token ?? '').trim());
  await adminCall('PUT', `/${sandboxId}/instances/expected-by-operator`);
  const expectedBefore = await expectedInstance();
  assert.ok(expectedBefore?.deadlineAt !== null && expectedBefore?.deadlineAt !== undefined, 'the expected instance has a deadline');

  // --- Kill the supervisor 10 times: the agent keeps its egress, every re-attach succeeds.
  const attached = (child: typeof boundary) => child.waitFor((line) => line.msg === 'boundary attached' && line.sandboxId === sandboxId, 60_000);
  const reattachMs: number[] = [];
  const outage: string[] = [];
  for (let kill = 1; kill <= SUPERVISOR_KILLS; kill++) {
    const killedAt = performance.now();
    await supervisor.current().kill();
    await agentClients.allowedWorks(`outage-${kill}`);
    outage.push(JSON.parse((await probe(SANDBOX_IP, readiness.path, readiness.port)).body).reasons?.join(',') ?? '');
    const next = await supervisor.restart();
    await attached(next);
    reattachMs.push(Math.round(performance.now() - killedAt));
    assert.ok((reattachMs.at(-1) ?? 0) < REATTACH_LIMIT_MS, `re-attach after kill ${kill} took ${reattachMs.at(-1)} ms`);
    const after = await probe(SANDBOX_IP, readiness.path, readiness.port);
    assert.equal(after.status, 200, `ready again after kill ${kill}: ${after.body}`);
    await agentClients.allowedWorks(`attached-${kill}`);
    // A cadence, not a wait for an event: the next kill comes KILL_INTERVAL_MS after this re-attach, so
    // that each session outlives the healthy-session threshold (see KILL_INTERVAL_MS above).
    await delay(Math.max(0, KILL_INTERVAL_MS - (performance.now() - killedAt - (reattachMs.at(-1) ?? 0))));
  }
  await agentClients.allowedWorks('after-kills');
  assert.deepEqual(await expectedInstance(), expectedBefore, 'the expected instance and its deadline survived 10 kills');
  figures.reattachMs = reattachMs;
  figures.readyzDuringOutage = [...new Set(outage)];
  figures.totalMs = Math.round(performance.now() - started);
  t.diagnostic(`pod figures: ${JSON.stringify(figures)}`);
  assert.equal(boundary.child.exitCode, null, 'boundary ran through every supervisor kill');
  world.log.pass();
});
