// The composition root: createBoundary(config, deps) builds the policy store, interception CA, proxy listener,
// policy DNS and capture, policy file watcher and admin server, starts them in order and closes them in reverse (telemetry last).
// Never reads argv, env or the clock itself: everything from the world arrives in Deps.

import { readFile } from 'node:fs/promises';
import type { SecureContext } from 'node:tls';
import type { Config } from './config.js';
import { type AttachedControl, createAttachedControl } from './control/attached.js';
import { type CredentialSource, createStaticCredentialSource } from './credentials/source.js';
import { advanceEpoch } from './dns/epoch.js';
import { createDnsMetrics } from './dns/metrics.js';
import { createPolicyDns } from './dns/policy-dns.js';
import { createDnsServer, type DnsServer } from './dns/server.js';
import type { DnsEventAggregator } from './dns/event-aggregate.js';
import { BoundaryError, isBoundaryError } from './errors.js';
import { createHostCache, formatAuthority } from './net/host.js';
import { NO_SELF_ADDRESSES, prepareSelfAddresses, type SelfAddress } from './net/ssrf.js';
import { createSyntheticPool, type SyntheticPool } from './net/synthetic.js';
import { createLeafCache, type LeafCache } from './pki/leaf.js';
import { type CertificateAuthority, loadOrCreateInterceptionCa } from './pki/ca.js';
import { writeWorkloadTrustBundle } from './pki/trust-bundle.js';
import { createPolicyStore } from './policy/store.js';
import { createCaptureHandler } from './proxy/capture.js';
import { type CaptureListeners, createCaptureListeners } from './proxy/capture-listeners.js';
import { createAuthorityParsers } from './proxy/context.js';
import { followPolicyFile, type PolicyFileWatcher } from './boundary-policy.js';
import { createDnsEventSink, timedDnsHandler } from './boundary-dns.js';
import { createProxyServer, type ProxyServer } from './proxy/server.js';
import { type AdminServer, createAdminServer, type Readiness } from './telemetry/admin.js';
import { createAuditSink } from './telemetry/audit.js';
import { createDenialRing, recordingDenials } from './telemetry/denials.js';
import { denialsRoute, explainRoute } from './admin-api.js';
import { createPolicyTexts } from './policy/texts.js';
import type { Interception } from './tls/intercept.js';
import { credentialsLoadedEvent, drainedEvent, proxyListeningEvent, stoppingEvent } from './telemetry/lifecycle.js';
import type { Boundary, Deps, DrainOutcome, Transparent, TransparentOptions } from './boundary-types.js';
import { createBoundaryMetrics } from './boundary-metrics.js';
import { composeReadiness } from './boundary-readiness.js';
import { openIdentitySource } from './boundary-identity.js';
import { ADMIN_CLOSE_GRACE_MS, closeWithin, drainWithin } from './boundary-shutdown.js';
import { readPackageVersion } from './version.js';

