// The cluster side of test/e2e/pod.test.ts (root only): the network namespaces it creates ("cluster",
// "sandbox" pod, "supervisor" pod) and their veth links, the addresses inside them, what the kubelet sets up
// for a pod before its first container (sysctls, resolv.conf, hosts), the kubelet's httpGet probes, the
// cluster DNS (real dnsmasq) and the origins it names, the NetworkPolicy checks on the manifests, and the
// small process helpers the scenario shares: exec() and must(), and childLog(), which prints what each
// launched process said when the test fails. removeNamespaces() undoes everything buildTopology() and
// preparePod() create.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';
import { type LoggedChild, spawnLogged } from './child-lines.js';
import type { Container, Manifests, PodSpec } from './k8s-manifest.js';
import { podResolvConf } from './k8s-pod.js';

const run = promisify(execFile);
const PID = process.pid;
export const NS = { cluster: `k8c-${PID}`, sandbox: `k8s-${PID}`, supervisor: `k8v-${PID}` } as const;
export const CLUSTER = { dnsIp: '10.96.0.10', domain: 'cluster.local' } as const;
// Addresses exist only inside this test's namespaces (the network rule): pods on 10.244.x, "internet"
// origins on 10.96.1.x behind the cluster namespace (the api origin speaks HTTP/2 and HTTP/1.1).
export const SANDBOX_IP = '10.244.1.2';
export const SUPERVISOR_IP = '10.244.2.2';
export const ORIGINS = { api: '10.96.1.10', files: '10.96.1.11', git: '10.96.1.12', denied: '10.96.1.13' } as const;
const CLEAN_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin';

