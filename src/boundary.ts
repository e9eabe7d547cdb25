// The composition root: createBoundary(config, deps) builds the policy store, interception CA, proxy listener,
// policy file watcher and admin server, starts them in order and closes them in reverse (telemetry last).
// Never reads argv, env or the clock itself: everything from the world arrives in Deps.

import { readFile } from 'node:fs/promises';
import type { SecureContext } from 'node:tls';
import type { Registry } from 'prom-client';
import type { Config } from './config.js';
import { type AttachedControl, type AttachedControlOptions, createAttachedControl } from './control/attached.js';
import type { ControlLookup } from './control/dial.js';
import { type CredentialSource, createStaticCredentialSource } from './credentials/source.js';
import { BoundaryError } from './errors.js';
import type { Resolver } from './net/resolver.js';
import type { SelfAddress } from './net/ssrf.js';
import { createLeafCache, type LeafCache } from './pki/leaf.js';
import { type CertificateAuthority, loadOrCreateInterceptionCa } from './pki/ca.js';
import { buildTrustBundle, certificateBlocks, loadSystemRoots, writeCaBundle } from './pki/trust-bundle.js';
import { createPolicyStore, type PolicyStore } from './policy/store.js';
import type { Interception } from './proxy/context.js';
import type { DialFunction } from './proxy/dial.js';
import { createPolicyFileWatcher, type PolicyFileWatcher } from './proxy/policy-file.js';
import { createProxyServer, type ProxyServer } from './proxy/server.js';
import { type AdminServer, createAdminServer, type Readiness } from './telemetry/admin.js';
import { createAuditSink } from './telemetry/audit.js';
import type { AuditSink } from './telemetry/event.js';
import type { Logger } from './telemetry/logger.js';
import { createTransparent, type Transparent } from './transparent.js';

export interface Deps {
  readonly resolver: Resolver;
  /** Epoch ms: certificate validity, event times. */
  readonly now: () => number;
  readonly logger: Logger;
  /** Never the global default registry. */
  readonly registry: Registry;
  /** Defaults to an audit sink on `logger` in `config.logFormat`. */
  readonly audit?: AuditSink;
  /** Replaces net.connect for upstream dials (tests count dials through it). */
  readonly dial?: DialFunction;
  /** Standalone: the watched `--credentials` file source (run.ts builds it). Default: the source the
   *  supervisor pushes into (attached mode), empty until a push arrives. */
  readonly credentials?: CredentialSource;
  /** Attached mode: supervisor name -> addresses (main/run passes the system resolver; tests a fake). */
  readonly controlLookup?: ControlLookup;
  /** Reported to the supervisor on attach. */
  readonly version?: string;
  /** Attached mode: this process start's id (main/run may pass one; fresh per createBoundary otherwise). */
  readonly bootId?: string;
  /** Tests only: faster control backoff/timers and a listener for control state changes. */
  readonly controlTuning?: Pick<AttachedControlOptions, 'tuning' | 'onState'>;
}

export interface Boundary {
  start(): Promise<void>;
  /** Idempotent: listeners stop, in-flight requests drain, tunnels close, telemetry last. */
  close(): Promise<void>;
  proxyAddress(): { host: string; port: number };
  adminAddress(): { host: string; port: number };
  readiness(): Readiness;
  /** Re-reads the policy file now (the watcher does this on change). */
  reloadPolicy(): Promise<void>;
  readonly store: PolicyStore;
  readonly proxy: ProxyServer;
  /** Policy DNS and transparent capture. */
  readonly transparent: Transparent;
}

