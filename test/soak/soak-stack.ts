// The soak's world: loopback origins (plain HTTP, TLS, WebSocket, TCP echo), a DNS upstream fixture, a policy file
// and a credentials file the soak rewrites, and one real `boundary run` child over them. Loopback only; close()
// undoes everything, and is safe to call on a half-built stack.

import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTestPki } from '../harness/certs.js';
import { startDnsFixture } from '../harness/dns-upstream.js';
import { echo, tcpOrigin } from '../harness/liveness.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';
import { wsOrigin } from '../harness/ws.js';
import { dnsAddressOf, isDnsReady } from '../harness/cli-boundary.js';
import { type SoakChild, spawnSoakBoundary } from './soak-child.js';

/** Start-up of the tsx child (compiling src/ on the fly) on a busy 2-core host. */
export const START_TIMEOUT_MS = 30_000;
/**
 * --max-connections: far above what the soak holds at once (idle sockets, slowloris, tunnels, WebSockets and the
 * steady clients, about 200), so the slots held by hostile sockets never refuse an allowed request with 503. Every
 * soak client is 127.0.0.1, one source: its share of the limit (half, src/proxy/admission.ts) must hold them all.
 */
export const SOAK_MAX_CONNECTIONS = 1_024;
/** Synthetic answers of policy DNS: a loopback window of its own, apart from the harness' 127.77 and dns-e2e's 127.78. */
const SOAK_SYNTHETIC_CIDR = '127.79.0.0/16';

export const SOAK_HOSTS = {
  plain: 'plain.soak.test',
  tls: 'tls.soak.test',
  rewrite: 'rewrite.soak.test',
  ws: 'ws.soak.test',
  tunnel: 'tunnel.soak.test',
  denied: 'denied.soak.test',
} as const;

export interface SoakPorts {
  readonly plain: number;
  readonly secure: number;
  readonly ws: number;
  readonly echo: number;
}

export interface SoakStack {
  readonly boundary: SoakChild;
  readonly proxyPort: number;
  readonly dnsPort: number;
  readonly ports: SoakPorts;
  readonly caFile: string;
  readonly caPem: string;
  readonly dir: string;
  readonly plain: Origin;
  /** The TLS origin behind the intercepted tunnel: its record of what arrived is what the steady checks read. */
  readonly secure: Origin;
  /** Rewrites the policy file (atomically) as rewrite `n`: the soak's rules plus one unused endpoint of its own. */
  writePolicy(n: number): Promise<void>;
  /** Rewrites the credentials file (atomically) with API_TOKEN = tokenOf(n). */
  writeCredentials(n: number): Promise<void>;
  close(): Promise<void>;
}

export const tokenOf = (n: number): string => `tok-soak-${n}`;

function policyYaml(ports: SoakPorts, n: number): string {
  const rest = (host: string, port: number, more = ''): string =>
    `      - host: ${host}\n        port: ${port}\n        protocol: rest\n        enforcement: enforce\n        access: full\n${more}`;
  return `version: 1
network_policies:
  soak:
    endpoints:
${rest(SOAK_HOSTS.plain, ports.plain)}${rest(SOAK_HOSTS.tls, ports.secure)}${rest(SOAK_HOSTS.rewrite, ports.plain, '        request_body_credential_rewrite: true\n')}      - host: ${SOAK_HOSTS.ws}
        port: ${ports.ws}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/socket" }
          - allow: { method: GET, path: "/no-text" }
          - allow: { method: WEBSOCKET_TEXT, path: "/socket" }
      - { host: ${SOAK_HOSTS.tunnel}, port: ${ports.echo} }
      # Rewrite n's own endpoint: the hash ignores comments and formatting, so each rewrite changes a rule.
      - { host: gen-${n}.soak.test, port: 9 }
    binaries: [{ path: "/**" }]
`;
}

function credentialsYaml(ports: SoakPorts, n: number): string {
  return `providers:
  soak:
    env:
      API_TOKEN: "${tokenOf(n)}"
    endpoints:
      - { host: ${SOAK_HOSTS.plain}, port: ${ports.plain} }
      - { host: ${SOAK_HOSTS.tls}, port: ${ports.secure} }
      - { host: ${SOAK_HOSTS.rewrite}, port: ${ports.plain} }
`;
}

/** Replaces `path` by rename, as an editor or a ConfigMap/secret mount does: the watcher never sees half a file. */
async function replaceFile(path: string, text: string): Promise<void> {
  const tmp = `${path}.next`;
  await writeFile(tmp, text);
  await rename(tmp, path);
}

export async function startSoakStack(): Promise<SoakStack> {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  };
  try {
    const dir = await mkdtemp(join(tmpdir(), 'boundary-soak-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const pki = await makeTestPki();
    const plain = await httpOrigin();
    cleanups.push(() => plain.close());
    const secure = await tlsOrigin({ ca: pki.ca, names: [SOAK_HOSTS.tls] });
    cleanups.push(() => secure.close());
    const ws = await wsOrigin();
    cleanups.push(() => ws.close());
    const tcp = await tcpOrigin(echo);
    cleanups.push(() => tcp.close());
    const loopback = { a: ['127.0.0.1'], ttl: 300 };
    const upstream = await startDnsFixture(Object.fromEntries(Object.values(SOAK_HOSTS).map((host) => [host, loopback])));
    cleanups.push(() => upstream.close());
    const ports: SoakPorts = { plain: plain.port, secure: secure.port, ws: ws.port, echo: tcp.port };
    const policyFile = join(dir, 'policy.yaml');
    const credentialsFile = join(dir, 'credentials.yaml');
    const upstreamCa = join(dir, 'upstream-ca.pem');
    await Promise.all([writeFile(policyFile, policyYaml(ports, 0)), writeFile(credentialsFile, credentialsYaml(ports, 0)), writeFile(upstreamCa, pki.ca.certPem)]);
    const caFile = join(dir, 'state', 'ca.pem');
    // prettier-ignore
    const boundary = spawnSoakBoundary([
      '--policy', policyFile,
      '--credentials', credentialsFile,
      '--proxy-listen', '127.0.0.1:0',
      '--admin-listen', '127.0.0.1:0',
      '--dns-listen', '127.0.0.1:0',
      '--upstream-dns', `${upstream.host}:${upstream.port}`,
      '--upstream-ca', upstreamCa,
      '--synthetic-cidr', SOAK_SYNTHETIC_CIDR,
      '--unsafe-allow-loopback-upstream',
      '--state-dir', join(dir, 'state'),
      '--max-connections', String(SOAK_MAX_CONNECTIONS),
    ]);
    cleanups.push(async () => {
      boundary.kill();
      await boundary.exited();
    });
    const listening = boundary.next((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '), START_TIMEOUT_MS, 'proxy listening');
    const dnsReady = boundary.next(isDnsReady, START_TIMEOUT_MS, 'policy DNS listening');
    const proxyPort = Number(/:(\d+)$/.exec((await listening).ocsf?.message ?? '')?.[1]);
    const dnsPort = dnsAddressOf(await dnsReady).port;
    const caPem = await readFile(caFile, 'utf8');
    return {
      boundary,
      proxyPort,
      dnsPort,
      ports,
      caFile,
      caPem,
      dir,
      plain,
      secure,
      writePolicy: (n) => replaceFile(policyFile, policyYaml(ports, n)),
      writeCredentials: (n) => replaceFile(credentialsFile, credentialsYaml(ports, n)),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
