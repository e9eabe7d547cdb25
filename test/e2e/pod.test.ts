// The shipped Kubernetes deployment, run as written (root only). Reads deploy/kubernetes/*.yaml and runs
// what they say as processes in network namespaces this test creates:
//   - "cluster": the cluster DNS (real dnsmasq) serving the supervisor's Service name and the origins' names,
//     and the origins themselves (HTTPS with L7 rules, plain HTTP, HTTPS git, one origin the policy denies);
//   - "supervisor" pod: the supervisor container's args, its Secrets/ConfigMaps as the kubelet projects them;
//   - "sandbox" pod: resolv.conf as the kubelet writes it for the pod's dnsPolicy, the init container's args
//     as uid 0 with its capabilities, the boundary sidecar's args as its runAsUser, then real clients (curl,
//     python3 urllib, git, node, musl getaddrinfo) with the agent container's env as the agent's uid.
// The processes run the image's entrypoint (`node dist/main.js`) from a world-readable staged build, on the
// Node major of the Dockerfile. Every namespace, mount point and file is removed even on failure.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access, chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { createCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { type LoggedChild, spawnLogged } from '../harness/child-lines.js';
import { imageNode } from '../harness/image-node.js';
import { type Container, container, type PodSpec, podResolvConf, readManifests } from '../harness/k8s-manifest.js';
import { containerArgv, containerEnv, ensureMountpoints, materialiseVolumes, type VolumeSources } from '../harness/k8s-pod.js';
import { stageBoundary } from '../harness/stage.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEPLOY = join(ROOT, 'deploy', 'kubernetes');
const TEST_BUDGET_MS = 300_000;
const PID = process.pid;
const NS = { cluster: `k8c-${PID}`, sandbox: `k8s-${PID}`, supervisor: `k8v-${PID}` } as const;
const CLUSTER = { dnsIp: '10.96.0.10', domain: 'cluster.local' } as const;
// Addresses exist only inside this test's namespaces (the network rule): pods on 10.244.x, "internet"
// origins on 10.96.1.x behind the cluster namespace.
const SANDBOX_IP = '10.244.1.2';
const SUPERVISOR_IP = '10.244.2.2';
const ORIGINS = { api: '10.96.1.10', files: '10.96.1.11', git: '10.96.1.12', denied: '10.96.1.13' } as const;
const SUPERVISOR_KILLS = 10;
/** A boundary whose session was healthy re-attaches within about a second of the supervisor's return; generous for CI. */
const REATTACH_LIMIT_MS = 10_000;
/**
 * The scenario's cadence: each kill comes this long after the previous re-attach, a crash loop one second
 * apart. A session killed sooner than the boundary's healthy-session threshold counts as a failed attempt
 * by design (src/control/backoff.ts), and would meet the backoff instead of the quick re-attach.
 */
const KILL_INTERVAL_MS = 1_000;
/** A refusal (403, REFUSED, the fence's reset) must come back at once, not after a client timeout. */
const FAST_FAILURE_MS = 2_000;
const CLIENT_TIMEOUT_S = 15;
const CLEAN_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin';

const ORIGINS_SCRIPT = `
import { createServer as http } from 'node:http';
import { createServer as https } from 'node:https';
import { readFileSync } from 'node:fs';
import { join, normalize } from 'node:path';
const [apiCert, apiKey, gitCert, gitKey, gitRoot, api, files, git, denied] = process.argv.slice(2);
const listen = (server, ip, port) => new Promise((resolve) => server.listen(port, ip, resolve));
const tls = (cert, key) => ({ cert: readFileSync(cert), key: readFileSync(key) });
await listen(https(tls(apiCert, apiKey), (req, res) => res.end('api saw ' + req.method + ' ' + req.url)), api, 443);
await listen(http((req, res) => res.end('files saw ' + req.url)), files, 80);
await listen(https(tls(gitCert, gitKey), (req, res) => {
  // The dumb HTTP protocol: git reads info/refs, HEAD and objects as static files.
  const path = normalize(decodeURIComponent(new URL(req.url, 'https://git').pathname));
  try { res.end(readFileSync(join(gitRoot, path))); } catch { res.statusCode = 404; res.end(); }
}), git, 443);
await listen(http((req, res) => res.end('denied origin saw ' + req.url)), denied, 80);
console.log('READY');
process.on('SIGTERM', () => process.exit(0));
`;

