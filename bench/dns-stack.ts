// The policy DNS that bench/dns-server.ts serves and bench/dns-handler.ts calls in a loop: a fixed policy
// (*.bench.test), a loopback fixture upstream, and its events on the path production gives them (boundary-dns.ts),
// with --dns-workers' replay workers when asked for.

import { openSync } from 'node:fs';
import { Registry } from 'prom-client';
import { createDnsEventSink, timedDnsHandler } from '../src/app/boundary-dns.js';
import { lookupReportEvent } from '../src/dns/lookup-events.js';
import { createDnsMetrics, meteredDnsSink } from '../src/dns/metrics.js';
import { createPolicyDns, type PolicyDns } from '../src/dns/policy-dns.js';
import type { OwnQueries } from '../src/dns/own-queries.js';
import type { ReplayWorkers } from '../src/dns/workers.js';
import type { DnsHandler } from '../src/dns/server.js';
import { createUpstreamResolver } from '../src/dns/upstream.js';
import { createLookupGate } from '../src/net/lookup-gate.js';
import { createSyntheticPool, type SyntheticPool } from '../src/net/synthetic.js';
import { MetricsOffRegistry } from '../src/telemetry/metrics.js';
import { createProxyMetrics } from '../src/proxy/metrics.js';
import { createAuditSink } from '../src/telemetry/audit.js';
import { createDenialRing, recordingDenials } from '../src/telemetry/denials.js';
import type { AuditSink } from '../src/telemetry/event.js';
import { createBufferedDestination } from '../src/telemetry/log-destination.js';
import { createLogger } from '../src/telemetry/logger.js';
import { stubPolicy } from '../test/harness/dns-policy.js';
import { type FixtureEntry, startDnsFixture } from '../test/harness/dns-upstream.js';

/**
 * 'ocsf' (production form): what boundary.ts builds. Every query counted in metrics and timed, per-query events
 * aggregated (dns/event-aggregate.ts), then the denial ring and the real audit sink writing OCSF JSON lines through
 * the production logger and its buffered destination into `logFile`.
 * 'ocsf-per-query': the same without aggregation, one line per query (as before issue 16).
 * 'ocsf-nometrics': 'ocsf' on a MetricsOffRegistry (no-op recorders): 'ocsf' minus this is what the metrics cost.
 * 'off': no metrics, events built and dropped; 'ocsf' minus 'off' is what the audit trail costs.
 */
export const LOG_MODES = ['ocsf', 'ocsf-per-query', 'ocsf-nometrics', 'off'] as const;
export type LogMode = (typeof LOG_MODES)[number];
/**
 * 'unlimited': the refused and new-name rate limits (docs/dns.md#rate-limits) lifted, so every query takes the full
 * answer path, as each of dnsmasq's does. 'default': the shipped limits (a refusal flood is then answered REFUSED
 * from the query alone, without events, and a new name over the bucket is not resolved).
 */
export const GUARD_MODES = ['unlimited', 'default'] as const;
export type GuardMode = (typeof GUARD_MODES)[number];
const UNLIMITED = 1e9;

export interface BenchDns {
  readonly dns: PolicyDns;
  readonly pool: SyntheticPool;
  /** dns.handler, timed as production times it (except in 'off'). */
  readonly handler: DnsHandler;
  /** The replay workers (`replay` given), for the server to start once it listens with reusePort. */
  readonly workers: ReplayWorkers | undefined;
  /** Events that reached the boundary's sink (after aggregation). */
  events(): number;
  upstreamQueries(): number;
  close(): Promise<void>;
}

/**
 * Makes the replay workers from the parts policy DNS is built of (bench/dns-replay.ts). A function handed in, not an
 * import: BOUNDARY_REF builds this file against a src/ that may have no workers.
 */
export type ReplayFactory = (parts: {
  readonly sink: AuditSink;
  readonly pool: SyntheticPool;
  readonly now: () => number;
  /** Undefined in a BOUNDARY_REF tree from before the check. */
  readonly ownQueries: OwnQueries | undefined;
}) => ReplayWorkers;

export async function startBenchDns(options: { names: number; logMode: LogMode; logFile: string; guard: GuardMode; replay?: ReplayFactory }): Promise<BenchDns> {
  const upstream: Record<string, FixtureEntry> = {};
  for (let i = 0; i < options.names; i++) upstream[`allowed-${i}.bench.test`] = { a: ['127.0.0.2'], ttl: 30 };
  const fixture = await startDnsFixture(upstream);
  const now = () => Date.now();
  const pool = createSyntheticPool({ epoch: 0, now });
  const registry = options.logMode === 'ocsf-nometrics' ? new MetricsOffRegistry() : new Registry();
  const metrics = createDnsMetrics(registry, { pool: () => pool, listeners: () => 0, connections: () => 0 });
  const decisions = createProxyMetrics(registry);
  let events = 0;
  const logger = createLogger({ format: 'json', destination: createBufferedDestination(openSync(options.logFile, 'a')), now });
  const audit = recordingDenials(createAuditSink({ logger, now, format: 'json' }), createDenialRing(), now);
  const boundarySink: AuditSink = {
    emit(event) {
      events++;
      if (options.logMode !== 'off') audit.emit(event);
    },
  };
  const aggregated = options.logMode === 'ocsf' || options.logMode === 'ocsf-nometrics';
  const aggregator = aggregated ? createDnsEventSink({ sink: boundarySink, metrics, decisions, now }) : undefined;
  const sink = aggregator?.sink ?? (options.logMode === 'ocsf-per-query' ? meteredDnsSink(boundarySink, metrics, decisions) : boundarySink);
  // One exact endpoint per name: under a single wildcard, more names than its share of the new-mapping burst
  // (net/synthetic-budget.ts) would be answered SERVFAIL and asked upstream again, which dnsmasq never does.
  const policy = stubPolicy(Object.keys(upstream).map((host) => ({ host, ports: [443] })));
  // As boundary.ts does on every policy load: the policy's keys are known labels, counted through bound series.
  decisions.setPolicies(policy.entries.map((entry) => entry.key));
  // As app/boundary-transparent.ts wires them: replays into the same sink as the main thread's answers.
  const upstreamResolver = createUpstreamResolver({ servers: [{ host: fixture.host, port: fixture.port }] });
  const workers = options.replay?.({ sink, pool, now, ownQueries: upstreamResolver.ownQueries });
  const dns = createPolicyDns({
    policy: () => policy,
    // The lookup gate production shares with the proxy (boundary-dns.ts createBoundaryLookups), its reports on the same path.
    lookups: createLookupGate({
      resolver: upstreamResolver,
      now,
      report: (report) => sink.emit(lookupReportEvent(report, policy)),
      ...(options.guard === 'default' ? {} : { newNames: { perSecond: UNLIMITED, burst: UNLIMITED } }),
    }),
    pool,
    sink,
    now,
    allowLoopback: true,
    ...(workers === undefined ? {} : { replicas: workers.replicas }),
    // As run.ts wires it (undefined in a BOUNDARY_REF tree from before the check).
    ownQueries: upstreamResolver.ownQueries,
    ...(options.guard === 'default' ? {} : { refusalLimits: { perSecond: UNLIMITED, burst: UNLIMITED } }),
  });
  const handler =
    options.logMode === 'off' ? dns.handler : timedDnsHandler(dns.handler, { clock: decisions, answerSeconds: metrics.answerSeconds, settled: () => undefined });
  return {
    dns,
    pool,
    handler,
    workers,
    events: () => events,
    upstreamQueries: () => fixture.count(),
    async close() {
      await workers?.close();
      aggregator?.close();
      await fixture.close();
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  };
}
