// The reference supervisor's composition root: builds the tables, pushes, attach deadlines, control handlers,
// relays, the mTLS control listener, the operator-only admin listener and the credential-free metrics listener,
// and starts and closes them in order. Never imports boundary.ts, proxy/ or dns/; control/client.ts never imports this.

import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { collectDefaultProcessMetrics } from '../telemetry/metrics.js';
import { type ControlSettings, DEFAULT_SETTINGS, type WireMiddlewareService } from '../control/messages.js';
import { loadMiddlewareServices } from './middleware-services.js';
import { createFileCredentialSource, type FileCredentialSource } from '../credentials/file-source.js';
import { parsePolicy as defaultParsePolicy } from '../policy/parse.js';
import type { Policy } from '../policy/types.js';
import { type AdminServer, createAdminServer } from '../telemetry/admin.js';
import type { Logger } from '../telemetry/logger.js';
import { isBoundaryError } from '../shared/errors.js';
import { createAdminAuth } from './admin-auth.js';
import { createSupervisorAdmin, type SupervisorAdmin, type SupervisorReadiness } from './admin.js';
import type { LiveSession, SupervisorContext } from './context.js';
import { createAttachDeadlines } from './deadlines.js';
import { createControlHandlers } from './handlers.js';
import { createPolicyLibrary } from './library.js';
import { createRelayOpener } from './relay-routing.js';
import { createReplication } from './replication.js';
import { createSandboxDenials, MAX_SANDBOX_DENIALS_PER_ANSWER } from './denials.js';
import { createRelayBroker } from './relays.js';
import { createSandboxConfigs } from './sandbox-config.js';
import { type ServingTlsSource, createServingTlsSource, registerServingCertificateExpiry } from './serving-tls.js';
import { createControlServer, type ServingPems } from './server.js';
import { CERT_EXPIRY_WARNING_DAYS, describeError, isLoopbackHost } from '../control/protocol.js';
import { createStateWriter } from './state-writer.js';
import { createMemoryStore } from './store/memory.js';
import { createPostgresStore } from './store/postgres.js';
import type { StoredWithdrawal, SupervisorStore } from './store/store.js';
import { createTables, type InstanceRow, type WithdrawnRecord } from './tables.js';
import { createHookRunner } from './hook-runner.js';
import { createHookDelivery, type WithdrawalHookConfig } from './withdrawal-hook.js';

/** The embedded store's file in --state-dir. */
const STATE_FILE_NAME = 'supervisor-state.json';
/** /readyz reason while the store holds changes it could not write. */
export const STORE_WRITE_FAILED_REASON = 'store-write-failed';

// Enforced in push.ts; still exported here, where it has always been importable from.

export const ATTACH_DEADLINE_MS = 300_000;

export interface SupervisorConfig {
  readonly listen: { readonly host: string; readonly port: number };
  /**
   * The serving material, fixed, or `{ dir }`: DIR/ca.pem, cert.pem and key.pem, checked at start and followed, so
   * a renewal (or a new CA) applies to new connections of both TLS listeners without a restart.
   */
  readonly tls: ServingPems | { readonly dir: string };
  readonly policiesDir: string;
  readonly credentialsFile?: string | undefined;
  /** External middleware services every attached boundary registers (docs/supervisor.md#middleware-services); read at start. */
  readonly middlewareConfig?: string | undefined;
  /** Operator API and relays. Needs adminTokenFile, adminTls or both: it never runs unauthenticated. */
  readonly adminListen?: { readonly host: string; readonly port: number } | undefined;
  /** Bearer token file for the admin listener; re-checked on every use, so a rotation needs no restart. */
  readonly adminTokenFile?: string | undefined;
  /** The admin listener speaks HTTPS with `tls` (renewed with it) and accepts operator client certificates from its CA. */
  readonly adminTls?: boolean | undefined;
  /** GET /metrics, /healthz and /readyz only, without credentials (for Prometheus and kubelet probes). */
  readonly metricsListen?: { readonly host: string; readonly port: number } | undefined;
  readonly attachDeadlineMs?: number | undefined;
  readonly trustDomain?: string | undefined;
  readonly settings?: ControlSettings | undefined;
  /** TLS handshake deadline per connection; tests on a loaded machine raise it. Default TLS_HANDSHAKE_TIMEOUT_MS. */
  readonly handshakeTimeoutMs?: number | undefined;
  /** One replica: state survives restarts in DIR/supervisor-state.json. Without it (and databaseUrl), state is in memory. */
  readonly stateDir?: string | undefined;
  /** Any number of replicas share state in this PostgreSQL database. Excludes stateDir. */
  readonly databaseUrl?: string | undefined;
  /** Told of every withdrawal, retried until it acknowledges. */
  readonly withdrawalHook?: WithdrawalHookConfig | undefined;
}

