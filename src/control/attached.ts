// Attached mode for the composition root: follows the --tls-dir folder (tls-source.ts), runs the control client
// against the boundary's own policy store, credential source and audit sink, and says what /readyz adds.
// Never decides a request and never resolves names itself (the lookup arrives from main/run).

import type { Registry } from 'prom-client';
import type { ProviderInput } from '../credentials/set.js';
import { type ControlClient, type ControlClientOptions, type ControlState, createControlClient, newBootId } from './client.js';
import type { ControlLookup } from './dial.js';
import type { RelayTarget } from './messages.js';
import { type ControlReadiness, controlReadiness } from './readiness.js';
import { providersFromWire } from './wire-credentials.js';
import { registrationsFromWire } from './wire-middleware.js';
import type { MiddlewareRegistry } from '../middleware/registry.js';
import { CERT_EXPIRED_REASON, CERT_EXPIRING_WARNING, type ControlCertificateStatus, type ControlTlsSource, createControlTlsSource } from './tls-source.js';
import { createPolicyCompiler } from '../policy/parse-off-thread.js';
import { reloadIssues } from '../policy/store.js';
import type { Policy } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';

/** Reported on attach when the caller names no version. */
const DEFAULT_BOUNDARY_VERSION = '0.1.0';

/** The attached-mode part of Config: present exactly when `--supervisor` is given. */
export interface AttachedSettings {
  /** Host may be a DNS name (resolved per attempt through the injected lookup) or an IP literal. */
  readonly supervisor: { readonly host: string; readonly port: number };
  /** DIR/ca.pem (supervisor's CA), DIR/cert.pem and DIR/key.pem (this sandbox's client identity). */
  readonly tlsDir: string;
  readonly sandboxId: string;
  /**
   * Stable across restarts of the same pod, so a restart supersedes its own old session. Two live processes
   * sharing it are told apart by boot id: the older one is superseded and stops (client.ts).
   */
  readonly instanceId: string;
  readonly relayAllow: readonly RelayTarget[];
}

export interface AttachedControlOptions {
  readonly settings: AttachedSettings;
  readonly store: { current(): Policy; hasPolicy(): boolean; swap(policy: Policy, generation?: number): Policy };
  readonly sink: AuditSink;
  readonly logger: Logger;
  readonly now: () => number;
  /** Carries boundary_control_certificate_expiry_seconds. */
  readonly registry: Registry;
  /** Where pushed credentials go (credentials/source.ts's StaticCredentialSource), token grants as definitions. */
  readonly credentials?: { replace(providers: readonly ProviderInput[]): unknown } | undefined;
  /**
   * The root's middleware registry: the supervisor's registrations replace its services, a pushed policy is parsed
   * knowing their names and applied only once they validated its entries (as a file reload is).
   */
  readonly middleware?: Pick<MiddlewareRegistry, 'names' | 'admit' | 'replace'> | undefined;
  readonly lookup?: ControlLookup | undefined;
  readonly version?: string | undefined;
  /** This process start's id on every attach (the supervisor tells two live processes apart by it); fresh when absent. */
  readonly bootId?: string | undefined;
  /** Whether transparent capture can be switched on while running (see policy/store.ts reloadIssues). */
  readonly liveCapture?: boolean | undefined;
  /** Told of each pushed policy with its text (the root's PolicyTexts.remember, for explain). */
  readonly remember?: ((policy: Policy, text: string) => void) | undefined;
  /** Tests only: faster backoff and timers. */
  readonly tuning?: Pick<ControlClientOptions, 'backoff' | 'timeouts'> | undefined;
  readonly onState?: ((state: ControlState) => void) | undefined;
}

/** What the root merges into its own readiness. */
export interface AttachedReadiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  readonly supervisor: string;
  readonly lastError: { readonly kind: string; readonly message: string; readonly at: string } | undefined;
  /** The client certificate in use; undefined before start(). */
  readonly certificate: ControlCertificateStatus | undefined;
  /** Problems that do not make the boundary not-ready (a certificate inside its expiry warning window). */
  readonly warnings: readonly string[];
  /** Failed attempts since the last healthy session, and when and why the next attempt (readiness.ts); undefined before start(). */
  readonly reconnect?: ControlReadiness['reconnect'];
}

