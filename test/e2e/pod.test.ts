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
// Node major of the Dockerfile. Every namespace, mount point and file is removed even on failure.

import assert from 'node:assert/strict';
import { access, chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { LoggedChild } from '../harness/child-lines.js';
import { imageNode } from '../harness/image-node.js';
import { type Container, container, type PodSpec, readManifests } from '../harness/k8s-manifest.js';
import { containerArgv, containerEnv, ensureMountpoints, materialiseVolumes, type VolumeSources } from '../harness/k8s-pod.js';
import { arg, assertControlPortOnly, buildTopology, CLUSTER, childLog, must, NS, ORIGINS, preparePod, probe, removeNamespaces, SANDBOX_IP, SUPERVISOR_IP, skipReason, startClusterDns, startOrigins } from '../harness/pod-cluster.js';
import { agentClients, FAST_FAILURE_MS, NODE_CLIENT, PYTHON_CLIENT, sandboxPolicy, supervisorAdmin, tlsSecret, writeOriginFiles } from '../harness/pod-workload.js';
import { checkBinaryIdentity } from '../harness/pod-identity.js';
import { stageBoundary } from '../harness/stage.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEPLOY = join(ROOT, 'deploy', 'kubernetes');
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
  const figures: Record<string, unknown> = {};
  const dir = await mkdtemp(join(tmpdir(), 'boundary-pod-'));
  await chmod(dir, 0o755);
  let unmount: (() => Promise<void>) | undefined;
  // Registered first so that it runs last (t.after is LIFO) and always.
  t.after(async () => {
    await removeNamespaces();
    await unmount?.();
    await rm(dir, { recursive: true, force: true });
  });
  // On failure, what each process said: the first thing anyone debugging a red run needs.
  const log = childLog(t);

  // --- What the manifests say.
  const manifests = await readManifests(DEPLOY, ['supervisor.yaml', 'sandbox-pod.yaml', 'cert-manager.yaml']);
  const sandboxPod = manifests.pods.get('sandbox-sb-1');
  const supervisorPod = manifests.pods.get('boundary-supervisor');
  assert.ok(sandboxPod !== undefined && supervisorPod !== undefined, 'both pods are in deploy/kubernetes');
  const sidecar = container(sandboxPod, 'boundary');
  const agent = container(sandboxPod, 'agent');
  // The test's processes share the host's PID namespace: what shareProcessNamespace gives the pod.
  assert.equal(sandboxPod.shareProcessNamespace, true, 'binary identity needs the pod to share its PID namespace');
  const supervisorContainer = container(supervisorPod, 'supervisor');
  // The supervisor's address is its Service's cluster name; the port is the Service's control port.
  const service = manifests.documents.find((d) => d.kind === 'Service') as { metadata: { name: string; namespace: string }; spec: { ports: { name: string; port: number }[] } };
  const supervisorArg = arg(sidecar, '--supervisor');
  const serviceHost = `${service.metadata.name}.${service.metadata.namespace}.svc`;
  assert.equal(supervisorArg, `${serviceHost}:${service.spec.ports.find((p) => p.name === 'control')?.port}`);
  assert.deepEqual(
    service.spec.ports.map((p) => p.name).sort(),
    ['control', 'metrics'],
    'the Service exposes the control port and a metrics port only (the admin API stays in the pod)',
  );
  assert.match(arg(supervisorContainer, '--admin-listen'), /^127\.0\.0\.1:/, 'the supervisor admin listens on loopback');
  // NetworkPolicies (enforced by a CNI, not here): sandbox pods reach the supervisor on its control port only.
  assertControlPortOnly(manifests, sandboxPod, supervisorPod, supervisorArg);
  const sandboxId = arg(sidecar, '--sandbox-id');
  const dockerfile = join(ROOT, 'Dockerfile');
  assert.match(await readFile(dockerfile, 'utf8'), /^ENTRYPOINT \["node", "dist\/app\/main\.js"\]$/m, 'the image entrypoint the test runs');

  const [stage, node] = await Promise.all([stageBoundary(), imageNode(dockerfile)]);
  figures.node = node.version;
  const entrypoint = [node.path, stage.main];
  const cli = (...args: string[]) => must([...entrypoint, ...args]);

  // --- Certificates: `boundary pki` as docs/running.md (Kubernetes) says, stored under the keys cert-manager writes.
  const pkiDir = join(dir, 'pki');
  await cli('pki', 'init', '--dir', pkiDir);
  await cli('pki', 'issue', '--dir', pkiDir, '--sandbox', sandboxId, '--out', join(dir, 'sb'));
  await cli('pki', 'issue', '--dir', pkiDir, '--server', serviceHost, `${serviceHost}.${CLUSTER.domain}`, '--out', join(dir, 'sup'));
  // The origins' certificates and script, a git repository, the musl client, the agent's home.
  const files = await writeOriginFiles(dir, { uid: agent.security.runAsUser, gid: agent.security.runAsGroup ?? agent.security.runAsUser });

  // --- The cluster: namespaces, DNS, origins.
  await buildTopology();
  const dns = await startClusterDns(t, log, dir, serviceHost);
  await startOrigins(t, log, files);

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
  unmount = await ensureMountpoints([...supervisorPod.containers, ...sandboxPod.initContainers, ...sandboxPod.containers].flatMap((c) => c.volumeMounts.map((m) => m.mountPath)));
  await preparePod(NS.supervisor, supervisorPod, SUPERVISOR_IP);
  await preparePod(NS.sandbox, sandboxPod, SANDBOX_IP);

  const startContainer = (netns: string, pod: PodSpec, c: Container, podVolumes: ReadonlyMap<string, string>, extraArgs: readonly string[] = []): LoggedChild =>
    log.launch(containerArgv({ netns, pod, container: c, volumes: podVolumes, command: [...entrypoint, ...c.args, ...extraArgs] }), {
      cwd: stage.dir,
      env: containerEnv(pod, c),
      label: `${pod.name}/${c.name}`,
    });
  let supervisor: LoggedChild | undefined;
  const startSupervisor = async (): Promise<LoggedChild> => {
    const child = startContainer(NS.supervisor, supervisorPod, supervisorContainer, volumes.supervisor);
    supervisor = child;
    await child.waitFor((line) => line.msg === 'supervisor listening');
    return child;
  };
  t.after(() => supervisor?.stop());
  await startSupervisor();
  const supervisorReady = supervisorContainer.readinessProbe;
  assert.ok(supervisorReady !== undefined);
  assert.equal((await probe(SUPERVISOR_IP, supervisorReady.path, supervisorReady.port)).status, 200, 'the supervisor pod is ready');

  // --- The sandbox pod: init containers in order (a native sidecar runs on), then the agent.
  let boundary: LoggedChild | undefined;
  t.after(() => boundary?.stop());
  const sidecars: LoggedChild[] = [];
  t.after(async () => {
    for (const child of sidecars) await child.stop();
  });
  let sidecarStarted = 0;
  for (const c of sandboxPod.initContainers) {
    if (c.restartPolicy !== 'Always') {
      const init = startContainer(NS.sandbox, sandboxPod, c, volumes.sandbox);
      assert.equal(await init.exited(), 0, `init container ${c.name} failed:\n${init.text.join('\n')}`);
      continue;
    }
    if (c.name !== 'boundary') {
      // A sidecar without a startupProbe: the kubelet starts the next container as soon as this one started.
      assert.equal(c.startupProbe, undefined, `${c.name}: the test does not emulate its startupProbe`);
      sidecars.push(startContainer(NS.sandbox, sandboxPod, c, volumes.sandbox));
      continue;
    }
    sidecarStarted = performance.now();
    // The one argument the test adds: the origins' CA, standing for the public roots real origins chain to.
    boundary = startContainer(NS.sandbox, sandboxPod, c, volumes.sandbox, ['--upstream-ca', files.originCa]);
    await boundary.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on'));
    const startup = c.startupProbe;
    assert.ok(startup !== undefined, 'the sidecar has a startupProbe, so the agent waits for it');
    assert.equal((await probe(SANDBOX_IP, startup.path, startup.port)).status, 200, 'startupProbe');
    // The agent starts now: the CA and the trust bundle must already be there.
    for (const file of ['ca.pem', 'bundle.pem']) await access(join(volumes.sandbox.get('boundary-ca') ?? '', file));
  }
  assert.ok(boundary !== undefined, 'the sandbox pod runs boundary as a native sidecar');
  const live = boundary;
  const attached = (child: LoggedChild) => child.waitFor((line) => line.msg === 'boundary attached' && line.sandboxId === sandboxId, 60_000);
  await attached(supervisor as LoggedChild);
  figures.attachMs = Math.round(performance.now() - sidecarStarted);
  await live.waitFor((line) => /^policy generation \d+ from .* is effective$/.test(line.ocsf?.message ?? ''));
  const readiness = sidecar.readinessProbe;
  assert.ok(readiness !== undefined);
  const ready = await probe(SANDBOX_IP, readiness.path, readiness.port);
  assert.equal(ready.status, 200, `the sandbox pod is ready: ${ready.body}`);
  assert.equal(arg(sidecar, '--capture'), 'required', 'the pod is not ready without capture');
  assert.deepEqual(JSON.parse(ready.body).capture, { mode: 'required', state: 'ready' }, ready.body);

  // --- The agent: real clients with the agent container's env, uid and mounts.
  const { run: agentRun, curl, allowedWorks } = agentClients({ pod: sandboxPod, agent, volumes: volumes.sandbox, home: files.agentHome });

  await allowedWorks('curl');
  // HTTP/2 both sides: the agent's curl to boundary's inspection, boundary's own client to the origin.
  for (const [how, args] of [['through the proxy', []], ['transparently', ['--noproxy', '*']]] as const) {
    const h2 = await curl('--http2', ...args, `https://api.origin.test/v1/h2-${how === 'transparently' ? 'transparent' : 'proxy'}`);
    assert.deepEqual([h2.body, h2.status], [`api saw GET /v1/h2-${how === 'transparently' ? 'transparent' : 'proxy'} over HTTP/2.0`, '200'], `curl --http2 ${how}: ${h2.stderr}`);
  }
  const transparent = await curl('--noproxy', '*', 'https://api.origin.test/v1/transparent');
  assert.deepEqual([transparent.body, transparent.status], ['api saw GET /v1/transparent', '200'], `curl without proxy variables: ${transparent.stderr}`);
  const plain = await curl('http://files.origin.test/f/proxy');
  assert.deepEqual([plain.body, plain.status], ['files saw /f/proxy', '200'], plain.stderr);
  const plainDirect = await curl('--noproxy', '*', 'http://files.origin.test/f/transparent');
  assert.deepEqual([plainDirect.body, plainDirect.status], ['files saw /f/transparent', '200'], plainDirect.stderr);
  const post = await curl('-X', 'POST', 'https://api.origin.test/v1/write');
  assert.equal(post.status, '403', `an L7 rule denies POST: ${post.body}`);
  // The admin port (docs/kubernetes.md#the-admin-port): the agent reads its denials on loopback; from the
  // cluster, where Prometheus and the kubelet reach the same port, they are refused.
  const ownDenials = await curl(`http://127.0.0.1:${readiness.port}/v1/denials?last=5`);
  assert.equal(ownDenials.status, '200', `the agent reads its denials: ${ownDenials.body} ${ownDenials.stderr}`);
  assert.ok((JSON.parse(ownDenials.body) as { denials: unknown[] }).denials.length > 0, ownDenials.body);
  const clusterDenials = await probe(SANDBOX_IP, '/v1/denials', readiness.port);
  assert.equal(clusterDenials.status, 403, clusterDenials.body);
  assert.equal(JSON.parse(clusterDenials.body).error, 'ADMIN_LOOPBACK_ONLY');
  const python = await agentRun('/usr/bin/python3', '-c', PYTHON_CLIENT, 'https://api.origin.test/v1/python');
  assert.equal(python.stdout.trim(), 'api saw GET /v1/python', `python3 urllib through the proxy: ${python.stderr}`);
  const cloned = await agentRun('git', 'clone', '-q', 'https://git.origin.test/repo.git', join(files.agentHome, 'repo'));
  assert.equal(cloned.code, 0, `git clone through the proxy (passthrough TLS, verified with the bundle): ${cloned.stderr}`);
  assert.equal(await readFile(join(files.agentHome, 'repo', 'README'), 'utf8'), 'cloned through boundary\n');
  // Node's https ignores the proxy variables: this one goes through policy DNS and transparent capture.
  const nodeClient = await agentRun(process.execPath, '-e', NODE_CLIENT, 'https://api.origin.test/v1/node');
  assert.equal(nodeClient.stdout.trim(), '200 api saw GET /v1/node', `node https without a proxy: ${nodeClient.stderr}`);

  // The ClusterFirst search walk (ndots:5) reaches the real name with musl's resolver too.
  const musl = await agentRun(files.muslClient, 'api.origin.test');
  assert.match(musl.stdout.trim(), /^198\.1[89]\.\d+\.\d+$/, `musl getaddrinfo through the search list: ${musl.stdout} ${musl.stderr}`);

  // Denied names fail fast without the proxy too, and never reach the cluster DNS.
  const unresolvable = await curl('--noproxy', '*', 'http://denied.origin.test/');
  assert.equal(unresolvable.code, 6, `a denied name does not resolve: ${unresolvable.stderr}`);
  assert.ok(unresolvable.ms < FAST_FAILURE_MS, `the DNS refusal took ${unresolvable.ms} ms`);
  // The fence: a direct dial to a real address is refused at once, and a query to the cluster DNS is
  // answered by policy DNS (the init container's redirect), never by the cluster DNS itself.
  const direct = await curl('--noproxy', '*', `http://${ORIGINS.denied}/`);
  assert.equal(direct.code, 7, `a direct dial is fenced: ${direct.stderr}`);
  assert.ok(direct.ms < FAST_FAILURE_MS, `the fence's refusal took ${direct.ms} ms`);
  const digAllowed = await agentRun('dig', '+short', '+tries=1', '+time=3', `@${CLUSTER.dnsIp}`, 'api.origin.test', 'A');
  assert.match(digAllowed.stdout.trim(), /^198\.1[89]\.\d+\.\d+$/, `the workload's DNS goes to policy DNS: ${digAllowed.stdout}`);
  const digDenied = await agentRun('dig', '+tries=1', '+time=3', `@${CLUSTER.dnsIp}`, 'denied.origin.test', 'A');
  assert.match(digDenied.stdout, /status: NXDOMAIN/, digDenied.stdout);
  assert.equal(dns.text.filter((line) => line.includes('denied.origin.test')).length, 0, 'a denied name is never asked upstream');
  assert.ok(dns.text.some((line) => line.includes(`query[A] api.origin.test from ${SANDBOX_IP}`)), 'boundary resolved allowed names through the cluster DNS');
  assert.ok(dns.text.some((line) => line.includes(`query[A] ${serviceHost}.${CLUSTER.domain} from ${SANDBOX_IP}`)), 'boundary found its supervisor through the cluster DNS');

  // --- Binary identity: the same endpoints allowed and denied by the process that opened the connection.
  const identity = container(sandboxPod, 'boundary-identity');
  figures.identity = await checkBinaryIdentity({ pod: sandboxPod, identity, sidecar, agent, volumes: volumes.sandbox, files, boundary: live, run: agentRun, curl, entrypoint, cwd: stage.dir, log });

  // --- An instance the supervisor expects, kept on the state volume (--state-dir) through every kill below.
  const adminUrl = `http://${arg(supervisorContainer, '--admin-listen')}/v1/sandboxes`;
  const { call: adminCall, expectedInstance } = supervisorAdmin(adminUrl, (sources['boundary-admin-token']?.token ?? '').trim());
  await adminCall('PUT', `/${sandboxId}/instances/expected-by-operator`);
  const expectedBefore = await expectedInstance();
  assert.ok(expectedBefore?.deadlineAt !== null && expectedBefore?.deadlineAt !== undefined, 'the expected instance has a deadline');

  // --- Kill the supervisor 10 times: the agent keeps its egress, every re-attach succeeds.
  const reattachMs: number[] = [];
  const outage: string[] = [];
  for (let kill = 1; kill <= SUPERVISOR_KILLS; kill++) {
    const killedAt = performance.now();
    await (supervisor as LoggedChild).kill();
    await allowedWorks(`outage-${kill}`);
    outage.push(JSON.parse((await probe(SANDBOX_IP, readiness.path, readiness.port)).body).reasons?.join(',') ?? '');
    const next = await startSupervisor();
    await attached(next);
    reattachMs.push(Math.round(performance.now() - killedAt));
    assert.ok((reattachMs.at(-1) ?? 0) < REATTACH_LIMIT_MS, `re-attach after kill ${kill} took ${reattachMs.at(-1)} ms`);
    const after = await probe(SANDBOX_IP, readiness.path, readiness.port);
    assert.equal(after.status, 200, `ready again after kill ${kill}: ${after.body}`);
    await allowedWorks(`attached-${kill}`);
    // A cadence, not a wait for an event: the next kill comes KILL_INTERVAL_MS after this re-attach, so
    // that each session outlives the healthy-session threshold (see KILL_INTERVAL_MS above).
    await delay(Math.max(0, KILL_INTERVAL_MS - (performance.now() - killedAt - (reattachMs.at(-1) ?? 0))));
  }
  await allowedWorks('after-kills');
  assert.deepEqual(await expectedInstance(), expectedBefore, 'the expected instance and its deadline survived 10 kills');
  figures.reattachMs = reattachMs;
  figures.readyzDuringOutage = [...new Set(outage)];
  figures.totalMs = Math.round(performance.now() - started);
  t.diagnostic(`pod figures: ${JSON.stringify(figures)}`);
  assert.equal(live.child.exitCode, null, 'boundary ran through every supervisor kill');
  log.pass();
});
