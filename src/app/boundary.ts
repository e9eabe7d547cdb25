// The composition root: createBoundary(config, deps) builds the policy store, interception CA, proxy listener,
// policy DNS and capture, policy file watcher and admin server, starts them in order and closes them in reverse (telemetry last).
// Never reads argv, env or the clock itself: everything from the world arrives in Deps.

import { readFile } from 'node:fs/promises';
import type { SecureContext } from 'node:tls';
import type { Config } from './config.js';
import type { AttachedControl } from '../control/attached.js';
import { type CredentialSource, createStaticCredentialSource } from '../credentials/source.js';
import { BoundaryError } from '../shared/errors.js';
import { PEER_POLICY_HEADERS } from '../http1/headers.js';
import { createHostCache } from '../net/host.js';
import { NO_SELF_ADDRESSES, type SelfAddress } from '../net/ssrf.js';
import { createLeafCache, type LeafCache } from '../pki/leaf.js';
import { type CertificateAuthority, loadOrCreateInterceptionCa } from '../pki/ca.js';
import { writeWorkloadTrustBundle } from '../pki/trust-bundle.js';
import { createPolicyStore } from '../policy/store.js';
import { createAuthorityParsers } from '../proxy/context.js';
import { followPolicyFile, type PolicyFileWatcher } from './boundary-policy.js';
import { createBoundaryLookups } from './boundary-dns.js';
import { createProxyServer, type ProxyServer } from '../proxy/server.js';
import { type AdminServer, createAdminServer, type Readiness } from '../telemetry/admin.js';
import { createAuditSink } from '../telemetry/audit.js';
import { createDenialRing, recordingDenials } from '../telemetry/denials.js';
import { createEventAggregator } from '../telemetry/event-aggregate.js';
import { isParserRefusal, MAX_PARSER_EVENT_KEYS, PARSER_EVENT_INTERVAL_MS, parserRefusalKey } from '../chain/parser-refusal.js';
import { dialPinned } from '../chain/dial.js';
import { GLOBAL_TIMERS } from '../shared/timers.js';
import { denialsRoute, explainRoute } from './admin-api.js';
import { createPolicyTexts } from '../policy/texts.js';
import type { Interception } from '../tls/intercept.js';
import { credentialsLoadedEvent, drainedEvent, proxyListeningEvent, stoppingEvent } from '../telemetry/lifecycle.js';
import type { Boundary, Deps, DrainOutcome } from './boundary-types.js';
import { assembleTransparent } from './boundary-transparent.js';
import { createBoundaryMetrics } from './boundary-metrics.js';
import { logLinesDropped } from '../telemetry/logger.js';
import { composeReadiness } from './boundary-readiness.js';
import { openIdentitySource } from './boundary-identity.js';
import { ADMIN_CLOSE_GRACE_MS, closeWithin, drainWithin } from './boundary-shutdown.js';
import { readPackageVersion } from './version.js';
import { createMiddlewareRegistry } from '../middleware/registry.js';
import { createGrantingSource } from '../grants/source.js';
import { openUpstreamProxy } from './boundary-upstream-proxy.js';
import { loadRegistrationsFile } from '../middleware/registrations.js';

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
    logLinesDropped: () => logLinesDropped(logger),
  });
  const sink = boundaryMetrics.meter(recordingDenials(deps.audit ?? createAuditSink({ logger, now, format: config.logFormat }), denials, now));
  // Requests a parser refused are written once per source, kind and destination per interval (docs/events.md#parser-refusals).
  const parserEvents = createEventAggregator({
    sink,
    now,
    timers: GLOBAL_TIMERS,
    intervalMs: PARSER_EVENT_INTERVAL_MS,
    maxKeys: MAX_PARSER_EVENT_KEYS,
    aggregated: isParserRefusal,
    keyOf: parserRefusalKey,
    perSource: true,
  });
  // The texts policies were parsed from, so explain can merge a suggestion into the policy in force.
  const policyTexts = createPolicyTexts();
  const store = createPolicyStore();
  // The request path's memos (net/host.ts HostCache, authority parsers), made once here and handed to every part
  // that parses names or authorities, policy DNS included.
  const hosts = createHostCache();
  const authorities = createAuthorityParsers();
  // Every upstream lookup, policy DNS's and the proxy's, passes this one gate (docs/dns.md#the-lookup-gate).
  const gate = createBoundaryLookups({ config, resolver: deps.resolver, now, policy: () => store.current(), sink, registry: deps.registry });
  const lookups = gate.lookups;
  const transparent = assembleTransparent({
    dnsListen: config.dnsListen,
    dnsWorkers: config.dnsWorkers,
    syntheticCidr: config.syntheticCidr,
    capture: config.capture,
    searchDomains: config.searchDomains,
    stateDir: config.stateDir,
    allowLoopback: config.unsafeAllowLoopbackUpstream,
    limits: config.limits,
    store,
    lookups,
    lookupMetrics: gate.metrics,
    hosts,
    ...(deps.ownQueries === undefined ? {} : { ownQueries: deps.ownQueries }),
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
  // The token grants of the file, or the supervisor's (attached mode), are fetched and kept fresh here, on the injected timers (docs/credentials.md#token-grants).
  const grants = createGrantingSource(deps.credentials ?? pushedCredentials, {
    timers: deps.timers ?? GLOBAL_TIMERS,
    logger,
    registry: deps.registry,
    client: {
      resolver: deps.resolver,
      timers: deps.timers ?? GLOBAL_TIMERS,
      extraCaPem: () => upstreamCaPem,
      allowLoopback: config.unsafeAllowLoopbackUpstream,
      selfAddresses: () => [...(proxy === undefined ? [] : [{ ip: proxy.address().host, port: proxy.address().port }]), ...otherSelves],
      // The token endpoint is dialled as every upstream is: pinned, and through --upstream-proxy when set.
      connect: (addresses, port, name) => dialPinned({ addresses, port, name, dial: upstreamDial }),
    },
  });
  const credentials: CredentialSource = grants;
  // Network middlewares: the built-ins, and the services --middleware-config registers (docs/running.md#middleware-services).
  const middleware = deps.middleware ?? createMiddlewareRegistry({ sink, version: deps.version ?? readPackageVersion(), metrics: deps.registry, now, credentials });
  // Attached mode: the supervisor feeds the same store (and a static credential source) as the files do
  // in standalone mode; until its first policy is effective the store holds deny-all.
  let control: AttachedControl | undefined;
  /** Attached mode only: a standalone sidecar never loads the control channel's modules (idle heap, issue 15). */
  async function openControl(settings: NonNullable<typeof config.attached>): Promise<AttachedControl> {
    const { createAttachedControl } = await import('../control/attached.js');
    return createAttachedControl({
      settings,
      store,
      sink,
      logger,
      now,
      registry: deps.registry,
      credentials: pushedCredentials,
      middleware,
      lookup: deps.controlLookup,
      version: deps.version,
      bootId: deps.bootId,
      // Capture listeners follow the store (proxy/capture-listeners.ts): a first tcp endpoint needs no restart.
      liveCapture: true,
      remember: policyTexts.remember,
      ...deps.controlTuning,
    });
  }

  const interception: Interception = {
    ready: () => leaves !== undefined,
    contextFor(host: string): Promise<SecureContext> {
      if (leaves === undefined) return Promise.reject(new BoundaryError('PKI_INVALID', `interception CA unavailable: ${caProblem}`));
      return leaves.secureContextFor(host);
    },
  };
  let upstreamCaPem: string | undefined;
  let upstreamDial = deps.dial;
  let proxy: ProxyServer | undefined;
  const identity = openIdentitySource(config, deps);
  function buildProxy(): ProxyServer {
    return createProxyServer({
      host: config.proxyListen.host,
      port: config.proxyListen.port,
      limits: config.limits,
      store,
      lookups,
      hosts,
      authorities,
      sink: parserEvents.sink,
      logger,
      registry: deps.registry,
      dial: upstreamDial,
      allowLoopback: config.unsafeAllowLoopbackUpstream,
      interception,
      upstreamCaPem,
      otherSelfAddresses: () => otherSelves,
      credentials,
      now,
      placeholderFamily: config.placeholderFamily,
      peerPolicyHeader: PEER_POLICY_HEADERS[config.peerPolicyHeader],
      identity: { mode: config.binaryIdentity, source: identity },
      // The network middlewares and the capacity they share.
      middleware,
    });
  }

  function readiness(): Readiness {
    const policy = store.current();
    return composeReadiness({
      started,
      closing: closing !== undefined,
      hasPolicy: store.hasPolicy(),
      dnsProblem: transparent.problem(),
      capture: transparent.capture(),
      generation: policy.generation,
      policyHash: policy.hash,
      attached: control?.readiness(),
      caProblem,
      identityProblem: proxy?.context.identity?.problem(policy),
      tokenGrants: grants.statuses(),
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
    lookups,
    get proxy(): ProxyServer {
      if (proxy === undefined) throw new BoundaryError('CONFIG_INVALID', 'the boundary has not been started');
      return proxy;
    },
    proxyAddress: () => proxy?.address() ?? { ...config.proxyListen },
    adminAddress: () => admin?.address() ?? { ...config.adminListen },
    readiness,
    reloadPolicy: () => watcher?.reload() ?? Promise.resolve(),
    async start() {
      // Before anything listens: a refused option leaves nothing bound and no /healthz answered.
      await transparent.preflight();
      if (config.upstreamCa !== undefined) {
        try {
          upstreamCaPem = await readFile(config.upstreamCa, 'utf8');
        } catch (err) {
          throw new BoundaryError('CONFIG_INVALID', `cannot read --upstream-ca ${config.upstreamCa}`, { cause: err });
        }
      }
      upstreamDial = await openUpstreamProxy(config.upstreamProxy, { dial: deps.dial, resolver: deps.resolver, logger });
      if (config.unsafeAllowLoopbackUpstream) {
        logger.warn('--unsafe-allow-loopback-upstream is set: upstreams on 127.0.0.0/8 and ::1 are reachable through the proxy');
      }
      // The CA file (--ca-out) and the bundle are written before the admin listener starts, so a startupProbe
      // that saw /healthz answer guarantees both exist for the workload.
      const ca = await loadCa();
      if (config.caBundleOut !== undefined) await writeBundle(ca, config.caBundleOut);
      // After --upstream-ca is read: token endpoints are verified against it too.
      grants.start();
      // Before /healthz answers: the agent, started after it, finds the identity server connected (docs/identity.md#privilege).
      await identity?.start();
      proxy = buildProxy();
      const live = proxy;
      unsubscribe = store.subscribe((next) => {
        live.tunnels.reevaluate(next, { allowLoopback: config.unsafeAllowLoopbackUpstream, selfAddresses: NO_SELF_ADDRESSES });
        live.metrics.setPolicies(next.entries.map((entry) => entry.key));
      });
      // Before the first policy: it is parsed knowing the registered names, and each entry's config is validated by its service.
      if (config.middlewareConfig !== undefined) await middleware.replace(await loadRegistrationsFile(config.middlewareConfig));
      if (config.policyFile !== undefined) {
        watcher = followPolicyFile({ path: config.policyFile, store, sink, logger, onInvalid: config.onInvalidPolicy, texts: policyTexts, middleware });
        await watcher.loadInitial();
        watcher.start();
      }
      if (config.attached !== undefined) {
        control = await openControl(config.attached);
        // close() may have run while the modules loaded; it found no control to close.
        if (closing !== undefined) return;
        await control.start();
      }
      // Explain answers as this run decides: its always-blocked destinations and its binary-identity mode.
      const api = { store, texts: policyTexts, ring: denials, permanent: live.permanent, binaryIdentity: config.binaryIdentity };
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
          await grants.close();
          await transparent.close();
          await proxy?.close();
          middleware.close();
          // No parser is left to refuse anything: the held-back counts are written before telemetry closes.
          parserEvents.close();
          await identity?.close();
          if (admin !== undefined) await closeWithin(admin, ADMIN_CLOSE_GRACE_MS);
          // No lookup is left to ask: the held-back counts are written before telemetry closes.
          lookups.flush();
        })();
        // Whatever state a part is stuck in, shutdown ends: past the deadline the rest is destroyed.
        const outcome = await drainWithin(drained, deps.shutdownDrainMs ?? config.shutdownDrainMs);
        const drainMs = Math.max(0, Math.round(now() - stopAt));
        if (outcome === 'forced') {
          logger.error({ drainMs }, 'drain deadline passed: the remaining connections and listeners were destroyed');
          proxy?.forceClose();
          admin?.forceClose();
          parserEvents.close();
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

