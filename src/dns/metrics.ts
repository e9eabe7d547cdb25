// Prometheus counters of policy DNS, fed from the audit events the handler already emits (one DNS QUERY
// event per answered query), so the handler stays free of metrics. Labels come only from closed sets.

import type { Registry } from 'prom-client';
import { DNS_METRICS, type DnsOutcomeLabel } from './metric-specs.js';
import { type BoundCounter, createCounter, createGauge, createHistogram, type CounterRecorder, type Observer } from '../telemetry/metrics.js';
import type { SyntheticPool } from '../net/synthetic.js';
import type { AuditEvent, AuditSink } from '../telemetry/event.js';
import { RCODES } from './answer.js';

const DNS_RCODE_LABELS = [...(Object.keys(RCODES) as (keyof typeof RCODES)[]), 'other'] as const;
type DnsRcodeLabel = (typeof DNS_RCODE_LABELS)[number];

const SERVFAIL_OUTCOMES: Readonly<Record<string, DnsOutcomeLabel>> = {
  policy_dns_no_valid_address: 'no-valid-address',
  policy_dns_pool_exhausted: 'pool-exhausted',
  policy_dns_mapping_rate: 'mapping-rate-limited',
  policy_dns_mapping_limit: 'mapping-limit',
  policy_dns_stale_generation: 'stale-generation',
  policy_dns_upstream_dns_loop: 'dns-loop',
};

/** The counters of the lookup gate's reports (net/lookup-gate.ts): policy DNS and the proxy feed both. */
export interface LookupMetrics {
  readonly rateLimited: CounterRecorder<typeof DNS_METRICS.boundary_dns_rate_limited_total>;
  readonly tunnelNames: CounterRecorder<typeof DNS_METRICS.boundary_dns_tunnel_names_total>;
}

interface DnsMetrics extends LookupMetrics {
  readonly queries: CounterRecorder<typeof DNS_METRICS.boundary_dns_queries_total>;
  readonly byType: CounterRecorder<typeof DNS_METRICS.boundary_dns_queries_by_type_total>;
  readonly mappings: CounterRecorder<typeof DNS_METRICS.boundary_dns_mappings_total>;
  readonly tcpClosed: CounterRecorder<typeof DNS_METRICS.boundary_dns_tcp_closed_total>;
  readonly workerExits: CounterRecorder<typeof DNS_METRICS.boundary_dns_worker_exits_total>;
  readonly workerReplays: CounterRecorder<typeof DNS_METRICS.boundary_dns_worker_replays_total>;
  readonly answerSeconds: Observer;
}

export function createLookupMetrics(registry: Registry): LookupMetrics {
  return {
    rateLimited: createCounter(registry, DNS_METRICS.boundary_dns_rate_limited_total),
    tunnelNames: createCounter(registry, DNS_METRICS.boundary_dns_tunnel_names_total),
  };
}

/**
 * Registers the counters, plus gauges read from the pool (and capture) at scrape time. `lookups`: the gate's counters
 * when the composition root made them already (createLookupMetrics), else they are made here.
 */
export function createDnsMetrics(
  registry: Registry,
  gauges: {
    pool: () => SyntheticPool | undefined;
    listeners: () => number;
    connections: () => number;
    workers?: () => { readonly configured: number; readonly running: number };
  },
  lookups: LookupMetrics = createLookupMetrics(registry),
): DnsMetrics {
  createGauge(registry, DNS_METRICS.boundary_dns_synthetic_addresses, {
    collect(gauge) {
      const pool = gauges.pool();
      if (pool === undefined) return;
      const stats = pool.stats();
      gauge.set({ state: 'reserved' }, stats.reserved[4]);
      gauge.set({ state: 'live' }, stats.live);
      gauge.set({ state: 'quarantined' }, stats.quarantined);
      gauge.set({ state: 'capacity' }, stats.capacity[4]);
    },
  });
  createGauge(registry, DNS_METRICS.boundary_capture_listeners, {
    collect(gauge) {
      gauge.set({}, gauges.listeners());
    },
  });
  createGauge(registry, DNS_METRICS.boundary_capture_connections, {
    collect(gauge) {
      gauge.set({}, gauges.connections());
    },
  });
  createGauge(registry, DNS_METRICS.boundary_dns_workers, {
    collect(gauge) {
      const workers = gauges.workers?.() ?? { configured: 0, running: 0 };
      gauge.set({ state: 'configured' }, workers.configured);
      gauge.set({ state: 'running' }, workers.running);
    },
  });
  return {
    queries: createCounter(registry, DNS_METRICS.boundary_dns_queries_total),
    byType: createCounter(registry, DNS_METRICS.boundary_dns_queries_by_type_total),
    mappings: createCounter(registry, DNS_METRICS.boundary_dns_mappings_total),
    tcpClosed: createCounter(registry, DNS_METRICS.boundary_dns_tcp_closed_total),
    workerExits: createCounter(registry, DNS_METRICS.boundary_dns_worker_exits_total),
    workerReplays: createCounter(registry, DNS_METRICS.boundary_dns_worker_replays_total),
    ...lookups,
    answerSeconds: createHistogram(registry, DNS_METRICS.boundary_dns_answer_duration_seconds).bind({}),
  };
}

