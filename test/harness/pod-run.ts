// The scenario both pod end-to-end tests share (test/e2e/pod.test.ts runs the shipped sandbox pod,
// test/e2e/sandbox-template.test.ts the pod the Agent Sandbox controller makes from the example template): the
// cluster with its DNS and origins and the control PKI, the supervisor pod from supervisor.yaml, a sandbox pod
// started as the kubelet starts it (init containers in order, native sidecars, the agent once boundary's
// startupProbe passed), its attach and readiness, and what its agent must see. Everything is removed even on failure.

import assert from 'node:assert/strict';
import { access, chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { LoggedChild } from './child-lines.js';
import { imageNode } from './image-node.js';
import { type Container, container, type Manifests, type PodSpec } from './k8s-manifest.js';
import { containerArgv, containerEnv, ensureMountpoints } from './k8s-pod.js';
import { arg, buildTopology, type ChildLog, CLUSTER, childLog, must, NS, preparePod, probe, removeNamespaces, startClusterDns, startOrigins } from './pod-cluster.js';
import { type AgentClients, agentClients, type WorkloadFiles, writeOriginFiles } from './pod-workload.js';
import { stageBoundary } from './stage.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const DEPLOY = join(ROOT, 'deploy', 'kubernetes');
/** A first attach takes about 2 s here; generous for CI. */
const ATTACH_WAIT_MS = 60_000;

export interface PodWorld {
  readonly dir: string;
  readonly log: ChildLog;
  /** The image's entrypoint (`node dist/app/main.js`) on the Dockerfile's Node major, and the staged build it runs from. */
  readonly entrypoint: readonly string[];
  readonly cwd: string;
  /** The control CA (`boundary pki init`): its ca.pem and ca.key sign sandbox and supervisor certificates. */
  readonly pkiDir: string;
  /** The supervisor's Service name, as boundaries dial it. */
  readonly serviceHost: string;
  readonly files: WorkloadFiles;
  /** The cluster DNS, whose log shows every query it was asked. */
  readonly dns: LoggedChild;
  readonly figures: Record<string, unknown>;
  cli(...args: string[]): Promise<string>;
  /** A container of `pod` as a process in its namespace, the image's entrypoint running its args (plus `extraArgs`). */
  start(netns: string, pod: PodSpec, c: Container, volumes: ReadonlyMap<string, string>, extraArgs?: readonly string[]): LoggedChild;
  /** Creates the mount points of these pods' containers on the host (removed at the end). */
  mountpoints(...pods: PodSpec[]): Promise<void>;
}

/** The cluster the pods run in: PKI, origins' files, namespaces, the cluster DNS and the origins. */
export async function openWorld(t: TestContext, manifests: Manifests, agent: Container): Promise<PodWorld> {
  // On failure, what each process said: the first thing anyone debugging a red run needs. Its hook runs first.
  const log = childLog(t);
  const dir = await mkdtemp(join(tmpdir(), 'boundary-pod-'));
  await chmod(dir, 0o755);
  const unmounts: (() => Promise<void>)[] = [];
  // node:test runs hooks in the order they were registered, so this one runs before the pods' own: it stops every
  // process first, since they write in dir (the supervisor's --state-dir volume) until they have stopped.
  t.after(async () => {
    await log.stopAll();
    await removeNamespaces();
    for (const unmount of unmounts.reverse()) await unmount();
    await rm(dir, { recursive: true, force: true });
  });
  const service = manifests.documents.find((d) => d.kind === 'Service') as { metadata: { name: string; namespace: string } };
  const serviceHost = `${service.metadata.name}.${service.metadata.namespace}.svc`;
  const dockerfile = join(ROOT, 'Dockerfile');
  const image = await readFile(dockerfile, 'utf8');
  assert.match(image, /^ENTRYPOINT \["node", "dist\/app\/main\.js"\]$/m, 'the image entrypoint the test runs');
  assert.match(image, /^RUN npx tsc -p tsconfig\.json && node --import tsx scripts\/bundle\.ts dist bundle$/m, 'the image bundles as stageBoundary() does');
  assert.match(image, /^COPY --from=build \/app\/bundle \.\/dist$/m, 'the image runs the bundle');
  const [stage, node] = await Promise.all([stageBoundary(), imageNode(dockerfile)]);
  const entrypoint = [node.path, stage.main];
  const cli = (...args: string[]) => must([...entrypoint, ...args]);
  // The control PKI as the README says (`boundary pki`); the supervisor's certificate names its Service.
  const pkiDir = join(dir, 'pki');
  await cli('pki', 'init', '--dir', pkiDir);
  await cli('pki', 'issue', '--dir', pkiDir, '--server', serviceHost, `${serviceHost}.${CLUSTER.domain}`, '--out', join(dir, 'sup'));
  // The origins' certificates and script, a git repository, the musl client, the agent's home.
  const files = await writeOriginFiles(dir, { uid: agent.security.runAsUser, gid: agent.security.runAsGroup ?? agent.security.runAsUser });
  await buildTopology();
  const dns = await startClusterDns(t, log, dir, serviceHost);
  await startOrigins(t, log, files);
  return {
    dir,
    log,
    entrypoint,
    cwd: stage.dir,
    pkiDir,
    serviceHost,
    files,
    dns,
    figures: { node: node.version },
    cli,
    start: (netns, pod, c, volumes, extraArgs = []) =>
      log.launch(containerArgv({ netns, pod, container: c, volumes, command: [...entrypoint, ...c.args, ...extraArgs] }), {
        cwd: stage.dir,
        env: containerEnv(pod, c),
        label: `${pod.name}/${c.name}`,
      }),
    async mountpoints(...pods) {
      unmounts.push(await ensureMountpoints(pods.flatMap((p) => [...p.initContainers, ...p.containers]).flatMap((c) => c.volumeMounts.map((m) => m.mountPath))));
    },
  };
}

export interface SupervisorPod {
  readonly pod: PodSpec;
  readonly container: Container;
  /** The running supervisor (the latest one started). */
  current(): LoggedChild;
  /** Starts the container again (after a kill) and waits until it listens. */
  restart(): Promise<LoggedChild>;
}

/** supervisor.yaml's pod in its namespace, its volumes from `volumes`, ready. */
export async function startSupervisorPod(t: TestContext, world: PodWorld, pod: PodSpec, volumes: ReadonlyMap<string, string>, podIp: string): Promise<SupervisorPod> {
  const supervisorContainer = container(pod, 'supervisor');
  assert.match(arg(supervisorContainer, '--admin-listen'), /^127\.0\.0\.1:/, 'the supervisor admin listens on loopback');
  await preparePod(NS.supervisor, pod, podIp);
  let current: LoggedChild | undefined;
  const restart = async () => {
    const child = world.start(NS.supervisor, pod, supervisorContainer, volumes);
    current = child;
    await child.waitFor((line) => line.msg === 'supervisor listening');
    return child;
  };
  t.after(() => current?.stop());
  await restart();
  const ready = supervisorContainer.readinessProbe;
  assert.ok(ready !== undefined);
  assert.equal((await probe(podIp, ready.path, ready.port)).status, 200, 'the supervisor pod is ready');
  return { pod, container: supervisorContainer, current: () => current as LoggedChild, restart };
}

/**
 * The sandbox pod as the kubelet starts it: init containers to completion in order, native sidecars kept running
 * (the agent would start once boundary's startupProbe passed, so the CA and the bundle must be there by then),
 * then boundary attached as `--sandbox-id` and the pod ready. Returns boundary's process.
 */
export async function startSandboxPod(t: TestContext, world: PodWorld, options: { pod: PodSpec; volumes: ReadonlyMap<string, string>; podIp: string; supervisor: SupervisorPod }): Promise<LoggedChild> {
  const { pod, volumes, podIp } = options;
  // The test's processes share the host's PID namespace: what shareProcessNamespace gives the pod.
  assert.equal(pod.shareProcessNamespace, true, 'binary identity needs the pod to share its PID namespace');
  await preparePod(NS.sandbox, pod, podIp);
  const sidecars: LoggedChild[] = [];
  t.after(async () => {
    for (const child of sidecars.reverse()) await child.stop();
  });
  let boundary: LoggedChild | undefined;
  let sidecarStarted = 0;
  for (const c of pod.initContainers) {
    if (c.restartPolicy !== 'Always') {
      const init = world.start(NS.sandbox, pod, c, volumes);
      assert.equal(await init.exited(), 0, `init container ${c.name} failed:\n${init.text.join('\n')}`);
      continue;
    }
    if (c.name !== 'boundary') {
      // A sidecar without a startupProbe: the kubelet starts the next container as soon as this one started.
      assert.equal(c.startupProbe, undefined, `${c.name}: the test does not emulate its startupProbe`);
      sidecars.push(world.start(NS.sandbox, pod, c, volumes));
      continue;
    }
    sidecarStarted = performance.now();
    // The one argument the test adds: the origins' CA, standing for the public roots real origins chain to.
    boundary = world.start(NS.sandbox, pod, c, volumes, ['--upstream-ca', world.files.originCa]);
    sidecars.push(boundary);
    await boundary.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on'));
    const startup = c.startupProbe;
    assert.ok(startup !== undefined, 'the sidecar has a startupProbe, so the agent waits for it');
    assert.equal((await probe(podIp, startup.path, startup.port)).status, 200, 'startupProbe');
    // The agent starts now: the CA and the trust bundle must already be there.
    for (const file of ['ca.pem', 'bundle.pem']) await access(join(volumes.get('boundary-ca') ?? '', file));
  }
  assert.ok(boundary !== undefined, 'the sandbox pod runs boundary as a native sidecar');
  const sidecar = container(pod, 'boundary');
  const sandboxId = arg(sidecar, '--sandbox-id');
  await options.supervisor.current().waitFor((line) => line.msg === 'boundary attached' && line.sandboxId === sandboxId, ATTACH_WAIT_MS);
  world.figures.attachMs = Math.round(performance.now() - sidecarStarted);
  await boundary.waitFor((line) => /^policy generation \d+ from .* is effective$/.test(line.ocsf?.message ?? ''));
  const readiness = sidecar.readinessProbe;
  assert.ok(readiness !== undefined);
  const ready = await probe(podIp, readiness.path, readiness.port);
  assert.equal(ready.status, 200, `the sandbox pod is ready: ${ready.body}`);
  assert.equal(arg(sidecar, '--capture'), 'required', 'the pod is not ready without capture');
  assert.deepEqual(JSON.parse(ready.body).capture, { mode: 'required', state: 'ready' }, ready.body);
  return boundary;
}

/** Runs `command` in the agent container of the sandbox pod, as agentClients() does. */
export function sandboxAgent(world: PodWorld, pod: PodSpec, volumes: ReadonlyMap<string, string>): AgentClients {
  return agentClients({ pod, agent: container(pod, 'agent'), volumes, home: world.files.agentHome });
}
