// Control-channel test helpers: a reference supervisor over a temporary policies folder, and boundary
// control clients with their own policy store, all on loopback with certificates from makeTestPki().
import { randomBytes } from 'node:crypto';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ControlClient, type ControlClientOptions, type ControlState, createControlClient } from '../../src/control/client.js';
import type { AuditEvent, AuditSink } from '../../src/telemetry/event.js';
import { createPolicyStore, type PolicyStore } from '../../src/policy/store.js';
import { createSupervisor, type Supervisor, type SupervisorConfig, type SupervisorEvent } from '../../src/supervisor/supervisor.js';
import { createLogger, type Logger } from '../../src/telemetry/logger.js';
import type { Pem, TestPki } from './certs.js';
import { waiterList } from './waiters.js';

/** Bounds a hang only: a state, event or log line of the control channel that has not come by then is not coming. */
export const WAIT_TIMEOUT_MS = 30_000;

export function policyYaml(host: string, port = 443): string {
  return `version: 1\nnetwork_policies:\n  api:\n    name: api\n    endpoints:\n      - host: ${host}\n        port: ${port}\n    binaries: [{ path: "/**" }]\n`;
}

/** A logger that keeps its lines in memory, with a waiter for a line to come. */
export function quietLogger(): { logger: Logger; lines: string[]; waitForLine(predicate: (line: string) => boolean, timeoutMs?: number): Promise<string> } {
  const lines = waiterList<string>();
  const logger = createLogger({ format: 'json', level: 'debug', destination: { write: (line: string) => lines.push(line) } });
  return { logger, lines: lines.items, waitForLine: (predicate, timeoutMs = WAIT_TIMEOUT_MS) => lines.waitFor(predicate, timeoutMs, 'log line') };
}

/** An AuditSink recording events as emitted, with a waiter. */
export function memorySink(): AuditSink & { events: AuditEvent[]; waitFor(predicate: (e: AuditEvent) => boolean, timeoutMs?: number): Promise<AuditEvent> } {
  const events = waiterList<AuditEvent>();
  return {
    events: events.items,
    emit: (event) => events.push(event),
    waitFor: (predicate, timeoutMs = WAIT_TIMEOUT_MS) =>
      events.waitFor(predicate, timeoutMs, () => `audit event; saw ${events.items.map((e) => `${e.class}:${e.activity}`).join(', ')}`),
  };
}

export interface TestSupervisor {
  readonly dir: string;
  /** The admin listener's bearer token (in `adminTokenFile`, unless the config named another file). */
  readonly adminToken: string;
  readonly adminTokenFile: string;
  /** `{ authorization: 'Bearer <adminToken>' }`, for requests to the admin listener. */
  readonly adminHeaders: Readonly<Record<string, string>>;
  supervisor: Supervisor;
  port(): number;
  writePolicy(name: string, text: string): Promise<void>;
  waitFor(predicate: (event: SupervisorEvent) => boolean, timeoutMs?: number): Promise<SupervisorEvent>;
  /** Closes and starts a fresh supervisor (new tables) on the same port and folder. */
  restart(): Promise<void>;
  close(): Promise<void>;
  readonly logs: string[];
  /** Resolves with the first log line (already written or later) that matches. */
  waitForLog(predicate: (line: string) => boolean, timeoutMs?: number): Promise<string>;
}

export interface TestSupervisorOptions {
  readonly policies?: Record<string, string>;
  readonly port?: number;
  readonly config?: Partial<SupervisorConfig>;
  readonly now?: () => number;
  /** The policies folder's periodic rescan (far off: only the watcher sees an edit in time). */
  readonly policyRescanMs?: number;
}

export async function startTestSupervisor(pki: TestPki, options: TestSupervisorOptions = {}): Promise<TestSupervisor> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-supervisor-'));
  // Outside the policies folder, so the library never sees it.
  const secretDir = await mkdtemp(join(tmpdir(), 'boundary-supervisor-admin-'));
  const removeDirs = async (): Promise<void> => {
    await rm(dir, { recursive: true, force: true });
    await rm(secretDir, { recursive: true, force: true });
  };
  try {
    return await startIn(pki, options, dir, secretDir, removeDirs);
  } catch (err) {
    // A supervisor that does not start (tests of a refused configuration) leaves no folder behind either.
    await removeDirs();
    throw err;
  }
}