export function createBoundary(config: Config, deps: Deps): Boundary {
  const { logger, now } = deps;
  const sink = deps.audit ?? createAuditSink({ logger, now, format: config.logFormat });
  const store = createPolicyStore();
  const transparent = createTransparent({
    dnsListen: config.dnsListen,
    syntheticCidr: config.syntheticCidr,
    searchDomains: config.searchDomains,
    stateDir: config.stateDir,
    allowLoopback: config.unsafeAllowLoopbackUpstream,
    maxConnections: config.limits.maxConnections,
    store,
    resolver: deps.resolver,
    sink,
    logger,
    registry: deps.registry,
    now,
  });
  let leaves: LeafCache | undefined;
  let caProblem: string | undefined = 'not loaded yet';
  let started = false;
  let closing: Promise<void> | undefined;
  let admin: AdminServer | undefined;
  // The admin and DNS listeners are never upstream targets. Their addresses are fixed once they listen, so
  // the list is rebuilt after each start instead of calling Server.address() on every request.
  let otherSelves: readonly SelfAddress[] = [];
  function refreshSelves(): void {
    const dns = transparent.dnsAddress();
    otherSelves = Object.freeze([
      ...(admin === undefined ? [] : [{ ip: admin.address().host, port: admin.address().port }]),
      ...(dns === undefined ? [] : [{ ip: dns.host, port: dns.port }]),
    ]);
  }
  let watcher: PolicyFileWatcher | undefined;
  let unsubscribe: (() => void) | undefined;
  // Every placeholder is refused until a source holds the key; attached mode pushes into this one.
  const pushedCredentials = createStaticCredentialSource({ providers: [] });
  const credentials: CredentialSource = deps.credentials ?? pushedCredentials;
  // Attached mode: the supervisor feeds the same store (and a static credential source) as the files do
  // in standalone mode; until its first policy is effective the store holds deny-all.
  const control: AttachedControl | undefined =
    config.attached === undefined
      ? undefined
      : createAttachedControl({
          settings: config.attached,
          store,
          sink,
          logger,
          now,
          registry: deps.registry,
          credentials: pushedCredentials,
          lookup: deps.controlLookup,
          version: deps.version,
          bootId: deps.bootId,
          // Capture listeners follow the store (proxy/capture-listeners.ts): a first tcp endpoint needs no restart.
          liveCapture: true,
          ...deps.controlTuning,
        });

  const interception: Interception = {
    ready: () => leaves !== undefined,
    contextFor(host: string): Promise<SecureContext> {
      if (leaves === undefined) return Promise.reject(new BoundaryError('PKI_INVALID', `interception CA unavailable: ${caProblem}`));
      return leaves.secureContextFor(host);
    },
  };

  let upstreamCaPem: string | undefined;
  let proxy: ProxyServer | undefined;

  function buildProxy(): ProxyServer {
    return createProxyServer({
      host: config.proxyListen.host,
      port: config.proxyListen.port,
      limits: config.limits,
      store,
      resolver: deps.resolver,
      sink,
      logger,
      registry: deps.registry,
      dial: deps.dial,
      allowLoopback: config.unsafeAllowLoopbackUpstream,
      interception,
      upstreamCaPem,
      otherSelfAddresses: () => otherSelves,
      credentials,
    });
  }

  function readiness(): Readiness {
    const reasons: string[] = [];
    if (!started) reasons.push('starting');
    if (closing !== undefined) reasons.push('closing');
    if (!store.hasPolicy()) reasons.push('no-policy');
    const dnsProblem = transparent.problem();
    if (dnsProblem !== undefined && started) reasons.push(dnsProblem);
    const policy = store.current();
    const attached = control?.readiness();
    if (attached !== undefined) reasons.push(...attached.reasons);
    return {
      ready: reasons.length === 0,
      reasons,
      generation: policy.generation,
      policyHash: policy.hash,
      ...(attached === undefined
        ? {}
        : {
            supervisor: attached.supervisor,
            lastError: attached.lastError,
            reconnect: attached.reconnect,
            controlCertificate: attached.certificate,
            warnings: attached.warnings,
          }),
      interception: caProblem === undefined ? 'ready' : `unavailable: ${caProblem}`,
    };
  }

  async function loadCa(): Promise<CertificateAuthority | undefined> {
    try {
      const ca = await loadOrCreateInterceptionCa({
        stateDir: config.stateDir,
        ...(config.caCert === undefined ? {} : { certPath: config.caCert }),
        ...(config.caKey === undefined ? {} : { keyPath: config.caKey }),
        ...(config.caOut === undefined ? {} : { outPath: config.caOut }),
        now,
      });
      leaves = createLeafCache({ ca, now });
      caProblem = undefined;
      sink.emit({ class: 'CONFIG', activity: 'ENABLED', severity: 'INFO', engine: 'tls', message: `TLS interception CA ready: ${ca.subject}` });
      return ca;
    } catch (err) {
      // Fail closed for inspected routes only (503 tls_termination_unavailable); L4 routes keep working.
      caProblem = err instanceof Error ? err.message : String(err);
      logger.error({ err }, 'interception CA unavailable; inspected CONNECTs will get 503');
      return undefined;
    }
  }

  /** --ca-bundle-out: only with a loaded CA, since a bundle without it would fail every inspected connection. */
  async function writeBundle(ca: CertificateAuthority | undefined, path: string): Promise<void> {
    if (ca === undefined) {
      logger.error({ path }, 'workload trust bundle not written: the interception CA is unavailable');
      return;
    }
    const system = await loadSystemRoots();
    const upstream = config.upstreamCa === undefined || upstreamCaPem === undefined ? undefined : { path: config.upstreamCa, pem: upstreamCaPem };
    try {
      await writeCaBundle(path, buildTrustBundle({ system, upstream, ca }));
    } catch (err) {
      throw new BoundaryError('CONFIG_INVALID', `cannot write --ca-bundle-out ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
    }
    const anchors = upstream === undefined ? '' : ` + ${certificateBlocks(upstream.pem).length} from --upstream-ca`;
    // No engine: shorthand lines print the message only for events without one, and this one says where the roots came from.
    sink.emit({
      class: 'CONFIG',
      activity: 'ENABLED',
      severity: 'INFO',
      message: `workload trust bundle written to ${path}: ${system.certificates.length} system roots from ${system.source}${anchors} + the interception CA`,
    });
  }

  const boundary: Boundary = {
    store,
    transparent,
    get proxy(): ProxyServer {
      if (proxy === undefined) throw new BoundaryError('CONFIG_INVALID', 'the boundary has not been started');
      return proxy;
    },
    proxyAddress: () => proxy?.address() ?? { ...config.proxyListen },
    adminAddress: () => admin?.address() ?? { ...config.adminListen },
    readiness,
    reloadPolicy: () => watcher?.reload() ?? Promise.resolve(),
    async start() {
      if (config.upstreamCa !== undefined) {
        try {
          upstreamCaPem = await readFile(config.upstreamCa, 'utf8');
        } catch (err) {
          throw new BoundaryError('CONFIG_INVALID', `cannot read --upstream-ca ${config.upstreamCa}`, { cause: err });
        }
      }
      if (config.unsafeAllowLoopbackUpstream) {
        logger.warn('--unsafe-allow-loopback-upstream is set: upstreams on 127.0.0.0/8 and ::1 are reachable through the proxy');
      }
      // The CA file (--ca-out) and the bundle are written before the admin listener starts, so a startupProbe
      // that saw /healthz answer guarantees both exist for the workload.
      const ca = await loadCa();
      if (config.caBundleOut !== undefined) await writeBundle(ca, config.caBundleOut);
      proxy = buildProxy();
      const live = proxy;
      unsubscribe = store.subscribe((next) => {
        live.tunnels.reevaluate(next, { allowLoopback: config.unsafeAllowLoopbackUpstream, selfAddresses: [] });
      });
      if (config.policyFile !== undefined) {
        watcher = createPolicyFileWatcher({ path: config.policyFile, store, sink, logger, onInvalid: config.onInvalidPolicy });
        await watcher.loadInitial();
        watcher.start();
      }
      await control?.start();
      admin = createAdminServer({ host: config.adminListen.host, port: config.adminListen.port, registry: deps.registry, readiness, logger });
      await admin.start();
      refreshSelves();
      await live.start();
      await transparent.start(live.context, [live.address(), admin.address()].map((a) => ({ ip: a.host, port: a.port })));
      refreshSelves();
      const bound = live.address();
      sink.emit({
        class: 'NET',
        activity: 'LISTEN',
        severity: 'INFO',
        dst: { ip: bound.host, port: bound.port },
        message: `proxy listening on ${bound.host}:${bound.port}`,
        generation: store.current().generation,
        policyHash: store.current().hash,
      });
      started = true;
    },
    close() {
      closing ??= (async () => {
        watcher?.close();
        await control?.close();
        unsubscribe?.();
        await transparent.close();
        await proxy?.close();
        await admin?.close();
        await new Promise<void>((resolve) => logger.flush(() => resolve()));
      })();
      return closing;
    },
  };
  return boundary;
}