/** The metric labels of one DNS QUERY event. */
export function dnsQueryLabels(event: AuditEvent): { rcode: DnsRcodeLabel; outcome: DnsOutcomeLabel } {
  const raw = event.unmapped?.rcode;
  const rcode: DnsRcodeLabel = typeof raw === 'string' && raw in RCODES ? (raw as DnsRcodeLabel) : 'other';
  let outcome: DnsOutcomeLabel;
  if (rcode === 'NOERROR') outcome = event.action === 'ALLOWED' ? 'mapped' : 'empty';
  // A policy refusal is answered NXDOMAIN (docs/dns.md#why-nxdomain); its event says DENIED.
  else if (rcode === 'REFUSED' || event.action === 'DENIED') outcome = 'refused';
  else if (rcode === 'NXDOMAIN') outcome = 'nxdomain';
  else if (rcode === 'NOTIMP') outcome = 'not-implemented';
  else if (rcode === 'FORMERR') outcome = 'malformed';
  else outcome = SERVFAIL_OUTCOMES[event.statusDetail ?? ''] ?? 'upstream-failed';
  return { rcode, outcome };
}

/** Counts DNS QUERY events on their way to `sink`: by rcode and outcome, by qtype, and as `dns` decisions. */
/** Where DNS decisions are counted beside the proxy's (proxy/metrics.ts bindDns), typed by shape: dns/ never imports proxy/. */
interface DnsDecisionCounter {
  bindDns(verdict: 'allow' | 'deny', reason: string | undefined, policy: string | undefined): BoundCounter;
}

/** What one DNS QUERY event counts: its two series and its decision (undefined without an action), all bound. */
interface QueryCounts {
  readonly queries: BoundCounter;
  readonly byType: BoundCounter;
  readonly decision: BoundCounter | undefined;
}

function queryCounts(event: AuditEvent, metrics: DnsMetrics, decisions: DnsDecisionCounter | undefined): QueryCounts {
  const labels = dnsQueryLabels(event);
  const qtype = event.unmapped?.qtype;
  const reason = event.unmapped?.reason_code;
  return {
    queries: metrics.queries.bind(labels),
    byType: metrics.byType.bind({ qtype: (typeof qtype === 'string' ? qtype : 'other') as 'A', rcode: labels.rcode as 'NOERROR' }),
    decision:
      event.action === undefined
        ? undefined
        : decisions?.bindDns(event.action === 'ALLOWED' ? 'allow' : 'deny', typeof reason === 'string' ? reason : undefined, event.policy),
  };
}

export function meteredDnsSink(sink: AuditSink, metrics: DnsMetrics, decisions?: DnsDecisionCounter): AuditSink {
  // policy-dns.ts stamps every answer's events from one prepared base: the events of one question share their
  // `unmapped` object and every field counted here, so their series are resolved once per base, not once per query.
  const known = new WeakMap<object, QueryCounts>();
  return {
    emit(event) {
      if (event.class === 'DNS' && event.activity === 'QUERY') {
        const u = event.unmapped;
        let counts = u === undefined ? undefined : known.get(u);
        if (counts === undefined) {
          counts = queryCounts(event, metrics, decisions);
          if (u !== undefined) known.set(u, counts);
        }
        counts.queries.inc();
        counts.byType.inc();
        counts.decision?.inc();
      } else {
        countLookupReport(metrics, event);
      }
      sink.emit(event);
    },
  };
}

/**
 * Over-limit and tunnelling answers have no per-query event: their reports carry the count (dns/rate-limit.ts,
 * dns/lookup-events.ts), counted here from the event on its way out. Other events are left alone.
 */
export function countLookupReport(metrics: LookupMetrics, event: AuditEvent): void {
  if (event.statusDetail !== 'policy_dns_rate_limited' && event.statusDetail !== 'policy_dns_tunnel_suspected') return;
  const u = event.unmapped ?? {};
  if (event.statusDetail === 'policy_dns_rate_limited') metrics.rateLimited.inc({ limit: u.limit === 'unique' ? 'unique' : 'refused' }, Number(u.queries ?? 1));
  else metrics.tunnelNames.inc({ mode: u.mode === 'enforce' ? 'enforce' : 'audit' }, Number(u.flagged_names ?? 1));
}
