// Binary identity in the pod end-to-end test (test/e2e/pod.test.ts), with the manifest's boundary-identity sidecar
// running as written (uid 0, SYS_PTRACE and DAC_READ_SEARCH only, the socket on its emptyDir): a `gh`-style client
// (a copy of curl, installed behind a symlink) and curl against the same endpoints, git reaching its server
// through its ancestor, the decision events naming each process; the agent locked out of the identity socket; and
// the same server without its capabilities, which cannot see the agent's processes (why boundary has none to use).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { LoggedChild } from './child-lines.js';
import { createSocketIdentitySource } from '../../src/identity/socket-source.js';
import { TEST_IDENTITY_LOOKUP_TIMEOUT_MS } from './identity-processes.js';
import type { Container, PodSpec } from './k8s-manifest.js';
import { containerArgv, containerEnv } from './k8s-pod.js';
import { type ChildLog, NS, type Result } from './pod-cluster.js';
import type { CurlResult, WorkloadFiles } from './pod-workload.js';

const CURL = '/usr/bin/curl';
const GIT = '/usr/bin/git';
const SOCKET_FILE = 'identity.sock';
const EVENT_WAIT_MS = 10_000;
// Holds a loopback connection of its own (no proxy timeouts apply) and prints both ports.
const HOLDER = `import socket, sys
srv = socket.create_server(('127.0.0.1', 0))
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
print(c.getsockname()[1], srv.getsockname()[1], flush=True)
sys.stdin.read()
`;

export interface IdentityScenario {
  readonly pod: PodSpec;
  readonly identity: Container;
  readonly sidecar: Container;
  readonly agent: Container;
  readonly volumes: ReadonlyMap<string, string>;
  readonly files: WorkloadFiles;
  readonly boundary: LoggedChild;
  readonly run: (...command: string[]) => Promise<Result>;
  readonly curl: (...args: string[]) => Promise<CurlResult>;
  /** The image's entrypoint (`node dist/app/main.js`) and the staged build it runs from. */
  readonly entrypoint: readonly string[];
  readonly cwd: string;
  readonly log: ChildLog;
}

function socketArg(c: Container): string {
  const at = c.args.indexOf('--socket');
  const path = c.args[at + 1];
  assert.ok(at >= 0 && path !== undefined, `${c.name} serves on --socket PATH`);
  return path;
}

/** The decision event boundary logged for `host` from `binary`. */
function decisionFrom(boundary: LoggedChild, host: string, binary: string) {
  return boundary.waitFor((line) => {
    const u = line.ocsf?.unmapped;
    return u?.binary === binary && JSON.stringify(line.ocsf).includes(host) && typeof u.reason_code === 'string';
  }, EVENT_WAIT_MS);
}