interface SupervisorDeps {
  readonly now: () => number;
  readonly logger: Logger;
  /** Where the credentials file's value_from.env reads, and the withdrawal hook command's environment (main.ts passes process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly parsePolicy?: (text: string, options?: { source?: string }) => Policy;
  /** Served on the metrics listener; a fresh one when absent. Never the global default registry. */
  readonly registry?: Registry;
  /** Replaces the store the config names (tests share one between two supervisors). */
  readonly store?: SupervisorStore;
  /** Tests only: the policies folder's periodic rescan period, so a test can tell the watcher's work from it. */
  readonly policyRescanMs?: number;
}

/** What a failed write-behind means for each store, in its log line. */
const WRITE_FAILURE_CONSEQUENCE: Readonly<Record<SupervisorStore['kind'], string>> = {
  memory: 'the store did not take it',
  file: 'it is in memory and the state file is written again until it succeeds; /readyz is not ready meanwhile',
  postgres: 'the database keeps what it had for this instance until its next change',
};

const SUPERVISOR_EVENT_TYPES = ['attached', 'refused', 'detached', 'status', 'events', 'withdrawn', 'pushed', 'superseded'] as const;
export interface SupervisorEvent {
  readonly type: (typeof SUPERVISOR_EVENT_TYPES)[number];
  readonly sandboxId: string;
  readonly instanceId?: string;
  readonly generation?: number;
  readonly detail?: string;
}

export interface Supervisor {
  start(): Promise<void>;
  close(): Promise<void>;
  address(): { host: string; port: number };
  adminAddress(): { host: string; port: number } | undefined;
  metricsAddress(): { host: string; port: number } | undefined;
  sandboxes(): InstanceRow[];
  /** Withdrawals this replica made since it started. */
  withdrawn(): readonly WithdrawnRecord[];
  /** Every withdrawal the store holds (all replicas, across restarts), with its hook delivery. */
  storedWithdrawals(): Promise<StoredWithdrawal[]>;
  /** Expects an instance: it is withdrawn unless it attaches within the attach deadline. Resolves once durable. */
  expect(sandboxId: string, instanceId: string): Promise<boolean>;
  /** Re-reads the policies folder now (the watcher does this on its own). */
  reload(): Promise<void>;
  subscribe(listener: (event: SupervisorEvent) => void): () => void;
  readiness(): SupervisorReadiness;
}

/** Who can reach the control listener, for its start line: the default (every interface) is deliberate. */
function listenScope(host: string): string {
  const who = 'boundaries in other pods and hosts can dial it, and each must present a client certificate from the --tls-dir CA';
  if (host === '0.0.0.0') return `every IPv4 interface: ${who}`;
  if (host === '::') return `every interface: ${who}`;
  return isLoopbackHost(host) ? 'loopback only: boundaries on other hosts or in other pods cannot reach it' : `this address only: ${who}`;
}

