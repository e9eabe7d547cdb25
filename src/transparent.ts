// Policy DNS and transparent capture, assembled for createBoundary: boot epoch, synthetic pool, the DNS
// handler and server, DNS metrics and the capture listeners on the proxy's shared context.
// Fails closed: a corrupt epoch means no DNS answers and no capture, and readiness says why.

import type { Registry } from 'prom-client';
import type { ListenAddress } from './config.js';
import { advanceEpoch } from './dns/epoch.js';
import { createDnsMetrics, meteredDnsSink } from './dns/metrics.js';
import { createPolicyDns } from './dns/policy-dns.js';
import { createDnsServer, type DnsHandler, type DnsServer } from './dns/server.js';
import { isBoundaryError } from './errors.js';
import { formatAuthority } from './net/host.js';
import type { Resolver } from './net/resolver.js';
import type { SelfAddress } from './net/ssrf.js';
import { createSyntheticPool, type SyntheticPool } from './net/synthetic.js';
import type { PolicyStore } from './policy/store.js';
import { createCaptureHandler } from './proxy/capture.js';
import { type CaptureListeners, createCaptureListeners } from './proxy/capture-listeners.js';
import type { ProxyContext } from './proxy/context.js';
import type { AuditSink } from './telemetry/event.js';
import type { Logger } from './telemetry/logger.js';

export interface TransparentOptions {
  readonly dnsListen: ListenAddress;
  readonly syntheticCidr: string;
  /** resolv.conf `search` domains: NXDOMAIN under them for names policy does not cover. */
  readonly searchDomains?: readonly string[];
  readonly stateDir: string;
  readonly allowLoopback: boolean;
  readonly maxConnections: number;
  readonly store: PolicyStore;
  /** The proxy's resolver: DNS answers and CONNECT destinations come from the same trusted upstream. */
  readonly resolver: Resolver;
  readonly sink: AuditSink;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly now: () => number;
}

export interface Transparent {
  /** After the proxy: capture runs on its context. Throws only when the DNS listener cannot bind. */
  start(context: ProxyContext, selfAddresses: readonly SelfAddress[]): Promise<void>;
  close(): Promise<void>;
  /** Why DNS or capture is off (fail closed) or cannot bind (capture-unavailable), or undefined. */
  problem(): string | undefined;
  dnsAddress(): ListenAddress | undefined;
  pool(): SyntheticPool | undefined;
  listening(): readonly { readonly ip: string; readonly port: number }[];
}

export function createTransparent(options: TransparentOptions): Transparent {
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
        selfAddresses,
        ...(options.searchDomains === undefined ? {} : { searchDomains: options.searchDomains }),
      });
      // An answer leaves only once its listeners are bound: a client that connects at once is never refused.
      const handle: DnsHandler = (message, info) => {
        const out = dns.handle(message, info);
        if (!(out instanceof Promise)) return out;
        return out.then(async (response) => {
          await listeners.settled();
          return response;
        });
      };
      server = createDnsServer({
        host: options.dnsListen.host,
        port: options.dnsListen.port,
        handler: handle,
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