const NODE_CLIENT = `
const https = require('node:https');
https.get(process.argv[1], (res) => { let b = ''; res.on('data', (c) => (b += c)); res.on('end', () => console.log(res.statusCode + ' ' + b)); })
  .on('error', (e) => { console.log('ERR ' + e.code); process.exitCode = 1; });
`;
// getaddrinfo of musl libc, the resolver of Alpine-based agent images: unlike glibc it gives up at the first
// search-list candidate that is answered with anything but NXDOMAIN or NODATA.
const MUSL_CLIENT = `
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
int main(int argc, char **argv) {
  struct addrinfo hints = {0}, *res;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(argv[1], NULL, &hints, &res);
  if (rc != 0) { printf("ERR %s\\n", gai_strerror(rc)); return 2; }
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, text, sizeof text);
  printf("%s\\n", text);
  return 0;
}
`;
const PYTHON_CLIENT = 'import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1], timeout=15).read().decode())';

type Peer = { podSelector?: { matchLabels?: Record<string, string> } };
interface NetworkPolicySpec {
  readonly podSelector: { matchLabels?: Record<string, string> };
  readonly ingress?: { from: Peer[]; ports: { port: number }[] }[];
  readonly egress?: { to: Peer[]; ports: { port: number }[] }[];
}

interface Result {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

async function exec(argv: readonly string[], env: NodeJS.ProcessEnv = { PATH: CLEAN_PATH }, cwd?: string): Promise<Result> {
  const start = performance.now();
  try {
    const { stdout, stderr } = await run(argv[0] as string, argv.slice(1), { env, timeout: 60_000, ...(cwd === undefined ? {} : { cwd }) });
    return { code: 0, stdout, stderr, ms: performance.now() - start };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '', ms: performance.now() - start };
  }
}

const inNs = (ns: string, ...argv: string[]) => exec(['ip', 'netns', 'exec', ns, ...argv]);

async function must(argv: readonly string[]): Promise<string> {
  const result = await exec(argv);
  if (result.code !== 0) throw new Error(`${argv.join(' ')} failed (${result.code}): ${result.stderr}`);
  return result.stdout;
}

async function skipReason(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root (creates network namespaces, iptables rules and bind mounts)';
  for (const tool of ['ip', 'iptables', 'ip6tables', 'setpriv', 'dnsmasq', 'curl', 'dig', 'git', 'mount', 'musl-gcc']) {
    if ((await exec(['sh', '-c', `command -v ${tool}`])).code !== 0) return `${tool} is not installed`;
  }
  if ((await exec(['test', '-x', '/usr/bin/python3'])).code !== 0) return '/usr/bin/python3 is not installed';
  if ((await exec(['ip', 'netns', 'list'])).code !== 0) return 'ip netns is unavailable';
  return undefined;
}

/** A kubelet httpGet probe from outside the pod (the cluster namespace) to the pod's IP. */
async function probe(podIp: string, path: string, port: number): Promise<{ status: number; body: string }> {
  const r = await inNs(NS.cluster, 'curl', '-sS', '--max-time', '5', '-w', '\n%{http_code}', `http://${podIp}:${port}${path}`);
  const cut = r.stdout.lastIndexOf('\n');
  return { status: Number(r.stdout.slice(cut + 1)), body: r.code === 0 ? r.stdout.slice(0, cut) : `curl exit ${r.code}: ${r.stderr}` };
}

