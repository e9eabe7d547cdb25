// Policy DNS and transparent capture for the composition root (boundary.ts, which stays under its size cap): boot
// epoch, synthetic pool, the DNS handler and server, DNS metrics and, unless `--capture off`, the capture listeners
// on the proxy's shared context. Fails closed: a corrupt epoch means no DNS answers and no capture.

import type { CaptureState, Transparent, TransparentOptions } from './boundary-types.js';
import { createDnsEventSink, timedDnsHandler } from './boundary-dns.js';
import { advanceEpoch } from '../dns/epoch.js';
import type { DnsEventAggregator } from '../dns/event-aggregate.js';
import { createDnsMetrics } from '../dns/metrics.js';
import { createPolicyDns, MAX_CACHED_ANSWERS } from '../dns/policy-dns.js';
import { createDnsServer, type DnsServer } from '../dns/server.js';
import { assertReusePort, createReplayWorkers, type ReplayWorkers } from '../dns/workers.js';
import { isBoundaryError } from '../shared/errors.js';
import { formatAuthority } from '../net/host.js';
import { prepareSelfAddresses } from '../net/ssrf.js';
import { createSyntheticPool, type SyntheticPool } from '../net/synthetic.js';
import { createCaptureHandler } from '../proxy/capture.js';
import { type CaptureListeners, createCaptureListeners } from '../proxy/capture-listeners.js';

export function assembleTransparent(options: TransparentOptions): Transparent {
  const { logger, now, sink } = options;
  let pool: SyntheticPool | undefined;
  let server: DnsServer | undefined;
  let capture: CaptureListeners | undefined;
  let dnsEvents: DnsEventAggregator | undefined;
  let workers: ReplayWorkers | undefined;
  const workerCount = options.dnsWorkers ?? 0;
  let problem: string | undefined = 'dns-starting';
  let closing: Promise<void> | undefined;
  // Subscribed here, before the proxy's listener: the epoch moves in the swap itself, before any other work runs, so
  // no worker replays what the old policy made once a later query can see the new one.
  const unfollow = options.store.subscribe(() => workers?.bump());
  const metrics = createDnsMetrics(options.registry, {
    pool: () => pool,
    listeners: () => capture?.listening().length ?? 0,
    connections: () => capture?.connections() ?? 0,
    workers: () => ({ configured: workerCount, running: workers?.running() ?? 0 }),
  }, options.lookupMetrics);

  return {
    async preflight() {
      // A Node that cannot share the port refuses the option, never runs on one thread instead.
      if (workerCount > 0) await assertReusePort(options.dnsListen.host.includes(':') ? 6 : 4);
    },
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
      if (options.capture !== 'off') {
        const listeners = createCaptureListeners({
          pool: live,
          store: options.store,
          onConnection: createCaptureHandler({ ctx: context, chain: context.captureChain(live) }),
          limits: options.limits,
          metrics: context.metrics,
          now,
          sink,
          logger,
          cidr: options.syntheticCidr,
          required: options.capture === 'required',
        });
        capture = listeners;
        listeners.start();
        // Before DNS answers: a pod whose synthetic range is not routed to lo must not turn ready first.
        await listeners.probe(live.windows[4].slice(0, live.windows[4].indexOf('/')));
      }
      live.subscribe((event) => metrics.mappings.inc({ event: event.kind }));
      const events = createDnsEventSink({ sink, metrics, decisions: context.metrics, now });
      dnsEvents = events;
      const replay =
        workerCount === 0
          ? undefined
          : createReplayWorkers({
              count: workerCount,
              sink: events.sink,
              now,
              pool: live,
              maxEntries: MAX_CACHED_ANSWERS,
              ...(options.ownQueries === undefined ? {} : { ownPorts: options.ownQueries.sharedPorts() }),
              onExit(worker, code, restarted) {
                metrics.workerExits.inc({ outcome: restarted ? 'restarted' : 'abandoned' });
                logger.error({ worker, code, restarted }, 'policy DNS replay worker died; its queries go to the other sockets');
              },
              onError: (err) => logger.warn({ err }, 'policy DNS replay worker error'),
              onReplayed: (count) => metrics.workerReplays.inc({}, count),
            });
      workers = replay;
      const dns = createPolicyDns({
        policy: () => options.store.current(),
        lookups: options.lookups,
        pool: live,
        sink: events.sink,
        now,
        ...(replay === undefined ? {} : { replicas: replay.replicas }),
        allowLoopback: options.allowLoopback,
        selfAddresses: prepareSelfAddresses(selfAddresses),
        ...(options.hosts === undefined ? {} : { hosts: options.hosts }),
        ...(options.searchDomains === undefined ? {} : { searchDomains: options.searchDomains }),
        ...(options.ownQueries === undefined ? {} : { ownQueries: options.ownQueries }),
      });
      const handler = timedDnsHandler(dns.handler, { clock: context.metrics, answerSeconds: metrics.answerSeconds, settled: () => capture?.settled() });
      server = createDnsServer({
        host: options.dnsListen.host,
        port: options.dnsListen.port,
        handler,
        onTick: () => {
          live.sweep();
          capture?.sweep();
          // Writes the held-back counts of rate-limit, tunnelling and mapping refusals once per interval.
          dns.tick();
          options.lookups.tick();
        },
        onTcpClosed: (reason) => metrics.tcpClosed.inc({ reason }),
        onError: (err) => logger.warn({ err }, 'policy DNS error'),
        ...(replay === undefined ? {} : { reusePort: true }),
      });
      await server.start();
      // Ready only once every worker listens too.
      await replay?.start(server);
      problem = undefined;
      const bound = server.address();
      sink.emit({
        class: 'CONFIG',
        activity: 'READY',
        severity: 'INFO',
        engine: 'dns',
        dst: { ip: bound.host, port: bound.port },
        message: `Policy DNS listening on ${formatAuthority(bound.host, bound.port)} (udp, tcp); epoch ${epoch}, synthetic window ${live.windows[4]}${workerCount === 0 ? '' : `; ${workerCount} replay workers`}`,
        unmapped: { epoch, synthetic_window: live.windows[4], ...(workerCount === 0 ? {} : { dns_workers: workerCount }) },
      });
    },
    close() {
      closing ??= (async () => {
        problem ??= 'dns-closed';
        // Workers first: their last counts reach the events below, and what they pass on meets an open socket.
        await workers?.close();
        unfollow();
        await server?.close();
        // After the listener, before telemetry: the last interval's counts are written.
        dnsEvents?.close();
        await capture?.close();
      })();
      return closing;
    },
    problem: () => problem,
    capture(): CaptureState {
      return { mode: options.capture, problem: capture?.problem() };
    },
    dnsAddress: () => server?.address(),
    pool: () => pool,
    listening: () => capture?.listening() ?? [],
  };
}