export function createBoundary(config: Config, deps: Deps): Boundary {
  const { logger, now } = deps;
  // Every denial event passes through here on its way to the log, so /v1/denials sees exactly what was logged.
  const denials = createDenialRing();
  // Process, build, readiness, policy and control-channel metrics; reloads and reconnects are counted from events.
  const boundaryMetrics = createBoundaryMetrics({
    registry: deps.registry,
    version: deps.version ?? readPackageVersion(),
    ready: () => readiness().ready,
    generation: () => store.current().generation,
    control: () => control?.state(),
  });
  const sink = boundaryMetrics.meter(recordingDenials(deps.audit ?? createAuditSink({ logger, now, format: config.logFormat }), denials, now));
  // The texts policies were parsed from, so explain can merge a suggestion into the policy in force.
  const policyTexts = createPolicyTexts();
  const store = createPolicyStore();
  // The request path's memos (net/host.ts HostCache, authority parsers), made once here and handed to every part
  // that parses names or authorities, policy DNS included.
  const hosts = createHostCache();
  const authorities = createAuthorityParsers();
  const transparent = assembleTransparent({
    dnsListen: config.dnsListen,
    syntheticCidr: config.syntheticCidr,
    searchDomains: config.searchDomains,
    tunnelDetection: config.dnsTunnelDetection,
    stateDir: config.stateDir,
    allowLoopback: config.unsafeAllowLoopbackUpstream,
    limits: config.limits,
    store,
    resolver: deps.resolver,
    hosts,
    sink,
    logger,
    registry: deps.registry,
    now,
  });
  let leaves: LeafCache | undefined;
  let caProblem: string | undefined = 'not loaded yet';
  let started = false;
  let closing: Promise<DrainOutcome> | undefined;
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
  let unsubscribeCredentials: (() => void) | undefined;
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
          remember: policyTexts.remember,
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
  const identity = openIdentitySource(config, deps);
  function buildProxy(): ProxyServer {
    return createProxyServer({
      host: config.proxyListen.host,
      port: config.proxyListen.port,
      limits: config.limits,
      store,
      resolver: deps.resolver,
      hosts,
      authorities,
      sink,
      logger,
      registry: deps.registry,
      dial: deps.dial,
      allowLoopback: config.unsafeAllowLoopbackUpstream,
      interception,
      upstreamCaPem,
      otherSelfAddresses: () => otherSelves,
      credentials,
      identity: { mode: config.binaryIdentity, source: identity },
    });
  }

  function readiness(): Readiness {
    const policy = store.current();
    return composeReadiness({
      started,
      closing: closing !== undefined,
      hasPolicy: store.hasPolicy(),
      dnsProblem: transparent.problem(),
      generation: policy.generation,
      policyHash: policy.hash,
      attached: control?.readiness(),
      caProblem,
      identityProblem: proxy?.context.identity?.problem(policy),
    });
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
    const upstream = config.upstreamCa === undefined || upstreamCaPem === undefined ? undefined : { path: config.upstreamCa, pem: upstreamCaPem };
    const contents = await writeWorkloadTrustBundle(path, { upstream, ca });
    // No engine: shorthand lines print the message only for events without one, and this one says where the roots came from.
    sink.emit({ class: 'CONFIG', activity: 'ENABLED', severity: 'INFO', message: `workload trust bundle written to ${path}: ${contents}` });
  }

  const boundary: Boundary = {
    store,
    credentials,
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
      // Before /healthz answers: the agent, started after it, finds the identity server connected (docs/identity.md#privilege).
      await identity?.start();
      proxy = buildProxy();
      const live = proxy;
      unsubscribe = store.subscribe((next) => {
        live.tunnels.reevaluate(next, { allowLoopback: config.unsafeAllowLoopbackUpstream, selfAddresses: NO_SELF_ADDRESSES });
        live.metrics.setPolicies(next.entries.map((entry) => entry.key));
      });
      if (config.policyFile !== undefined) {
        watcher = followPolicyFile({ path: config.policyFile, store, sink, logger, onInvalid: config.onInvalidPolicy, texts: policyTexts });
        await watcher.loadInitial();
        watcher.start();
      }
      await control?.start();
      const api = { store, texts: policyTexts, ring: denials };
      admin = createAdminServer({
        host: config.adminListen.host,
        port: config.adminListen.port,
        registry: deps.registry,
        readiness,
        logger,
        routes: [explainRoute(api), denialsRoute(api)],
      });
      await admin.start();
      refreshSelves();
      await live.start();
      await transparent.start(live.context, [live.address(), admin.address()].map((a) => ({ ip: a.host, port: a.port })));
      refreshSelves();
      // Counts only; a file source's first set, then every new revision from either source.
      if (deps.credentials !== undefined) sink.emit(credentialsLoadedEvent(credentials.current()));
      unsubscribeCredentials = credentials.subscribe((next) => sink.emit(credentialsLoadedEvent(next)));
      sink.emit(proxyListeningEvent(live.address(), store.current()));
      started = true;
    },
    close(cause) {
      closing ??= (async () => {
        const signal = cause?.signal;
        const stopAt = now();
        if (started) sink.emit(stoppingEvent(signal));
        const drained = (async () => {
          watcher?.close();
          await control?.close();
          unsubscribe?.();
          unsubscribeCredentials?.();
          await transparent.close();
          await proxy?.close();
          await identity?.close();
          if (admin !== undefined) await closeWithin(admin, ADMIN_CLOSE_GRACE_MS);
        })();
        // Whatever state a part is stuck in, shutdown ends: past the deadline the rest is destroyed.
        const outcome = await drainWithin(drained, deps.shutdownDrainMs ?? config.shutdownDrainMs);
        const drainMs = Math.max(0, Math.round(now() - stopAt));
        if (outcome === 'forced') {
          logger.error({ drainMs }, 'drain deadline passed: the remaining connections and listeners were destroyed');
          proxy?.forceClose();
          admin?.forceClose();
          // Bounded too: a part that still does not settle is left to the process exit (main.ts).
          void drained.catch((err: unknown) => logger.error({ err }, 'close after the drain deadline failed'));
        }
        if (started) sink.emit(drainedEvent(signal, drainMs));
        await new Promise<void>((resolve) => logger.flush(() => resolve()));
        return outcome;
      })();
      return closing;
    },
  };
  return boundary;
}