export async function checkBinaryIdentity(s: IdentityScenario): Promise<Record<string, unknown>> {
  const socketPath = socketArg(s.identity);
  assert.equal(s.sidecar.args.find((a) => a.startsWith('--identity-socket=')), `--identity-socket=${socketPath}`, 'boundary asks the identity sidecar');
  const mount = s.identity.volumeMounts.find((m) => socketPath.startsWith(`${m.mountPath}/`));
  assert.ok(mount !== undefined, 'the socket is on a volume');
  assert.ok(!s.agent.volumeMounts.some((m) => m.name === mount.name), 'the agent does not mount the identity socket');
  assert.deepEqual([...s.identity.security.addCaps].sort(), ['DAC_READ_SEARCH', 'SYS_PTRACE']);
  const hostSocket = join(s.volumes.get(mount.name) ?? '', SOCKET_FILE);

  // gh as installed (a symlink) reaches gh.origin.test; the kernel names the file behind it.
  const gh = await s.run(s.files.gh, '-sS', '--max-time', '15', '-w', '\n%{http_code}', 'https://gh.origin.test/v1/gh');
  assert.equal(gh.stdout, 'api saw GET /v1/gh\n200', `gh through the proxy: ${gh.stderr}`);
  const ghEvent = await decisionFrom(s.boundary, 'gh.origin.test', s.files.ghReal);
  assert.deepEqual([ghEvent.ocsf?.unmapped?.identity, ghEvent.ocsf?.unmapped?.reason_code], ['process', 'endpoint-allowed']);
  // curl, same endpoint: refused at the CONNECT, and the event names curl.
  const curl = await s.curl('https://gh.origin.test/v1/curl');
  assert.notEqual(curl.status, '200', `curl may not reach gh's endpoint: ${curl.body} ${curl.stderr}`);
  assert.equal((await decisionFrom(s.boundary, 'gh.origin.test', CURL)).ocsf?.unmapped?.reason_code, 'binary-not-allowed');
  // git's HTTPS helper is granted by its parent, git (the clone above); curl is not.
  const gitEvent = await s.boundary.waitFor((l) => l.ocsf?.unmapped?.binary_ancestor === GIT && JSON.stringify(l.ocsf).includes('git.origin.test'), EVENT_WAIT_MS);
  assert.equal(gitEvent.ocsf?.unmapped?.reason_code, 'endpoint-allowed');
  const curlGit = await s.curl('https://git.origin.test/repo.git/info/refs');
  assert.notEqual(curlGit.status, '200', 'curl may not reach git\'s endpoint');
  assert.equal((await decisionFrom(s.boundary, 'git.origin.test', CURL)).ocsf?.unmapped?.reason_code, 'binary-not-allowed');

  // The socket is mode 0660 for root and boundary's group: the agent's uid cannot connect even given the path.
  const probe = await s.run('/usr/bin/python3', '-c', 'import socket, sys\ntry:\n socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print("connected")\nexcept OSError as e: print(type(e).__name__)', hostSocket);
  assert.equal(probe.stdout.trim(), 'PermissionError', `the agent and the identity socket: ${probe.stderr}`);

  // The same server without its capabilities (uid 10001, like boundary): the agent's processes are out of reach.
  const unprivileged: Container = {
    ...s.identity,
    args: ['identity', 'serve', '--socket', join(mount.mountPath, 'unprivileged.sock')],
    security: { ...s.identity.security, runAsUser: 10001, runAsGroup: 10001, runAsNonRoot: true, addCaps: [] },
  };
  const plain = s.log.launch(containerArgv({ netns: NS.sandbox, pod: s.pod, container: unprivileged, volumes: s.volumes, command: [...s.entrypoint, ...unprivileged.args] }), {
    cwd: s.cwd,
    env: containerEnv(s.pod, unprivileged),
    label: 'sandbox/identity-without-capabilities',
  });
  const [command, args] = agentCommand(s, ['/usr/bin/python3', '-c', HOLDER]);
  const holder = spawn(command, args, { env: containerEnv(s.pod, s.agent), stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    await plain.waitFor((line) => line.msg === 'identity server listening');
    const [client, server] = await new Promise<number[]>((resolve) => holder.stdout?.once('data', (d: Buffer) => resolve(d.toString().trim().split(' ').map(Number))));
    const request = { client: { ip: '127.0.0.1', port: client as number }, proxy: { ip: '127.0.0.1', port: server as number }, paths: [] };
    const ask = async (path: string) => {
      const source = createSocketIdentitySource({ socketPath: path, timeoutMs: TEST_IDENTITY_LOOKUP_TIMEOUT_MS });
      await source.start();
      const result = await source.lookup(request);
      await source.close();
      return result;
    };
    const privileged = await ask(hostSocket);
    assert.ok(privileged.ok && privileged.identity.pid === holder.pid, JSON.stringify(privileged));
    const denied = await ask(join(s.volumes.get(mount.name) ?? '', 'unprivileged.sock'));
    assert.deepEqual(denied.ok ? 'ok' : denied.failure, 'permission-denied', JSON.stringify(denied));
    return { gh: gh.stdout.split('\n').at(-1), curl: curl.status, withoutCapabilities: denied.ok ? 'ok' : denied.failure };
  } finally {
    holder.stdin?.end();
    holder.kill();
    await plain.stop();
  }
}

/** argv that runs `command` in the agent container, as agentClients() does. */
function agentCommand(s: IdentityScenario, command: readonly string[]): [string, string[]] {
  const argv = containerArgv({ netns: NS.sandbox, pod: s.pod, container: s.agent, volumes: s.volumes, command });
  return [argv[0] as string, argv.slice(1)];
}
