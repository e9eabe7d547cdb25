// Prometheus counters of policy DNS, fed from the audit events the handler already emits (one DNS QUERY
// event per answered query), so the handler stays free of metrics. Labels come only from closed sets.

import { Counter, Gauge, type Registry } from 'prom-client';
import type { SyntheticPool } from '../net/synthetic.js';
import type { AuditEvent, AuditSink } from '../telemetry/event.js';
import { RCODES } from './answer.js';

const DNS_RCODE_LABELS = [...(Object.keys(RCODES) as (keyof typeof RCODES)[]), 'other'] as const;
type DnsRcodeLabel = (typeof DNS_RCODE_LABELS)[number];

const DNS_OUTCOMES = [
  'mapped',
  'empty',
  'refused',
  'nxdomain',
  'not-implemented',
  'malformed',
  'upstream-failed',
  'no-valid-address',
  'pool-exhausted',
  'stale-generation',
] as const;
type DnsOutcomeLabel = (typeof DNS_OUTCOMES)[number];

const SERVFAIL_OUTCOMES: Readonly<Record<string, DnsOutcomeLabel>> = {
  policy_dns_no_valid_address: 'no-valid-address',
  policy_dns_pool_exhausted: 'pool-exhausted',
  policy_dns_stale_generation: 'stale-generation',
};

interface DnsMetrics {
  readonly queries: Counter<'rcode' | 'outcome'>;
  readonly mappings: Counter<'event'>;
}

/** Registers the counters, plus gauges read from the pool (and capture) at scrape time. */
export function createDnsMetrics(registry: Registry, gauges: { pool: () => SyntheticPool | undefined; listeners: () => number }): DnsMetrics {
  const registers = [registry];
  new Gauge({
    name: 'boundary_dns_synthetic_addresses',
    help: 'Synthetic IPv4 addresses of the current window: reserved this epoch, live now, capacity',
    labelNames: ['state'],
    registers,
    collect() {
      const pool = gauges.pool();
      if (pool === undefined) return;
      const stats = pool.stats();
      this.set({ state: 'reserved' }, stats.reserved[4]);
      this.set({ state: 'live' }, stats.live);
      this.set({ state: 'capacity' }, stats.capacity[4]);
    },
  });
  new Gauge({
    name: 'boundary_capture_listeners',
    help: 'Transparent capture listeners open, one per (synthetic address, port)',
    registers,
    collect() {
      this.set(gauges.listeners());
    },
  });
  return {
    queries: new Counter({ name: 'boundary_dns_queries_total', help: 'Policy DNS queries by response code and outcome', labelNames: ['rcode', 'outcome'], registers }),
    mappings: new Counter({ name: 'boundary_dns_mappings_total', help: 'Synthetic mappings published and expired', labelNames: ['event'], registers }),
  };
}

/** The metric labels of one DNS QUERY event. */
export function dnsQueryLabels(event: AuditEvent): { rcode: DnsRcodeLabel; outcome: DnsOutcomeLabel } {
  const raw = event.unmapped?.rcode;
  const rcode: DnsRcodeLabel = typeof raw === 'string' && raw in RCODES ? (raw as DnsRcodeLabel) : 'other';
  let outcome: DnsOutcomeLabel;
  if (rcode === 'NOERROR') outcome = event.action === 'ALLOWED' ? 'mapped' : 'empty';
  else if (rcode === 'REFUSED') outcome = 'refused';
  else if (rcode === 'NXDOMAIN') outcome = 'nxdomain';
  else if (rcode === 'NOTIMP') outcome = 'not-implemented';
  else if (rcode === 'FORMERR') outcome = 'malformed';
  else outcome = SERVFAIL_OUTCOMES[event.statusDetail ?? ''] ?? 'upstream-failed';
  return { rcode, outcome };
}

/** Counts DNS QUERY events on their way to `sink`. */
export function meteredDnsSink(sink: AuditSink, metrics: DnsMetrics): AuditSink {
  return {
    emit(event) {
      if (event.class === 'DNS' && event.activity === 'QUERY') metrics.queries.inc(dnsQueryLabels(event));
      sink.emit(event);
    },
  };
}