export function createSupervisor(config: SupervisorConfig, deps: SupervisorDeps): Supervisor {
  const { now, logger } = deps;
  // Read at start, before the first policy: a policy may name these services (each boundary has their configs validated).
  let middleware: readonly WireMiddlewareService[] = [];
  const parsePolicy = deps.parsePolicy ?? ((text: string, options?: { source?: string }) => defaultParsePolicy(text, { ...options, middlewareServices: middleware.map((s) => s.name) }));
  const attachDeadlineMs = config.attachDeadlineMs ?? ATTACH_DEADLINE_MS;
  const settings = config.settings ?? DEFAULT_SETTINGS;
  const tables = createTables({ now });
  if (config.stateDir !== undefined && config.databaseUrl !== undefined) throw new Error('give a state directory or a database, not both');
  const store: SupervisorStore =
    deps.store ??
    (config.databaseUrl !== undefined
      ? createPostgresStore({ connectionString: config.databaseUrl, logger })
      : createMemoryStore(config.stateDir === undefined ? { logger } : { stateFile: join(config.stateDir, STATE_FILE_NAME), logger }));
  const writer = createStateWriter({ logger, consequence: WRITE_FAILURE_CONSEQUENCE[store.kind] });
  const replicaId = randomUUID();
  const live = new Map<string, LiveSession>();
  const listeners = new Set<(event: SupervisorEvent) => void>();
  const broker = createRelayBroker({ logger });
  const registry = deps.registry ?? new Registry();
  // process_* and nodejs_* on this registry only, and only when something serves them.
  if (config.metricsListen !== undefined) collectDefaultProcessMetrics(registry);
  // Built now, so a supervisor configured with an unauthenticated admin listener fails before it starts.
  const adminAuth =
    config.adminListen === undefined
      ? undefined
      : createAdminAuth({ tokenFile: config.adminTokenFile, certificates: config.adminTls === true, trustDomain: config.trustDomain, logger });
  let credentials: FileCredentialSource | undefined;
  let admin: SupervisorAdmin | undefined;
  let metrics: AdminServer | undefined;
  let started = false;
  let closing = false;

  function emit(event: SupervisorEvent): void {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (err) {
        logger.warn({ err }, 'supervisor event listener threw');
      }
    }
  }

  const library = createPolicyLibrary({
    dir: config.policiesDir,
    parsePolicy,
    onChange: () => refresh(),
    onError: (file, message) => logger.warn({ file }, `policy file rejected; the last valid version stays: ${message}`),
    rescanIntervalMs: deps.policyRescanMs,
  });
  const sandboxConfigs = createSandboxConfigs({ library, credentials: () => credentials, settings, parsePolicy, logger });
  const { configFor } = sandboxConfigs;
  const denials = createSandboxDenials(now);
  const ctx: SupervisorContext = { logger, now, replicaId, attachDeadlineMs, store, writer, tables, live, broker, denials, emit, configFor, middleware: () => middleware, closing: () => closing };
  const hookRunner =
    config.withdrawalHook === undefined
      ? undefined
      : createHookRunner({ store, deliver: createHookDelivery(config.withdrawalHook, { logger, env: deps.env ?? {} }), now, logger });
  const deadlines = createAttachDeadlines(ctx, { attachDeadlineMs, hook: hookRunner !== undefined, onWithdrawn: () => hookRunner?.kick() });
  const replication = createReplication(ctx, { grantsFor: sandboxConfigs.grantsFor });
  const handlers = createControlHandlers(ctx, { deadlines, replication });
  // From the moment replication starts: a change seen while it loads is published after what it loads.
  let following = false;
  function refresh(): void {
    if (!following || closing) return;
    replication.refresh().catch((err: unknown) => logger.warn({ err: describeError(err) }, 'publishing the changed configuration failed; the next change retries'));
  }

  let servingTls: ServingPems | undefined = 'dir' in config.tls ? undefined : config.tls;
  const tlsSource: ServingTlsSource | undefined =
    'dir' in config.tls
      ? createServingTlsSource({
          dir: config.tls.dir,
          now,
          logger,
          apply(identity) {
            // Control first: it is what boundaries dial. Either throwing refuses the version on both listeners.
            server.setTls(identity);
            try {
              admin?.setTls(identity);
            } catch (err) {
              server.setTls(currentTls());
              throw err;
            }
            servingTls = identity;
          },
        })
      : undefined;
  if (tlsSource !== undefined) registerServingCertificateExpiry(registry, tlsSource);
  function currentTls(): ServingPems {
    if (servingTls === undefined) throw new Error('supervisor TLS material read before start()');
    return servingTls;
  }
  const server = createControlServer({
    host: config.listen.host,
    port: config.listen.port,
    tls: currentTls,
    trustDomain: config.trustDomain,
    handshakeTimeoutMs: config.handshakeTimeoutMs,
    handlers,
    logger,
  });

  async function startParts(): Promise<void> {
    // Before anything else: without its serving material the supervisor has nothing to listen with.
    if (tlsSource !== undefined) servingTls = await tlsSource.start();
    // Then: a token file that would refuse everyone stops the start before any listener opens.
    await adminAuth?.start();
    if (config.middlewareConfig !== undefined) middleware = await loadMiddlewareServices(config.middlewareConfig);
    if (config.credentialsFile !== undefined) {
      credentials = await createFileCredentialSource({
        path: config.credentialsFile,
        env: deps.env ?? {},
        watch: true,
        onChange: () => refresh(),
        onError: (err) => logger.warn({ code: err.code }, `credentials reload failed; the last good set stays: ${err.message}`),
      });
    }
    await library.start();
    await store.start();
    // Before the listener opens: an attach is admitted at the generation every replica agrees on.
    following = true;
    await replication.start();
    await deadlines.start();
    hookRunner?.start();
    await server.start();
    if (config.adminListen !== undefined && adminAuth !== undefined) {
      admin = createSupervisorAdmin({
        host: config.adminListen.host,
        port: config.adminListen.port,
        auth: adminAuth,
        tls: config.adminTls === true ? currentTls() : undefined,
        logger,
        handlers: {
          sandboxes: async () => ({
            // A broken policy file is the sandbox's problem now, though its boundaries report none of their own.
            sandboxes: tables.rows().map((row) => (row.lastError === null ? { ...row, lastError: library.problemFor(row.sandboxId) ?? null } : row)),
            withdrawn: tables.withdrawn(),
            relays: broker.count(),
            store: { kind: store.kind, replicaId, instances: await store.instances(), withdrawals: await store.withdrawals() },
          }),
          readiness: () => api.readiness(),
          denials: (sandboxId, last) =>
            tables.sandbox(sandboxId) === undefined && denials.recent(sandboxId, 1).length === 0
              ? { status: 404, body: { error: 'unknown-sandbox', message: `no sandbox ${sandboxId}` } }
              : { status: 200, body: { sandboxId, limit: MAX_SANDBOX_DENIALS_PER_ANSWER, denials: denials.recent(sandboxId, last) } },
          async expect(sandboxId, instanceId) {
            try {
              return (await api.expect(sandboxId, instanceId))
                ? { status: 202, body: { expected: true, deadlineMs: attachDeadlineMs } }
                : { status: 404, body: { error: 'unknown-sandbox', message: `no policy for sandbox ${sandboxId}` } };
            } catch (err) {
              // Not durable, so not accepted: the operator repeats the call (it is idempotent) once /readyz is ready.
              if (!isBoundaryError(err) || err.code !== 'STORE_UNAVAILABLE') throw err;
              return { status: 503, body: { error: 'store-unavailable', code: err.code, message: err.message } };
            }
          },
          relay: createRelayOpener(ctx),
        },
      });
      await admin.start();
      if (config.adminTls !== true && !isLoopbackHost(config.adminListen.host)) {
        logger.warn({ admin: admin.address() }, 'admin listener on a non-loopback address without --admin-tls: the token crosses the network in clear text');
      }
    }
    if (config.metricsListen !== undefined) {
      metrics = createAdminServer({ ...config.metricsListen, registry, readiness: () => api.readiness(), logger, label: 'metrics' });
      await metrics.start();
    }
    started = true;
    const listen = server.address();
    logger.info({ listen, scope: listenScope(listen.host), admin: admin?.address(), metrics: metrics?.address(), store: store.kind, replicaId }, 'supervisor listening');
  }

  const api: Supervisor = {
    async start() {
      try {
        await startParts();
      } catch (err) {
        // Whatever did start (watchers, listeners, the store) stops again, so a failed start leaves nothing running.
        await api.close().catch((closeErr: unknown) => logger.warn({ err: closeErr }, 'closing after a failed start failed'));
        throw err;
      }
    },
    async close() {
      if (closing) return;
      closing = true;
      metrics?.markClosing();
      await deadlines.clear();
      replication.close();
      tlsSource?.close();
      await library.close();
      await credentials?.close();
      for (const session of live.values()) session.watch?.end();
      broker.close();
      await server.close();
      await admin?.close();
      await hookRunner?.close();
      if (started) {
        // Its boundaries re-attach to another replica (or to this one restarted) within the attach deadline.
        await writer.flush();
        const at = now();
        await store.releaseReplica(replicaId, at, at + attachDeadlineMs).catch((err: unknown) =>
          logger.warn({ err: describeError(err) }, 'could not release this replica\'s instances; another replica does once its heartbeat is stale'),
        );
      }
      await store.close().catch((err: unknown) => logger.warn({ err: describeError(err) }, 'closing the store failed'));
      // Last, so probes and scrapes see the shutdown until the end.
      await metrics?.close();
    },
    address: () => server.address(),
    adminAddress: () => admin?.address(),
    metricsAddress: () => metrics?.address(),
    sandboxes: () => tables.rows(),
    withdrawn: () => tables.withdrawn(),
    storedWithdrawals: () => store.withdrawals(),
    async expect(sandboxId, instanceId) {
      const found = configFor(sandboxId);
      if (!found.ok) return false;
      const known = tables.sandbox(sandboxId) !== undefined;
      tables.expect(sandboxId, instanceId, found.config);
      if (!known) replication.admitted(sandboxId);
      const deadlineAt = now() + attachDeadlineMs;
      await writer.flush();
      await store.expect(sandboxId, instanceId, deadlineAt);
      deadlines.scheduleAt(deadlineAt);
      return true;
    },
    async reload() {
      await library.rescan();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    readiness() {
      const reasons: string[] = [];
      if (!started) reasons.push('starting');
      if (closing) reasons.push('shutting down');
      const invalid = [...library.errors()].map(([name, error]) => `${name}.yaml: ${error.split('\n', 1)[0]}`);
      // What it acknowledged must be durable: until the state is written again, say so (and answer 503 to writes).
      const writeFailure = store.writeFailure();
      if (writeFailure !== undefined) reasons.push(`${STORE_WRITE_FAILED_REASON}: ${writeFailure}`);
      // Boundaries verify this certificate: once it expired, no boundary can attach here.
      const certificate = tlsSource?.certificate();
      if (certificate !== undefined && certificate.daysLeft < 0) reasons.push(`serving-certificate-expired: ${certificate.notAfter}`);
      const warnings = certificate !== undefined && certificate.daysLeft >= 0 && certificate.daysLeft < CERT_EXPIRY_WARNING_DAYS ? ['serving-certificate-expiring'] : [];
      return {
        ready: reasons.length === 0,
        reasons,
        sessions: server.sessionCount(),
        instances: tables.instanceCount(),
        invalidPolicies: invalid,
        ...(certificate === undefined ? {} : { servingCertificate: certificate }),
        ...(warnings.length === 0 ? {} : { warnings }),
        store: { kind: store.kind, replicaId, failedWrites: writer.failures(), ...(deadlines.lastError() === undefined ? {} : { sweepError: deadlines.lastError() }) },
      };
    },
  };
  return api;
}
