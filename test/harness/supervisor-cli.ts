// The real `boundary supervisor` CLI as a child process for tests that kill it (SIGKILL is a crash, which an
// in-process supervisor cannot have): its TLS folder, admin token and a withdrawal hook that records each call,
// the admin PUT that expects an instance, and free loopback ports (the CLI takes no port 0).

import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { issueCertificate } from '../../src/pki/issue.js';
import { adminRequest } from './admin-client.js';
import type { TestPki } from './certs.js';
import { CHILD_WAIT_TIMEOUT_MS, type LoggedChild, spawnLogged } from './child-lines.js';
import { MAIN, PROJECT_ROOT } from './cli-boundary.js';

export const SUPERVISOR_ADMIN_TOKEN = 'supervisor-cli-test-admin-token-0123456789';

export function listenOn(host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

/** A port free on `host` now. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const server = await listenOn(host, 0);
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface SupervisorFiles {
  readonly tlsDir: string;
  readonly tokenFile: string;
  readonly hook: string;
  /** Lines the hook wrote: `<withdrawal id> <instance id> <first hook argument>`. */
  hookCalls(): Promise<string[]>;
}

/** DIR/tls (a server certificate for `names`), DIR/token and DIR/hook.sh. */
export async function writeSupervisorFiles(dir: string, pki: TestPki, names: readonly string[]): Promise<SupervisorFiles> {
  const tlsDir = join(dir, 'tls');
  await mkdir(tlsDir, { recursive: true });
  const server = await issueCertificate({ ca: pki.ca, kind: 'server', names, now: Date.now });
  await writeFile(join(tlsDir, 'ca.pem'), pki.ca.certPem);
  await writeFile(join(tlsDir, 'cert.pem'), server.certPem);
  await writeFile(join(tlsDir, 'key.pem'), server.keyPem, { mode: 0o600 });
  const tokenFile = join(dir, 'token');
  await writeFile(tokenFile, `${SUPERVISOR_ADMIN_TOKEN}\n`, { mode: 0o600 });
  const log = join(dir, 'hook.log');
  const hook = join(dir, 'hook.sh');
  await writeFile(hook, `#!/bin/sh\necho "$BOUNDARY_WITHDRAWAL_ID $BOUNDARY_INSTANCE_ID $1" >> '${log}'\n`);
  await chmod(hook, 0o755);
  return {
    tlsDir,
    tokenFile,
    hook,
    hookCalls: () =>
      readFile(log, 'utf8').then(
        (text) => text.split('\n').filter((line) => line !== ''),
        () => [],
      ),
  };
}

export interface SupervisorProcess {
  readonly child: LoggedChild;
  readonly replicaId: string;
}

/** Starts `boundary supervisor ...args` and resolves once it logs that it listens. */
export async function spawnSupervisorCli(args: readonly string[], label: string): Promise<SupervisorProcess> {
  const child = spawnLogged([process.execPath, '--import', 'tsx', MAIN, 'supervisor', ...args], { cwd: PROJECT_ROOT, label });
  const line = await child.waitFor((l) => l.msg === 'supervisor listening', CHILD_WAIT_TIMEOUT_MS);
  return { child, replicaId: String(line.replicaId) };
}

/** PUT /v1/sandboxes/<sandbox>/instances/<instance> on the admin listener; resolves with the status. */
export async function expectInstance(adminPort: number, sandboxId: string, instanceId: string): Promise<number> {
  const reply = await adminRequest({
    port: adminPort,
    method: 'PUT',
    path: `/v1/sandboxes/${sandboxId}/instances/${instanceId}`,
    headers: { authorization: `Bearer ${SUPERVISOR_ADMIN_TOKEN}` },
  });
  return reply.status;
}

/** The supervisor that withdrew `instanceId` logs its hook's delivery. */
export function waitForHookDelivered(children: readonly LoggedChild[], instanceId: string, timeoutMs = CHILD_WAIT_TIMEOUT_MS): Promise<unknown> {
  return Promise.any(children.map((c) => c.waitFor((l) => l.msg === 'withdrawal hook delivered' && l.instanceId === instanceId, timeoutMs)));
}