export interface AttachedControl {
  /** Reads and checks the TLS folder (PKI_INVALID listing every problem), follows it, and starts attaching in the background. */
  start(): Promise<void>;
  close(): Promise<void>;
  readiness(): AttachedReadiness;
  /** Undefined before start(). */
  state(): ControlState | undefined;
}

function hasSubscribe(sink: AuditSink): sink is AuditSink & { subscribe(listener: (event: object) => void): () => void } {
  return typeof (sink as { subscribe?: unknown }).subscribe === 'function';
}

export function createAttachedControl(options: AttachedControlOptions): AttachedControl {
  const { settings, store, sink, logger, now, credentials: target } = options;
  const supervisorText = `${settings.supervisor.host}:${settings.supervisor.port}`;
  const tls: ControlTlsSource = createControlTlsSource({ dir: settings.tlsDir, sandboxId: settings.sandboxId, now, logger, sink, registry: options.registry });
  let client: ControlClient | undefined;
  let closed = false;
  // Pushes compile as file reloads do (policy/parse-off-thread.ts: in place when small, else on a worker started
  // per compile and ended when idle or closed); the old generation serves until the new one is built.
  const compiler = createPolicyCompiler();
  const middleware = options.middleware;
  async function parsePushed(text: string, parseOptions?: { source?: string }): Promise<Policy> {
    const policy = await compiler.parse(text, middleware === undefined ? parseOptions : { ...parseOptions, middlewareServices: middleware.names() });
    await middleware?.admit(policy);
    options.remember?.(policy, text);
    return policy;
  }

  // The first delivered policy is the attached boundary's initial load, not a reload: the V15 check
  // applies only once something is in force.
  function preflight(previous: Policy, next: Policy) {
    if (!store.hasPolicy()) return [];
    return reloadIssues(previous, next, { liveCapture: options.liveCapture ?? false });
  }

  return {
    async start() {
      if (client !== undefined || closed) return;
      // An expired certificate does not stop the start: cert-manager may renew it any moment, and /readyz says so.
      await tls.start();
      // close() may have run while the folder was read; its tls.close() came before the watch existed.
      if (closed) {
        tls.close();
        return;
      }
      client = createControlClient({
        address: settings.supervisor,
        tls: tls.provide,
        sandboxId: settings.sandboxId,
        instanceId: settings.instanceId,
        bootId: options.bootId ?? newBootId(),
        version: options.version ?? DEFAULT_BOUNDARY_VERSION,
        now,
        logger,
        sink,
        store,
        credentials: target === undefined ? undefined : { replace: (wire) => target.replace(providersFromWire(wire)) },
        middleware: middleware === undefined ? undefined : { replace: (wire) => middleware.replace(registrationsFromWire(wire, `the registrations of supervisor ${supervisorText}`)) },
        relayAllow: settings.relayAllow,
        lookup: options.lookup,
        events: hasSubscribe(sink) ? sink : undefined,
        preflight,
        parsePolicy: parsePushed,
        onState: options.onState,
        ...options.tuning,
      });
      await client.start();
    },
    async close() {
      closed = true;
      // The client abandons a compile in flight first; then the worker is ended, so shutdown never waits for it.
      await client?.close();
      await compiler.close();
      tls.close();
    },
    readiness() {
      const certificate = tls.status();
      const warnings = certificate?.state === 'expiring' ? [`${CERT_EXPIRING_WARNING}: client certificate expires at ${certificate.notAfter} (${certificate.daysLeft} days left)`] : [];
      const expired = certificate?.state === 'expired' ? [CERT_EXPIRED_REASON] : [];
      if (client === undefined) {
        return { ready: false, reasons: [`not attached yet to supervisor ${supervisorText}`], supervisor: 'idle', lastError: undefined, certificate, warnings };
      }
      const r = controlReadiness(client.state());
      const lastError = r.lastError === undefined ? undefined : { kind: r.lastError.kind, message: r.lastError.message, at: new Date(r.lastError.at).toISOString() };
      const reasons = [...expired, ...r.reasons];
      return { ready: reasons.length === 0, reasons, supervisor: r.supervisor, lastError, certificate, warnings, reconnect: r.reconnect };
    },
    state: () => client?.state(),
  };
}