/**
 * Policy DNS and transparent capture: boot epoch, synthetic pool, the DNS handler and server, DNS metrics and
 * the capture listeners on the proxy's shared context. Fails closed: a corrupt epoch means no DNS answers and
 * no capture, and readiness says why. Built here, not in a file of its own: only the composition root calls
 * create* on other folders' parts (STYLE.md section 2).
 */
function assembleTransparent(options: TransparentOptions): Transparent {
  const { logger, now, sink } = options;
  let pool: SyntheticPool | undefined;
  let server: DnsServer | undefined;
  let capture: CaptureListeners | undefined;
  let dnsEvents: DnsEventAggregator | undefined;
  let problem: string | undefined = 'dns-starting';
  let closing: Promise<void> | undefined;
  const metrics = createDnsMetrics(options.registry, {
    pool: () => pool,
    listeners: () => capture?.listening().length ?? 0,
    connections: () => capture?.connections() ?? 0,
  });

  return {
    async start(context, selfAddresses) {
      let epoch: number;
      try {
        epoch = await advanceEpoch({ stateDir: options.stateDir });
      } catch (err) {
        if (!isBoundaryError(err) || err.code !== 'DNS_EPOCH_INVALID') throw err;
        problem = `dns-epoch-invalid: ${err.message}`;
        logger.error({ err }, 'synthetic epoch unusable: policy DNS and transparent capture stay off (fail closed)');
        sink.emit({ class: 'CONFIG', activity: 'DISABLED', severity: 'HIGH', engine: 'dns', statusDetail: 'policy_dns_epoch_invalid', message: `Policy DNS disabled: ${err.message}` });
        return;
      }
      const live = createSyntheticPool({ epoch, now, cidr: options.syntheticCidr });
      pool = live;
      const listeners = createCaptureListeners({
        pool: live,
        store: options.store,
        onConnection: createCaptureHandler({ ctx: context, pool: live }),
        limits: options.limits, metrics: context.metrics,
        now,
        sink,
        logger,
      });
      capture = listeners;
      listeners.start();
      // Before DNS answers: a pod whose synthetic range is not routed to lo must not turn ready first.
      await listeners.probe(live.windows[4].slice(0, live.windows[4].indexOf('/')));
      live.subscribe((event) => metrics.mappings.inc({ event: event.kind }));
      dnsEvents = createDnsEventSink({ sink, metrics, decisions: context.metrics, now });
      const dns = createPolicyDns({
        policy: () => options.store.current(),
        resolver: options.resolver,
        pool: live,
        sink: dnsEvents.sink,
        now,
        allowLoopback: options.allowLoopback,
        tunnelDetection: options.tunnelDetection,
        selfAddresses: prepareSelfAddresses(selfAddresses),
        ...(options.hosts === undefined ? {} : { hosts: options.hosts }),
        ...(options.searchDomains === undefined ? {} : { searchDomains: options.searchDomains }),
      });
      const handler = timedDnsHandler(dns.handler, { clock: context.metrics, answerSeconds: metrics.answerSeconds, settled: () => listeners.settled() });
      server = createDnsServer({
        host: options.dnsListen.host,
        port: options.dnsListen.port,
        handler,
        onTick: () => {
          live.sweep();
          listeners.sweep();
          // Writes the held-back counts of rate-limit, tunnelling and mapping refusals once per interval.
          dns.tick();
        },
        onError: (err) => logger.warn({ err }, 'policy DNS error'),
      });
      await server.start();
      problem = undefined;
      const bound = server.address();
      sink.emit({
        class: 'CONFIG',
        activity: 'READY',
        severity: 'INFO',
        engine: 'dns',
        dst: { ip: bound.host, port: bound.port },
        message: `Policy DNS listening on ${formatAuthority(bound.host, bound.port)} (udp, tcp); epoch ${epoch}, synthetic window ${live.windows[4]}`,
        unmapped: { epoch, synthetic_window: live.windows[4] },
      });
    },
    close() {
      closing ??= (async () => {
        problem ??= 'dns-closed';
        await server?.close();
        // After the listener, before telemetry: the last interval's counts are written.
        dnsEvents?.close();
        await capture?.close();
      })();
      return closing;
    },
    problem: () => problem ?? capture?.problem(),
    dnsAddress: () => server?.address(),
    pool: () => pool,
    listening: () => capture?.listening() ?? [],
  };
}