const ORIGINS_SCRIPT = `
import { createServer as http } from 'node:http';
import { createSecureServer as h2 } from 'node:http2';
import { createServer as https } from 'node:https';
import { readFileSync } from 'node:fs';
import { join, normalize } from 'node:path';
const [apiCert, apiKey, gitCert, gitKey, gitRoot, api, files, git, denied] = process.argv.slice(2);
const listen = (server, ip, port) => new Promise((resolve) => server.listen(port, ip, resolve));
const tls = (cert, key) => ({ cert: readFileSync(cert), key: readFileSync(key) });
// HTTP/2 and HTTP/1.1 by ALPN, as most public APIs: streams from an HTTP/2 client go upstream in HTTP/2 through
// boundary's own client. A path under /v1/h2 says which version arrived.
await listen(h2({ ...tls(apiCert, apiKey), allowHTTP1: true }, (req, res) =>
  res.end('api saw ' + req.method + ' ' + req.url + (req.url.startsWith('/v1/h2') ? ' over HTTP/' + req.httpVersion : ''))), api, 443);
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

type Peer = { podSelector?: { matchLabels?: Record<string, string> } };
interface NetworkPolicySpec {
  readonly podSelector: { matchLabels?: Record<string, string> };
  readonly ingress?: { from: Peer[]; ports: { port: number }[] }[];
  readonly egress?: { to: Peer[]; ports: { port: number }[] }[];
}

export interface Result {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

export async function exec(argv: readonly string[], env: NodeJS.ProcessEnv = { PATH: CLEAN_PATH }, cwd?: string): Promise<Result> {
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

export async function must(argv: readonly string[]): Promise<string> {
  const result = await exec(argv);
  if (result.code !== 0) throw new Error(`${argv.join(' ')} failed (${result.code}): ${result.stderr}`);
  return result.stdout;
}

export async function skipReason(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root (creates network namespaces, iptables rules and bind mounts)';
  for (const tool of ['ip', 'iptables', 'ip6tables', 'setpriv', 'dnsmasq', 'curl', 'dig', 'git', 'mount', 'musl-gcc']) {
    if ((await exec(['sh', '-c', `command -v ${tool}`])).code !== 0) return `${tool} is not installed`;
  }
  if ((await exec(['test', '-x', '/usr/bin/python3'])).code !== 0) return '/usr/bin/python3 is not installed';
  if ((await exec(['ip', 'netns', 'list'])).code !== 0) return 'ip netns is unavailable';
  return undefined;
}

/** Every namespace and its /etc/netns directory; safe to call whatever was created. */
export async function removeNamespaces(): Promise<void> {
  for (const ns of Object.values(NS)) {
    await exec(['ip', 'netns', 'del', ns]);
    await rm(join('/etc/netns', ns), { recursive: true, force: true });
  }
}

export interface ChildLog {
  /** spawnLogged(), remembering the child for the failure diagnostics. */
  launch(...args: Parameters<typeof spawnLogged>): LoggedChild;
  /** Stops every child launched, the last one first. */
  stopAll(): Promise<void>;
  /** The test passed: no diagnostics. */
  pass(): void;
}

/** On failure, what each process said: the first thing anyone debugging a red run needs. */
export function childLog(t: TestContext): ChildLog {
  const children: LoggedChild[] = [];
  let passed = false;
  t.after(() => {
    if (passed) return;
    for (const child of children) for (const line of [`--- ${child.label}`, ...child.text.slice(-40)]) t.diagnostic(line);
  });
  return {
    launch(...args) {
      const child = spawnLogged(...args);
      children.push(child);
      return child;
    },
    async stopAll() {
      for (const child of [...children].reverse()) await child.stop();
    },
    pass() {
      passed = true;
    },
  };
}

/** A kubelet httpGet probe from outside the pod (the cluster namespace) to the pod's IP. */
export async function probe(podIp: string, path: string, port: number): Promise<{ status: number; body: string }> {
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

export async function buildTopology(): Promise<void> {
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
export async function preparePod(ns: string, pod: PodSpec, ip: string): Promise<void> {
  for (const sysctl of pod.sysctls) await must(['ip', 'netns', 'exec', ns, 'sysctl', '-qw', `${sysctl.name}=${sysctl.value}`]);
  const etc = join('/etc/netns', ns);
  await mkdir(etc, { recursive: true });
  await writeFile(join(etc, 'resolv.conf'), podResolvConf(pod, CLUSTER));
  await writeFile(join(etc, 'hosts'), `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${ip}\t${pod.name}\n`);
}

export function arg(c: Container, flag: string): string {
  const found = c.args.find((a) => a.startsWith(`${flag}=`));
  if (found === undefined) throw new Error(`${c.name} has no ${flag}=... argument`);
  return found.slice(flag.length + 1);
}

/** NetworkPolicies (enforced by a CNI, not here): sandbox pods reach the supervisor on its control port only. */
export function assertControlPortOnly(manifests: Manifests, sandboxPod: PodSpec, supervisorPod: PodSpec, supervisorArg: string): void {
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
}

/** The cluster DNS: dnsmasq serving the supervisor's Service name and the origins' names; stopped after the test. */
export async function startClusterDns(t: TestContext, log: ChildLog, dir: string, serviceHost: string): Promise<LoggedChild> {
  const dns = log.launch(
    [
      'ip', 'netns', 'exec', NS.cluster, 'dnsmasq', '--keep-in-foreground', '--conf-file=/dev/null', '--no-resolv', '--no-hosts', '--no-poll',
      '--bind-interfaces', `--listen-address=${CLUSTER.dnsIp}`, '--port=53', `--pid-file=${join(dir, 'dnsmasq.pid')}`, '--log-queries', '--log-facility=-',
      `--local=/${CLUSTER.domain}/`, '--local=/origin.test/',
      `--host-record=${serviceHost}.${CLUSTER.domain},${SUPERVISOR_IP}`,
      ...Object.entries(ORIGINS).map(([name, ip]) => `--host-record=${name}.origin.test,${ip}`),
      // The `gh`-style client's API: served by the api origin, under a name of its own in the policy.
      `--host-record=gh.origin.test,${ORIGINS.api}`,
    ],
    { label: 'dnsmasq' },
  );
  t.after(() => dns.stop());
  await dns.waitForText((line) => /started, version/.test(line));
  return dns;
}

export interface OriginFiles {
  readonly apiCert: string;
  readonly apiKey: string;
  readonly gitCert: string;
  readonly gitKey: string;
  readonly gitRoot: string;
  /** Where writeOriginsScript() puts the origins' server script. */
  readonly origins: string;
}

export function writeOriginsScript(path: string): Promise<void> {
  return writeFile(path, ORIGINS_SCRIPT);
}

/** The origins (HTTPS with L7 rules, plain HTTP, HTTPS git, one the policy denies) in the cluster namespace. */
export async function startOrigins(t: TestContext, log: ChildLog, files: OriginFiles): Promise<LoggedChild> {
  const origins = log.launch(
    ['ip', 'netns', 'exec', NS.cluster, process.execPath, files.origins, files.apiCert, files.apiKey, files.gitCert, files.gitKey, files.gitRoot, ORIGINS.api, ORIGINS.files, ORIGINS.git, ORIGINS.denied],
    { label: 'origins' },
  );
  t.after(() => origins.stop());
  await origins.waitForText((line) => line === 'READY');
  return origins;
}
