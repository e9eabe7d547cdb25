// The composition root: createBoundary(config, deps) builds the policy store, interception CA, proxy listener,
// policy DNS and capture, policy file watcher and admin server, starts them in order and closes them in reverse (telemetry last).
// Never reads argv, env or the clock itself: everything from the world arrives in Deps.

import { readFile } from 'node:fs/promises';
import type { SecureContext } from 'node:tls';
import type { Config, } from './config.js';
import { type AttachedControl, createAttachedControl } from './control/attached.js';
import { type CredentialSource, createStaticCredentialSource } from './credentials/source.js';
import { advanceEpoch } from './dns/epoch.js';
import { createDnsMetrics, meteredDnsSink } from './dns/metrics.js';
import { createPolicyDns } from './dns/policy-dns.js';
import { createDnsServer, type DnsHandler, type DnsServer } from './dns/server.js';
import { BoundaryError, isBoundaryError } from './errors.js';
import { createHostCache, formatAuthority, } from './net/host.js';
import { NO_SELF_ADDRESSES, prepareSelfAddresses, type SelfAddress } from './net/ssrf.js';
import { createSyntheticPool, type SyntheticPool } from './net/synthetic.js';
import { createLeafCache, type LeafCache } from './pki/leaf.js';
import { type CertificateAuthority, loadOrCreateInterceptionCa } from './pki/ca.js';
import { buildTrustBundle, certificateBlocks, loadSystemRoots, writeCaBundle } from './pki/trust-bundle.js';
import { createPolicyStore, } from './policy/store.js';
import { createCaptureHandler } from './proxy/capture.js';
import { type CaptureListeners, createCaptureListeners } from './proxy/capture-listeners.js';
import { createAuthorityParsers } from './proxy/context.js';
import { createPolicyFileWatcher, type PolicyFileWatcher } from './policy/policy-file.js';
import { createProxyServer, type ProxyServer } from './proxy/server.js';
import { type AdminServer, createAdminServer, type Readiness } from './telemetry/admin.js';
import { createAuditSink } from './telemetry/audit.js';
import type { Interception } from './tls/intercept.js';
import type { Boundary, Deps, Transparent, TransparentOptions } from './boundary-types.js';

export function createBoundary(config: Config, deps: Deps): Boundary {
  const { logger, now } = deps;
  const sink = deps.audit ?? createAuditSink({ logger, now, format: config.logFormat });
  const store = createPolicyStore();
  // One host-normalisation memo for the request path and policy DNS (net/host.ts HostCache).
  // The request path's memos, made once here and handed to every part that parses names or authorities.
  const hosts = createHostCache();
  const authorities = createAuthorityParsers();
  const transparent = assembleTransparent({
    dnsListen: config.dnsListen,
    syntheticCidr: config.syntheticCidr,
    searchDomains: config.searchDomains,
    stateDir: config.stateDir,
    allowLoopback: config.unsafeAllowLoopbackUpstream,
    maxConnections: config.limits.maxConnections,
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
        live.tunnels.reevaluate(next, { allowLoopback: config.unsafeAllowLoopbackUpstream, selfAddresses: NO_SELF_ADDRESSES });
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
  let problem: string | undefined = 'dns-starting';
  let closing: Promise<void> | undefined;
  const metrics = createDnsMetrics(options.registry, { pool: () => pool, listeners: () => capture?.listening().length ?? 0 });

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
        maxConnections: options.maxConnections,
        now,
        sink,
        logger,
      });
      capture = listeners;
      listeners.start();
      // Before DNS answers: a pod whose synthetic range is not routed to lo must not turn ready first.
      await listeners.probe(live.windows[4].slice(0, live.windows[4].indexOf('/')));
      live.subscribe((event) => metrics.mappings.inc({ event: event.kind }));
      const dns = createPolicyDns({
        policy: () => options.store.current(),
        resolver: options.resolver,
        pool: live,
        sink: meteredDnsSink(sink, metrics),
        now,
        allowLoopback: options.allowLoopback,
        selfAddresses: prepareSelfAddresses(selfAddresses),
        ...(options.hosts === undefined ? {} : { hosts: options.hosts }),
        ...(options.searchDomains === undefined ? {} : { searchDomains: options.searchDomains }),
      });
      // An answer leaves only once its listeners are bound: a client that connects at once is never refused.
      const handler: DnsHandler = {
        cached: dns.handler.cached,
        resolve: async (message, info) => {
          const response = await dns.handler.resolve(message, info);
          await listeners.settled();
          return response;
        },
      };
      server = createDnsServer({
        host: options.dnsListen.host,
        port: options.dnsListen.port,
        handler,
        onTick: () => {
          live.sweep();
          listeners.sweep();
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
