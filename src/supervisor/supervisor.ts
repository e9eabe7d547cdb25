// The reference supervisor's composition root: builds the tables, pushes, attach deadlines, control handlers,
// relays, the mTLS control listener, the operator-only admin listener and the credential-free metrics listener,
// and starts and closes them in order. Never imports boundary.ts, proxy/ or dns/; control/client.ts never imports this.

import { collectDefaultMetrics, Registry } from 'prom-client';
import { type ControlSettings, DEFAULT_SETTINGS } from '../control/messages.js';
import { isLoopbackHost } from '../control/relay.js';
import { createFileCredentialSource, type FileCredentialSource } from '../credentials/file-source.js';
import { parsePolicy as defaultParsePolicy } from '../policy/parse.js';
import type { Policy } from '../policy/types.js';
import { type AdminServer, createAdminServer } from '../telemetry/admin.js';
import type { Logger } from '../telemetry/logger.js';
import { createAdminAuth } from './admin-auth.js';
import { createSupervisorAdmin, type SupervisorAdmin, type SupervisorReadiness } from './admin.js';
import type { LiveSession, SupervisorContext } from './context.js';
import { createAttachDeadlines } from './deadlines.js';
import { createControlHandlers } from './handlers.js';
import { createPolicyLibrary } from './library.js';
import { refreshAll } from './push.js';
import { createRelayOpener } from './relay-routing.js';
import { createRelayBroker } from './relays.js';
import { createSandboxConfigs } from './sandbox-config.js';
import { type ServingTlsSource, createServingTlsSource } from './serving-tls.js';
import { createControlServer, type ServingPems } from './server.js';
import { createTables, type InstanceRow, type WithdrawnRecord } from './tables.js';

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
}

export interface SupervisorDeps {
  readonly now: () => number;
  readonly logger: Logger;
  /** Where the credentials file's value_from.env reads (main.ts passes process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly parsePolicy?: (text: string, options?: { source?: string }) => Policy;
  /** Served on the metrics listener; a fresh one when absent. Never the global default registry. */
  readonly registry?: Registry;
}

export const SUPERVISOR_EVENT_TYPES = ['attached', 'refused', 'detached', 'status', 'events', 'withdrawn', 'pushed', 'superseded'] as const;
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
  withdrawn(): readonly WithdrawnRecord[];
  /** Expects an instance: it is withdrawn unless it attaches within the attach deadline. */
  expect(sandboxId: string, instanceId: string): boolean;
  /** Re-reads the policies folder now (the watcher does this on its own). */
  reload(): Promise<void>;
  subscribe(listener: (event: SupervisorEvent) => void): () => void;
  readiness(): SupervisorReadiness;
}

export function createSupervisor(config: SupervisorConfig, deps: SupervisorDeps): Supervisor {
  const { now, logger } = deps;
  const parsePolicy = deps.parsePolicy ?? defaultParsePolicy;
  const attachDeadlineMs = config.attachDeadlineMs ?? ATTACH_DEADLINE_MS;
  const settings = config.settings ?? DEFAULT_SETTINGS;
  const tables = createTables({ now });
  const live = new Map<string, LiveSession>();
  const listeners = new Set<(event: SupervisorEvent) => void>();
  const broker = createRelayBroker({ logger });
  const registry = deps.registry ?? new Registry();
  // process_* and nodejs_* on this registry only, and only when something serves them.
  if (config.metricsListen !== undefined) collectDefaultMetrics({ register: registry });
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
    onChange: () => refreshAll(ctx),
    onError: (file, message) => logger.warn({ file }, `policy file rejected; the last valid version stays: ${message}`),
  });
  const { configFor } = createSandboxConfigs({ library, credentials: () => credentials, settings });
  const ctx: SupervisorContext = { logger, tables, live, broker, emit, configFor, closing: () => closing };
  const deadlines = createAttachDeadlines(ctx, { attachDeadlineMs });
  const handlers = createControlHandlers(ctx, deadlines);

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

  const api: Supervisor = {
    async start() {
      // Before anything else: without its serving material the supervisor has nothing to listen with.
      if (tlsSource !== undefined) servingTls = await tlsSource.start();
      // Then: a token file that would refuse everyone stops the start before any listener opens.
      await adminAuth?.start();
      if (config.credentialsFile !== undefined) {
        credentials = await createFileCredentialSource({
          path: config.credentialsFile,
          env: deps.env ?? {},
          watch: true,
          onChange: () => refreshAll(ctx),
          onError: (err) => logger.warn({ code: err.code }, `credentials reload failed; the last good set stays: ${err.message}`),
        });
      }
      await library.start();
      await server.start();
      if (config.adminListen !== undefined && adminAuth !== undefined) {
        admin = createSupervisorAdmin({
          host: config.adminListen.host,
          port: config.adminListen.port,
          auth: adminAuth,
          tls: config.adminTls === true ? currentTls() : undefined,
          logger,
          handlers: {
            sandboxes: () => ({ sandboxes: tables.rows(), withdrawn: tables.withdrawn(), relays: broker.count() }),
            readiness: () => api.readiness(),
            expect: (sandboxId, instanceId) =>
              api.expect(sandboxId, instanceId)
                ? { status: 202, body: { expected: true, deadlineMs: attachDeadlineMs } }
                : { status: 404, body: { error: 'unknown-sandbox', message: `no policy for sandbox ${sandboxId}` } },
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
      logger.info({ listen: server.address(), admin: admin?.address(), metrics: metrics?.address() }, 'supervisor listening');
    },
    async close() {
      if (closing) return;
      closing = true;
      metrics?.markClosing();
      deadlines.clear();
      tlsSource?.close();
      await library.close();
      await credentials?.close();
      for (const session of live.values()) session.watch?.end();
      broker.close();
      await server.close();
      await admin?.close();
      // Last, so probes and scrapes see the shutdown until the end.
      await metrics?.close();
    },
    address: () => server.address(),
    adminAddress: () => admin?.address(),
    metricsAddress: () => metrics?.address(),
    sandboxes: () => tables.rows(),
    withdrawn: () => tables.withdrawn(),
    expect(sandboxId, instanceId) {
      const found = configFor(sandboxId);
      if (!found.ok) return false;
      const instance = tables.expect(sandboxId, instanceId, found.config);
      if (!instance.attached) deadlines.arm(sandboxId, instanceId);
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
      return { ready: reasons.length === 0, reasons, sessions: server.sessionCount(), instances: tables.instanceCount(), invalidPolicies: invalid };
    },
  };
  return api;
}
