// The reference supervisor's composition root: policies folder + credentials file -> per-sandbox
// configuration, the mTLS control listener, the tables, pushes, attach deadlines, relays, the operator-only
// admin listener and the credential-free metrics listener. Never imports boundary.ts, proxy/ or dns/;
// control/client.ts never imports this.

import { randomUUID } from 'node:crypto';
import type { ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import { collectDefaultMetrics, Registry } from 'prom-client';
import {
  type AttachMessage,
  type ControlSettings,
  DEFAULT_SETTINGS,
  encodeMessage,
  type PushMessage,
  type RefusedMessage,
  type WireProvider,
} from '../control/messages.js';
import { isLoopbackHost } from '../control/relay.js';
import { createFileCredentialSource, type FileCredentialSource } from '../credentials/file-source.js';
import type { CredentialSet } from '../credentials/set.js';
import { canonicalJson, sha256Hex } from '../policy/canonical.js';
import { parsePolicy as defaultParsePolicy } from '../policy/parse.js';
import type { Policy } from '../policy/types.js';
import { type AdminServer, createAdminServer } from '../telemetry/admin.js';
import type { Logger } from '../telemetry/logger.js';
import { createAdminAuth } from './admin-auth.js';
import { createSupervisorAdmin, type RelayRequest, type SupervisorAdmin, type SupervisorReadiness } from './admin.js';
import { createPolicyLibrary } from './library.js';
import { createRelayBroker, relayErrorReply } from './relays.js';
import { type ServingTlsSource, createServingTlsSource } from './serving-tls.js';
import { type ControlHandlers, createControlServer, type Peer, type ServingPems } from './server.js';
import {
  createTables,
  type InstanceRecord,
  type InstanceRow,
  type SandboxConfig,
  type SupersededSession,
  type WithdrawnRecord,
} from './tables.js';

export const ATTACH_DEADLINE_MS = 300_000;
/** A boundary that does not read its watch stream is cut off before its backlog grows past this. */
export const MAX_WATCH_BACKLOG_BYTES = 8_388_608;

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

interface LiveSession {
  readonly sessionId: string;
  readonly session: ServerHttp2Session;
  readonly sandboxId: string;
  readonly instanceId: string;
  /** The boundary process behind the session (attach's bootId) and where it connected from, for conflict logs. */
  readonly bootId: string;
  readonly remote: string;
  watch: ServerHttp2Stream | undefined;
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
  const deadlines = new Map<string, NodeJS.Timeout>();
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
  let wire: { revision: number; providers: readonly WireProvider[]; hash: string } | undefined;
  let admin: SupervisorAdmin | undefined;
  let metrics: AdminServer | undefined;
  let started = false;
  let closing = false;

  const key = (sandboxId: string, instanceId: string): string => `${sandboxId}/${instanceId}`;

  function emit(event: SupervisorEvent): void {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (err) {
        logger.warn({ err }, 'supervisor event listener threw');
      }
    }
  }

  function wireCredentials(): { providers: readonly WireProvider[]; hash: string } {
    const set: CredentialSet | undefined = credentials?.current();
    const revision = set?.revision ?? 0;
    if (wire?.revision === revision) return wire;
    // The one place values leave their Secret: serialised for the mTLS channel to the boundary.
    const providers: WireProvider[] = [...(set?.providers.values() ?? [])].map((provider) => ({
      name: provider.name,
      env: Object.fromEntries([...provider.keys].map(([name, secret]) => [name, secret.reveal()])),
      endpoints: provider.endpoints.map((e) => (e.path === undefined ? { host: e.host, port: e.port } : { host: e.host, port: e.port, path: e.path })),
    }));
    wire = { revision, providers, hash: sha256Hex(canonicalJson(providers)) };
    return wire;
  }

  function configFor(sandboxId: string): { ok: true; config: SandboxConfig } | { ok: false; refusal: RefusedMessage } {
    const found = library.lookup(sandboxId);
    if (!found.ok) return { ok: false, refusal: { kind: 'refused', code: found.code, message: found.message, retryable: true } };
    const creds = wireCredentials();
    return {
      ok: true,
      config: { policyText: found.policy.text, policyHash: found.policy.hash, providers: creds.providers, credentialsHash: creds.hash, settings },
    };
  }

  function push(session: LiveSession, message: PushMessage): boolean {
    const watch = session.watch;
    if (watch === undefined || watch.destroyed || watch.closed) return false;
    if (watch.writableLength > MAX_WATCH_BACKLOG_BYTES) {
      logger.warn({ sandboxId: session.sandboxId, instanceId: session.instanceId }, 'boundary is not reading its watch stream; session closed');
      session.session.destroy();
      return false;
    }
    try {
      watch.write(encodeMessage(message));
      return true;
    } catch (err) {
      logger.warn({ err, sandboxId: session.sandboxId }, 'push failed');
      return false;
    }
  }

  function pushConfig(session: LiveSession, instance: InstanceRecord, parts: { policy: boolean; credentials: boolean; settings: boolean }): void {
    const record = tables.sandbox(session.sandboxId);
    if (record === undefined) return;
    const { generation, config: c } = record;
    let sent = true;
    if (parts.credentials) sent &&= push(session, { kind: 'credentials', generation, credentialsHash: c.credentialsHash, credentials: c.providers });
    if (parts.settings) sent &&= push(session, { kind: 'settings', generation, settings: c.settings });
    if (parts.policy) sent &&= push(session, { kind: 'policy', generation, policyHash: c.policyHash, policy: c.policyText });
    if (sent) {
      instance.sentGeneration = generation;
      emit({ type: 'pushed', sandboxId: session.sandboxId, instanceId: session.instanceId, generation });
    }
  }

  function refreshAll(): void {
    for (const sandboxId of tables.sandboxIds()) {
      const found = configFor(sandboxId);
      if (!found.ok) {
        logger.warn({ sandboxId, reason: found.refusal.message }, 'sandbox has no valid policy now; attached boundaries keep their last one');
        continue;
      }
      const change = tables.update(sandboxId, found.config);
      if (change === undefined) continue;
      logger.info({ sandboxId, generation: change.generation, policyHash: found.config.policyHash }, 'sandbox configuration changed; pushing');
      for (const session of live.values()) {
        if (session.sandboxId !== sandboxId) continue;
        const instance = tables.bySession(session.sessionId);
        if (instance !== undefined) pushConfig(session, instance, change);
      }
    }
  }

  function armDeadline(sandboxId: string, instanceId: string): void {
    const k = key(sandboxId, instanceId);
    clearTimeout(deadlines.get(k));
    const timer = setTimeout(() => {
      deadlines.delete(k);
      withdraw(sandboxId, instanceId, `did not attach within the attach deadline (${Math.round(attachDeadlineMs / 1000)} s)`);
    }, attachDeadlineMs);
    timer.unref();
    deadlines.set(k, timer);
  }

  function withdraw(sandboxId: string, instanceId: string, reason: string): void {
    const instance = tables.instance(sandboxId, instanceId);
    if (instance === undefined) return;
    const sessionId = instance.sessionId;
    const session = sessionId === undefined ? undefined : live.get(sessionId);
    if (session !== undefined) {
      push(session, { kind: 'withdraw', code: 'withdrawn', reason });
      live.delete(session.sessionId);
      session.watch?.end();
      session.session.close();
    }
    clearTimeout(deadlines.get(key(sandboxId, instanceId)));
    deadlines.delete(key(sandboxId, instanceId));
    const relays = broker.closeInstance(sandboxId, instanceId);
    tables.withdraw(sandboxId, instanceId, reason);
    logger.warn({ sandboxId, instanceId, reason, relaysClosed: relays }, 'instance withdrawn');
    emit({ type: 'withdrawn', sandboxId, instanceId, detail: reason });
  }

  /**
   * Idempotent attach: the newest session wins and the old one is told why and closed. When the old one is
   * another process (other boot id) whose session is still open and had acked, two live boundaries share one
   * identity: they would supersede each other forever, so the old one is told `superseded` and stops competing.
   * A restarted process also brings a new boot id, but its old session is closed (or never acked) by then.
   */
  function replaceSession(previous: LiveSession, superseded: SupersededSession, message: AttachMessage, peer: Peer, h2session: ServerHttp2Session): void {
    const { sandboxId, instanceId, bootId } = message;
    const alive = previous.session !== h2session && !previous.session.closed && !previous.session.destroyed;
    if (superseded.bootId !== bootId && superseded.acked && alive) {
      logger.warn(
        { sandboxId, instanceId, bootId, remote: peer.remote, supersededBootId: superseded.bootId, supersededRemote: previous.remote },
        'two live boundary processes attached as one instance: the newer wins, the older is told it is superseded and stops re-attaching; give each a unique --instance-id or stop the duplicate',
      );
      push(previous, {
        kind: 'withdraw',
        code: 'superseded',
        bootId,
        reason: `another boundary process (boot ${bootId}, from ${peer.remote}) attached as sandbox ${sandboxId} instance ${instanceId}`,
      });
      emit({ type: 'superseded', sandboxId, instanceId, detail: `boot ${superseded.bootId} superseded by boot ${bootId}` });
    } else {
      push(previous, { kind: 'withdraw', code: 'replaced', reason: 'superseded by a newer session of the same instance' });
    }
    live.delete(previous.sessionId);
    previous.watch?.end();
    if (previous.session !== h2session) previous.session.close();
  }

  function sessionFor(peer: Peer, sessionId: string): LiveSession | undefined {
    const session = live.get(sessionId);
    return session !== undefined && session.sandboxId === peer.sandboxId ? session : undefined;
  }

  const unknownSession = (sessionId: string): RefusedMessage => ({
    kind: 'refused',
    code: 'unknown-session',
    message: `session ${sessionId.slice(0, 64) || '(none)'} is not attached; attach again`,
    retryable: true,
  });

  const handlers: ControlHandlers = {
    attach(peer, h2session, message) {
      const refused = (refusal: RefusedMessage): RefusedMessage => {
        logger.warn({ sandboxId: message.sandboxId, instanceId: message.instanceId, code: refusal.code, remote: peer.remote }, `attach refused: ${refusal.message}`);
        emit({ type: 'refused', sandboxId: message.sandboxId, instanceId: message.instanceId, detail: refusal.code });
        return refusal;
      };
      if (closing) return refused({ kind: 'refused', code: 'shutting-down', message: 'supervisor is shutting down', retryable: true });
      if (message.sandboxId !== peer.sandboxId) {
        return refused({
          kind: 'refused',
          code: 'identity-mismatch',
          message: `attach names sandbox ${message.sandboxId} but the certificate names ${peer.sandboxId}`,
          retryable: false,
        });
      }
      const found = configFor(message.sandboxId);
      if (!found.ok) return refused(found.refusal);
      const sessionId = randomUUID();
      const result = tables.admit(message, found.config, sessionId);
      if (!result.ok) return refused({ kind: 'refused', code: result.code, message: result.message, retryable: true });
      clearTimeout(deadlines.get(key(message.sandboxId, message.instanceId)));
      deadlines.delete(key(message.sandboxId, message.instanceId));
      const previous = result.superseded === undefined ? undefined : live.get(result.superseded.sessionId);
      if (previous !== undefined && result.superseded !== undefined) replaceSession(previous, result.superseded, message, peer, h2session);
      live.set(sessionId, {
        sessionId,
        session: h2session,
        sandboxId: message.sandboxId,
        instanceId: message.instanceId,
        bootId: message.bootId,
        remote: peer.remote,
        watch: undefined,
      });
      logger.info(
        { sandboxId: message.sandboxId, instanceId: message.instanceId, generation: result.admitted.generation, resent: result.admitted.policy !== undefined },
        'boundary attached',
      );
      emit({
        type: 'attached',
        sandboxId: message.sandboxId,
        instanceId: message.instanceId,
        generation: result.admitted.generation,
        detail: result.admitted.policy === undefined ? 'held-policy-current' : 'policy-sent',
      });
      return result.admitted;
    },
    watch(peer, h2session, sessionId, stream) {
      const session = sessionFor(peer, sessionId);
      if (session === undefined || session.session !== h2session) return unknownSession(sessionId);
      session.watch?.end();
      session.watch = stream;
      stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
      stream.on('close', () => {
        if (session.watch === stream) session.watch = undefined;
      });
      // A push that happened between admission and this watch is caught up now.
      const instance = tables.bySession(sessionId);
      const record = tables.sandbox(session.sandboxId);
      if (instance !== undefined && record !== undefined && instance.sentGeneration < record.generation) {
        pushConfig(session, instance, { policy: true, credentials: true, settings: true });
      }
      return undefined;
    },
    status(peer, sessionId, message) {
      const session = sessionFor(peer, sessionId);
      if (session === undefined) return unknownSession(sessionId);
      tables.status(sessionId, message);
      emit({ type: 'status', sandboxId: session.sandboxId, instanceId: session.instanceId, generation: message.generation, detail: message.state });
      return undefined;
    },
    events(peer, sessionId, message) {
      const session = sessionFor(peer, sessionId);
      if (session === undefined) return unknownSession(sessionId);
      tables.events(sessionId, message.events.length, message.dropped);
      logger.debug({ sandboxId: session.sandboxId, count: message.events.length, dropped: message.dropped }, 'events received');
      emit({ type: 'events', sandboxId: session.sandboxId, instanceId: session.instanceId, detail: `${message.events.length} events, ${message.dropped} dropped` });
      return undefined;
    },
    relay(peer, sessionId, relayId, stream, headers) {
      broker.accept(peer.sandboxId ?? '', sessionId, relayId, stream, headers);
    },
    sessionClosed(h2session) {
      for (const session of [...live.values()]) {
        if (session.session !== h2session) continue;
        live.delete(session.sessionId);
        const instance = tables.detach(session.sessionId);
        if (instance === undefined || closing) continue;
        armDeadline(session.sandboxId, session.instanceId);
        logger.info({ sandboxId: session.sandboxId, instanceId: session.instanceId }, 'boundary detached');
        emit({ type: 'detached', sandboxId: session.sandboxId, instanceId: session.instanceId });
      }
    },
  };

  const library = createPolicyLibrary({
    dir: config.policiesDir,
    parsePolicy,
    onChange: () => refreshAll(),
    onError: (file, message) => logger.warn({ file }, `policy file rejected; the last valid version stays: ${message}`),
  });
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

  function openRelay(request: RelayRequest, client: Duplex, head: Buffer): undefined {
    const { sandboxId, instanceId: wanted, target, style } = request;
    const fail = (status: number, error: string, message: string): undefined => {
      client.end(relayErrorReply(style, status, error, message));
    };
    // Map order is attach order, so the last match is the most recently attached instance.
    const candidates = [...live.values()].filter((s) => s.sandboxId === sandboxId && s.watch !== undefined && (wanted === undefined || s.instanceId === wanted));
    const session = candidates.at(-1);
    if (session === undefined) return fail(404, 'not-attached', `no attached instance of sandbox ${sandboxId}${wanted === undefined ? '' : ` named ${wanted}`}`);
    const opened = broker.open({ sandboxId, instanceId: session.instanceId, sessionId: session.sessionId, target, style, client, head });
    if (!opened.ok) return fail(opened.status, 'relay-unavailable', opened.message);
    if (!push(session, opened.push)) {
      broker.closeInstance(sandboxId, session.instanceId);
      fail(502, 'push-failed', 'could not reach the boundary');
    }
  }

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
          onChange: () => refreshAll(),
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
            relay: openRelay,
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
      for (const timer of deadlines.values()) clearTimeout(timer);
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
      if (!instance.attached) armDeadline(sandboxId, instanceId);
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