/** Two namespaces joined by a veth pair; `ns` routes everything through `gateway`. */
async function link(ns: string, name: string, ip: string, gateway: string): Promise<void> {
  await must(['ip', 'link', 'add', `${name}p`, 'netns', ns, 'type', 'veth', 'peer', 'name', `${name}c`, 'netns', NS.cluster]);
  await must(['ip', '-n', ns, 'addr', 'add', `${ip}/24`, 'dev', `${name}p`]);
  await must(['ip', '-n', NS.cluster, 'addr', 'add', `${gateway}/24`, 'dev', `${name}c`]);
  await must(['ip', '-n', ns, 'link', 'set', `${name}p`, 'up']);
  await must(['ip', '-n', NS.cluster, 'link', 'set', `${name}c`, 'up']);
  await must(['ip', '-n', ns, 'route', 'add', 'default', 'via', gateway]);
}

async function buildTopology(): Promise<void> {
  for (const ns of Object.values(NS)) {
    await must(['ip', 'netns', 'add', ns]);
    await must(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
  }
  for (const ip of [CLUSTER.dnsIp, ...Object.values(ORIGINS)]) await must(['ip', '-n', NS.cluster, 'addr', 'add', `${ip}/32`, 'dev', 'lo']);
  await must(['ip', 'netns', 'exec', NS.cluster, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  await link(NS.sandbox, `kps${PID}`.slice(0, 14), SANDBOX_IP, '10.244.1.1');
  await link(NS.supervisor, `kpv${PID}`.slice(0, 14), SUPERVISOR_IP, '10.244.2.1');
}

/** What the kubelet sets up for a pod before its first container: sysctls, resolv.conf, hosts. */
async function preparePod(ns: string, pod: PodSpec, ip: string): Promise<void> {
  for (const sysctl of pod.sysctls) await must(['ip', 'netns', 'exec', ns, 'sysctl', '-qw', `${sysctl.name}=${sysctl.value}`]);
  const etc = join('/etc/netns', ns);
  await mkdir(etc, { recursive: true });
  await writeFile(join(etc, 'resolv.conf'), podResolvConf(pod, CLUSTER));
  await writeFile(join(etc, 'hosts'), `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${ip}\t${pod.name}\n`);
}

function arg(c: Container, flag: string): string {
  const found = c.args.find((a) => a.startsWith(`${flag}=`));
  if (found === undefined) throw new Error(`${c.name} has no ${flag}=... argument`);
  return found.slice(flag.length + 1);
}

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
    for (const ns of Object.values(NS)) {
      await exec(['ip', 'netns', 'del', ns]);
      await rm(join('/etc/netns', ns), { recursive: true, force: true });
    }
    await unmount?.();
    await rm(dir, { recursive: true, force: true });
  });
  // On failure, what each process said: the first thing anyone debugging a red run needs.
  const children: LoggedChild[] = [];
  let passed = false;
  const launch = (...args: Parameters<typeof spawnLogged>): LoggedChild => {
    const child = spawnLogged(...args);
    children.push(child);
    return child;
  };
  t.after(() => {
    if (passed) return;
    for (const child of children) for (const line of [`--- ${child.label}`, ...child.text.slice(-40)]) t.diagnostic(line);
  });

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
  const serviceHost = `${service.metadata.name}.${service.metadata.namespace}.svc`;
  assert.equal(supervisorArg, `${serviceHost}:${service.spec.ports.find((p) => p.name === 'control')?.port}`);
  assert.deepEqual(
    service.spec.ports.map((p) => p.name).sort(),
    ['control', 'metrics'],
    'the Service exposes the control port and a metrics port only (the admin API stays in the pod)',
  );
  assert.match(arg(supervisorContainer, '--admin-listen'), /^127\.0\.0\.1:/, 'the supervisor admin listens on loopback');
  // NetworkPolicies (enforced by a CNI, not here): sandbox pods reach the supervisor on its control port only.
  const policies = manifests.documents.filter((d) => d.kind === 'NetworkPolicy') as { spec: NetworkPolicySpec }[];
  const ingressPorts = policies.flatMap((p) => (p.spec.podSelector.matchLabels?.app === supervisorPod.labels.app ? (p.spec.ingress ?? []) : []));
  assert.deepEqual(
    ingressPorts.filter((rule) => rule.from.some((peer) => peer.podSelector?.matchLabels?.app === sandboxPod.labels.app)).flatMap((rule) => rule.ports.map((port) => port.port)),
    [Number(supervisorArg.split(':')[1])],
  );
  const sandboxEgress = policies.flatMap((p) => (p.spec.podSelector.matchLabels?.app === sandboxPod.labels.app ? (p.spec.egress ?? []) : []));
  assert.deepEqual(
    sandboxEgress.filter((rule) => rule.to.some((peer) => peer.podSelector?.matchLabels?.app === supervisorPod.labels.app)).flatMap((rule) => rule.ports.map((port) => port.port)),
    [Number(supervisorArg.split(':')[1])],
  );
  const sandboxId = arg(sidecar, '--sandbox-id');
  const dockerfile = join(ROOT, 'Dockerfile');
  assert.match(await readFile(dockerfile, 'utf8'), /^ENTRYPOINT \["node", "dist\/main\.js"\]$/m, 'the image entrypoint the test runs');

  const [stage, node] = await Promise.all([stageBoundary(), imageNode(dockerfile)]);
  figures.node = node.version;
  const entrypoint = [node.path, stage.main];
  const cli = (...args: string[]) => must([...entrypoint, ...args]);

  // --- Certificates: `boundary pki` as the README says, stored under the keys cert-manager writes.
  const pkiDir = join(dir, 'pki');
  await cli('pki', 'init', '--dir', pkiDir);
  await cli('pki', 'issue', '--dir', pkiDir, '--sandbox', sandboxId, '--out', join(dir, 'sb'));
  await cli('pki', 'issue', '--dir', pkiDir, '--server', serviceHost, `${serviceHost}.${CLUSTER.domain}`, '--out', join(dir, 'sup'));
  const tlsSecret = async (from: string) => ({
    'ca.crt': await readFile(join(from, 'ca.pem'), 'utf8'),
    'tls.crt': await readFile(join(from, 'cert.pem'), 'utf8'),
    'tls.key': await readFile(join(from, 'key.pem'), 'utf8'),
  });
  // The origins' CA stands for the public roots a real origin chains to; boundary gets it as --upstream-ca.
  const originCa = await createCertificateAuthority({ commonName: 'pod test origins CA', now: Date.now });
  const [apiLeaf, gitLeaf] = await Promise.all(
    ['api.origin.test', 'git.origin.test'].map((name) => issueCertificate({ ca: originCa, kind: 'server', names: [name], now: Date.now })),
  );
  const files = {
    originCa: join(dir, 'origin-ca.pem'),
    apiCert: join(dir, 'api.pem'),
    apiKey: join(dir, 'api.key'),
    gitCert: join(dir, 'git.pem'),
    gitKey: join(dir, 'git.key'),
    origins: join(dir, 'origins.mjs'),
    gitRoot: join(dir, 'git-root'),
    agentHome: join(dir, 'agent-home'),
    muslSource: join(dir, 'gai.c'),
    muslClient: join(dir, 'gai-musl'),
  };
  await Promise.all([
    writeFile(files.originCa, originCa.certPem, { mode: 0o644 }),
    writeFile(files.apiCert, apiLeaf?.certPem ?? ''),
    writeFile(files.apiKey, apiLeaf?.keyPem ?? ''),
    writeFile(files.gitCert, gitLeaf?.certPem ?? ''),
    writeFile(files.gitKey, gitLeaf?.keyPem ?? ''),
    writeFile(files.origins, ORIGINS_SCRIPT),
    writeFile(files.muslSource, MUSL_CLIENT),
  ]);
  await must(['musl-gcc', '-static', '-O2', '-o', files.muslClient, files.muslSource]);
  await chmod(files.muslClient, 0o755);
  // A bare repository served over git's dumb HTTP protocol.
  const work = join(dir, 'git-work');
  await mkdir(work);
  await writeFile(join(work, 'README'), 'cloned through boundary\n');
  const git = (...args: string[]) => must(['git', '-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args]);
  await git('-C', work, 'init', '-q');
  await git('-C', work, 'add', 'README');
  await git('-C', work, 'commit', '-qm', 'one');
  await git('clone', '-q', '--bare', work, join(files.gitRoot, 'repo.git'));
  await git('-C', join(files.gitRoot, 'repo.git'), 'update-server-info');
  await mkdir(files.agentHome);
  await chown(files.agentHome, agent.security.runAsUser, agent.security.runAsGroup ?? agent.security.runAsUser);

  // --- The cluster: namespaces, DNS, origins.
  await buildTopology();
  const dns = launch(
    [
      'ip', 'netns', 'exec', NS.cluster, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--no-resolv', '--no-hosts', '--no-poll',
      '--bind-interfaces', `--listen-address=${CLUSTER.dnsIp}`, '--port=53', `--pid-file=${join(dir, 'dnsmasq.pid')}`, '--log-queries', '--log-facility=-',
      `--local=/${CLUSTER.domain}/`, '--local=/origin.test/',
      `--host-record=${serviceHost}.${CLUSTER.domain},${SUPERVISOR_IP}`,
      ...Object.entries(ORIGINS).map(([name, ip]) => `--host-record=${name}.origin.test,${ip}`),
    ],
    { label: 'dnsmasq' },
  );
  t.after(() => dns.stop());
  await dns.waitForText((line) => /started, version/.test(line));
  const origins = launch(
    ['ip', 'netns', 'exec', NS.cluster, process.execPath, files.origins, files.apiCert, files.apiKey, files.gitCert, files.gitKey, files.gitRoot, ORIGINS.api, ORIGINS.files, ORIGINS.git, ORIGINS.denied],
    { label: 'origins' },
  );
  t.after(() => origins.stop());
  await origins.waitForText((line) => line === 'READY');

  // --- Volumes as the kubelet projects them, mounted at the manifests' paths inside each container.
  const policy = `version: 1
network_policies:
  api:
    endpoints:
      - host: api.origin.test
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/v1/**" }
    binaries: [{ path: "/**" }]
  files:
    endpoints: [{ host: files.origin.test, port: 80 }]
    binaries: [{ path: "/**" }]
  git:
    endpoints: [{ host: git.origin.test, port: 443 }]
    binaries: [{ path: "/**" }]
`;
  const sources: VolumeSources = {
    'boundary-supervisor-tls': await tlsSecret(join(dir, 'sup')),
    [`boundary-${sandboxId}-tls`]: await tlsSecret(join(dir, 'sb')),
    'boundary-admin-token': { token: `${'a1b2c3d4'.repeat(8)}\n` },
    'boundary-policies': { [`${sandboxId}.yaml`]: policy },
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
    launch(containerArgv({ netns, pod, container: c, volumes: podVolumes, command: [...entrypoint, ...c.args, ...extraArgs] }), {
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
  let sidecarStarted = 0;
  for (const c of sandboxPod.initContainers) {
    if (c.restartPolicy !== 'Always') {
      const init = startContainer(NS.sandbox, sandboxPod, c, volumes.sandbox);
      assert.equal(await init.exited(), 0, `init container ${c.name} failed:\n${init.text.join('\n')}`);
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

  // --- The agent: real clients with the agent container's env, uid and mounts.
  const agentRun = (...command: string[]) =>
    exec(containerArgv({ netns: NS.sandbox, pod: sandboxPod, container: agent, volumes: volumes.sandbox, command }), containerEnv(sandboxPod, agent, { HOME: files.agentHome }), files.agentHome);
  const curl = async (...args: string[]) => {
    const r = await agentRun('curl', '-sS', '--max-time', String(CLIENT_TIMEOUT_S), '-w', '\n%{http_code}', ...args);
    const cut = r.stdout.lastIndexOf('\n');
    return { ...r, body: r.stdout.slice(0, cut), status: r.stdout.slice(cut + 1) };
  };
  async function allowedWorks(tag: string): Promise<void> {
    const viaProxy = await curl(`https://api.origin.test/v1/${tag}`);
    assert.deepEqual([viaProxy.body, viaProxy.status], [`api saw GET /v1/${tag}`, '200'], `curl through the proxy: ${viaProxy.stderr}`);
    const denied = await curl('http://denied.origin.test/');
    assert.equal(denied.status, '403', `a denied name through the proxy: ${denied.body} ${denied.stderr}`);
    assert.ok(denied.ms < FAST_FAILURE_MS, `the 403 took ${denied.ms} ms`);
  }

  await allowedWorks('curl');
  const transparent = await curl('--noproxy', '*', 'https://api.origin.test/v1/transparent');
  assert.deepEqual([transparent.body, transparent.status], ['api saw GET /v1/transparent', '200'], `curl without proxy variables: ${transparent.stderr}`);
  const plain = await curl('http://files.origin.test/f/proxy');
  assert.deepEqual([plain.body, plain.status], ['files saw /f/proxy', '200'], plain.stderr);
  const plainDirect = await curl('--noproxy', '*', 'http://files.origin.test/f/transparent');
  assert.deepEqual([plainDirect.body, plainDirect.status], ['files saw /f/transparent', '200'], plainDirect.stderr);
  const post = await curl('-X', 'POST', 'https://api.origin.test/v1/write');
  assert.equal(post.status, '403', `an L7 rule denies POST: ${post.body}`);
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
  assert.match(digDenied.stdout, /status: REFUSED/, digDenied.stdout);
  assert.equal(dns.text.filter((line) => line.includes('denied.origin.test')).length, 0, 'a denied name is never asked upstream');
  assert.ok(dns.text.some((line) => line.includes(`query[A] api.origin.test from ${SANDBOX_IP}`)), 'boundary resolved allowed names through the cluster DNS');
  assert.ok(dns.text.some((line) => line.includes(`query[A] ${serviceHost}.${CLUSTER.domain} from ${SANDBOX_IP}`)), 'boundary found its supervisor through the cluster DNS');

  // --- An instance the supervisor expects, kept on the state volume (--state-dir) through every kill below.
  const adminUrl = `http://${arg(supervisorContainer, '--admin-listen')}/v1/sandboxes`;
  const adminCall = async (method: string, path = ''): Promise<Record<string, unknown>> => {
    const token = (sources['boundary-admin-token']?.token ?? '').trim();
    const out = await must(['ip', 'netns', 'exec', NS.supervisor, 'curl', '-sS', '--fail-with-body', '-X', method, '-H', `authorization: Bearer ${token}`, `${adminUrl}${path}`]);
    return JSON.parse(out) as Record<string, unknown>;
  };
  const expectedInstance = async (): Promise<Record<string, unknown> | undefined> => {
    const store = (await adminCall('GET')).store as { kind: string; instances: Record<string, unknown>[] };
    assert.equal(store.kind, 'file', 'the shipped supervisor keeps its state in --state-dir');
    return store.instances.find((i) => i.instanceId === 'expected-by-operator');
  };
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
    await delay(Math.max(0, KILL_INTERVAL_MS - (performance.now() - killedAt - (reattachMs.at(-1) ?? 0))));
  }
  await allowedWorks('after-kills');
  assert.deepEqual(await expectedInstance(), expectedBefore, 'the expected instance and its deadline survived 10 kills');
  figures.reattachMs = reattachMs;
  figures.readyzDuringOutage = [...new Set(outage)];
  figures.totalMs = Math.round(performance.now() - started);
  t.diagnostic(`pod figures: ${JSON.stringify(figures)}`);
  assert.equal(live.child.exitCode, null, 'boundary ran through every supervisor kill');
  passed = true;
});
