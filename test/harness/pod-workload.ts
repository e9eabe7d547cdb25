// The workload side of test/e2e/pod.test.ts: what the origins serve and the agent runs. writeOriginFiles()
// makes the origins' CA and leaves, the origins' script, the bare git repository served over git's dumb HTTP
// protocol, the static musl getaddrinfo client, a `gh`-style client and the agent's home; sandboxPolicy() is the
// sandbox's policy ConfigMap and tlsSecret() a cert-manager Secret from a `boundary pki` output directory. agentClients()
// runs real clients (curl, python3 urllib, git, node, musl) in the agent container as the kubelet would, and
// supervisorAdmin() calls the supervisor's loopback admin API inside its pod.

import assert from 'node:assert/strict';
import { realpathSync } from 'node:fs';
import { chmod, chown, copyFile, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { createCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import type { Container, PodSpec } from './k8s-manifest.js';
import { containerArgv, containerEnv } from './k8s-pod.js';
import { exec, must, NS, type OriginFiles, type Result, writeOriginsScript } from './pod-cluster.js';

const CLIENT_TIMEOUT_S = 15;

export const NODE_CLIENT = `
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
export const PYTHON_CLIENT = 'import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1], timeout=15).read().decode())';

/**
 * The sandbox's policy ConfigMap. `gh` reaches gh.origin.test (its path as installed, a symlink: the identity
 * sidecar resolves it), git reaches git.origin.test through its helper processes (the git ancestor), and any
 * process the api and files origins.
 */
export function sandboxPolicy(ghPath: string): string {
  return `version: 1
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
    binaries: [{ path: /usr/bin/git }]
  github:
    endpoints: [{ host: gh.origin.test, port: 443 }]
    binaries: [{ path: ${ghPath} }]
`;
}

/** A `boundary pki issue --out` directory as the Secret cert-manager writes (ca.crt, tls.crt, tls.key). */
export const tlsSecret = async (from: string) => ({
  'ca.crt': await readFile(join(from, 'ca.pem'), 'utf8'),
  'tls.crt': await readFile(join(from, 'cert.pem'), 'utf8'),
  'tls.key': await readFile(join(from, 'key.pem'), 'utf8'),
});

export interface WorkloadFiles extends OriginFiles {
  readonly originCa: string;
  readonly agentHome: string;
  readonly muslSource: string;
  readonly muslClient: string;
  /** The `gh`-style client as installed (a symlink), and the executable it names (what the kernel reports). */
  readonly gh: string;
  readonly ghReal: string;
}

/** Everything under `dir` the origins and the agent need; the agent's home is owned by `owner`. */
export async function writeOriginFiles(dir: string, owner: { uid: number; gid: number }): Promise<WorkloadFiles> {
  // The origins' CA stands for the public roots a real origin chains to; boundary gets it as --upstream-ca.
  const originCa = await createCertificateAuthority({ commonName: 'pod test origins CA', now: Date.now });
  const [apiLeaf, gitLeaf] = await Promise.all(
    [['api.origin.test', 'gh.origin.test'], ['git.origin.test']].map((names) => issueCertificate({ ca: originCa, kind: 'server', names, now: Date.now })),
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
    ghReal: join(dir, 'opt', 'gh', 'bin', 'gh'),
    gh: join(dir, 'usr', 'local', 'bin', 'gh'),
  };
  await Promise.all([
    writeFile(files.originCa, originCa.certPem, { mode: 0o644 }),
    writeFile(files.apiCert, apiLeaf?.certPem ?? ''),
    writeFile(files.apiKey, apiLeaf?.keyPem ?? ''),
    writeFile(files.gitCert, gitLeaf?.certPem ?? ''),
    writeFile(files.gitKey, gitLeaf?.keyPem ?? ''),
    writeOriginsScript(files.origins),
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
  await chown(files.agentHome, owner.uid, owner.gid);
  // A `gh`-style client: a real executable (a copy of curl) installed under opt/, linked from a bin directory.
  await mkdir(dirname(files.ghReal), { recursive: true, mode: 0o755 });
  await mkdir(dirname(files.gh), { recursive: true, mode: 0o755 });
  await copyFile(realpathSync('/usr/bin/curl'), files.ghReal);
  await chmod(files.ghReal, 0o755);
  await symlink(relative(dirname(files.gh), files.ghReal), files.gh);
  return files;
}

export interface CurlResult extends Result {
  readonly body: string;
  readonly status: string;
}

export interface AgentClients {
  /** A command in the agent container: its netns, mounts, uid and env, with HOME and cwd its home. */
  run(...command: string[]): Promise<Result>;
  /** curl with the client timeout, the body and the HTTP status split apart. */
  curl(...args: string[]): Promise<CurlResult>;
  /** The allowed origin answers through the proxy; a denied name gets a 403 at once. */
  allowedWorks(tag: string): Promise<void>;
}

export function agentClients(options: { pod: PodSpec; agent: Container; volumes: ReadonlyMap<string, string>; home: string }): AgentClients {
  const { pod, agent, volumes, home } = options;
  const run = (...command: string[]) =>
    exec(containerArgv({ netns: NS.sandbox, pod, container: agent, volumes, command }), containerEnv(pod, agent, { HOME: home }), home);
  const curl = async (...args: string[]) => {
    const r = await run('curl', '-sS', '--max-time', String(CLIENT_TIMEOUT_S), '-w', '\n%{http_code}', ...args);
    const cut = r.stdout.lastIndexOf('\n');
    return { ...r, body: r.stdout.slice(0, cut), status: r.stdout.slice(cut + 1) };
  };
  async function allowedWorks(tag: string): Promise<void> {
    const viaProxy = await curl(`https://api.origin.test/v1/${tag}`);
    assert.deepEqual([viaProxy.body, viaProxy.status], [`api saw GET /v1/${tag}`, '200'], `curl through the proxy: ${viaProxy.stderr}`);
    const denied = await curl('http://denied.origin.test/');
    // The 403 itself is the answer; a timeout would leave no status. How long it took is not asserted.
    assert.equal(denied.status, '403', `a denied name through the proxy: ${denied.body} ${denied.stderr}`);
  }
  return { run, curl, allowedWorks };
}

export interface SupervisorAdmin {
  call(method: string, path?: string): Promise<Record<string, unknown>>;
  /** The instance 'expected-by-operator' in the supervisor's store (which must be the --state-dir file store). */
  expectedInstance(): Promise<Record<string, unknown> | undefined>;
}

/** The supervisor's admin API at `adminUrl` (…/v1/sandboxes), called from inside the supervisor pod. */
export function supervisorAdmin(adminUrl: string, token: string): SupervisorAdmin {
  const call = async (method: string, path = ''): Promise<Record<string, unknown>> => {
    const out = await must(['ip', 'netns', 'exec', NS.supervisor, 'curl', '-sS', '--fail-with-body', '-X', method, '-H', `authorization: Bearer ${token}`, `${adminUrl}${path}`]);
    return JSON.parse(out) as Record<string, unknown>;
  };
  const expectedInstance = async (): Promise<Record<string, unknown> | undefined> => {
    const store = (await call('GET')).store as { kind: string; instances: Record<string, unknown>[] };
    assert.equal(store.kind, 'file', 'the shipped supervisor keeps its state in --state-dir');
    return store.instances.find((i) => i.instanceId === 'expected-by-operator');
  };
  return { call, expectedInstance };
}