async function startIn(
  pki: TestPki,
  options: TestSupervisorOptions,
  dir: string,
  secretDir: string,
  removeDirs: () => Promise<void>,
): Promise<TestSupervisor> {
  const adminToken = randomBytes(32).toString('base64url');
  const adminTokenFile = join(secretDir, 'token');
  await writeFile(adminTokenFile, `${adminToken}\n`, { mode: 0o600 });
  for (const [name, text] of Object.entries(options.policies ?? {})) await writeFile(join(dir, `${name}.yaml`), text);
  const { logger, lines, waitForLine } = quietLogger();
  const events = waiterList<SupervisorEvent>();
  const make = (port: number): Supervisor => {
    const supervisor = createSupervisor(
      {
        listen: { host: '127.0.0.1', port },
        tls: { caPem: pki.ca.certPem, certPem: pki.server.certPem, keyPem: pki.server.keyPem },
        policiesDir: dir,
        adminListen: { host: '127.0.0.1', port: 0 },
        adminTokenFile,
        ...options.config,
      },
      { now: options.now ?? Date.now, logger, ...(options.policyRescanMs === undefined ? {} : { policyRescanMs: options.policyRescanMs }) },
    );
    supervisor.subscribe((event) => events.push(event));
    return supervisor;
  };
  const handle: TestSupervisor = {
    dir,
    adminToken,
    adminTokenFile,
    adminHeaders: { authorization: `Bearer ${adminToken}` },
    logs: lines,
    waitForLog: waitForLine,
    supervisor: make(options.port ?? 0),
    port: () => handle.supervisor.address().port,
    async writePolicy(name, text) {
      // Write-then-rename, as editors and Kubernetes config maps do.
      const tmp = join(dir, `.${name}.tmp`);
      await writeFile(tmp, text);
      await rename(tmp, join(dir, `${name}.yaml`));
    },
    waitFor: (predicate, timeoutMs = WAIT_TIMEOUT_MS) => events.waitFor(predicate, timeoutMs, 'supervisor event'),
    async restart() {
      const port = handle.port();
      await handle.supervisor.close();
      // The fresh supervisor's events only; waits still pending carry over to it.
      events.items.length = 0;
      handle.supervisor = make(port);
      await handle.supervisor.start();
    },
    async close() {
      try {
        await handle.supervisor.close();
      } finally {
        await removeDirs();
      }
    },
  };
  await handle.supervisor.start();
  return handle;
}

export interface TestClient {
  readonly client: ControlClient;
  readonly store: PolicyStore;
  readonly sink: ReturnType<typeof memorySink>;
  /** Resolves with the first state (current or later) that matches. */
  waitState(predicate: (state: ControlState) => boolean, timeoutMs?: number): Promise<ControlState>;
}

export function makeTestClient(
  pki: TestPki,
  options: { port: number; host?: string; identity?: Pem; caPem?: string; sandboxId?: string; instanceId?: string } & Partial<ControlClientOptions>,
): TestClient {
  const store = createPolicyStore();
  const sink = memorySink();
  // Not recorded: waitState() checks the current state, then waits for a later one.
  const states = waiterList<ControlState>({ record: false });
  const identity = options.identity ?? pki.client;
  const client = createControlClient({
    address: { host: options.host ?? '127.0.0.1', port: options.port },
    tls: { caPem: options.caPem ?? pki.ca.certPem, certPem: identity.certPem, keyPem: identity.keyPem },
    sandboxId: options.sandboxId ?? pki.sandboxId,
    instanceId: options.instanceId ?? 'pod-1',
    bootId: 'boot-1',
    version: '0.1.0-test',
    now: Date.now,
    sink,
    store,
    backoff: { baseMs: 20, capMs: 200 },
    ...options,
    onState(state) {
      options.onState?.(state);
      states.push(state);
    },
  });
  return {
    client,
    store,
    sink,
    waitState(predicate, timeoutMs = WAIT_TIMEOUT_MS) {
      const now = client.state();
      if (predicate(now)) return Promise.resolve(now);
      return states.waitFor(predicate, timeoutMs, 'control state', () => {
        const s = client.state();
        return `phase ${s.phase}, last error ${s.lastError?.kind}: ${s.lastError?.message}`;
      });
    },
  };
}
