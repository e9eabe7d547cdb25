// Policy DNS's and transparent capture's metrics (src/dns/metrics.ts records them), with their label vocabularies.
// Declares; never records. app/metric-catalogue.ts lists every part's.

import { DNS_BUCKETS } from '../telemetry/metric-buckets.js';
import type { MetricSpec } from '../telemetry/metrics.js';
import { RCODES } from './answer.js';
import { TCP_CLOSE_REASONS } from './server.js';

const NONE = {} as const;

export const DNS_RCODE_LABELS = Object.keys(RCODES) as (keyof typeof RCODES)[];
/** Query types a workload asks for in practice; any other is counted as `other`. */
export const DNS_QTYPE_LABELS = ['A', 'AAAA', 'CNAME', 'HTTPS', 'SVCB', 'MX', 'TXT', 'NS', 'SOA', 'PTR', 'SRV', 'CAA', 'ANY'] as const;
export const DNS_OUTCOMES = [
  'mapped',
  'empty',
  'refused',
  'nxdomain',
  'not-implemented',
  'malformed',
  'upstream-failed',
  // boundary's own upstream query came back to policy DNS (dns/own-queries.ts): a redirect to fix, not an upstream fault.
  'dns-loop',
  'no-valid-address',
  'pool-exhausted',
  'stale-generation',
  'mapping-rate-limited',
  'mapping-limit',
] as const;
export type DnsOutcomeLabel = (typeof DNS_OUTCOMES)[number];

export const DNS_METRICS = {
  boundary_dns_queries_total: {
    name: 'boundary_dns_queries_total',
    type: 'counter',
    unit: '',
    help: 'Policy DNS queries by response code and outcome (series appear on first use)',
    labels: { rcode: DNS_RCODE_LABELS, outcome: DNS_OUTCOMES },
    scope: 'boundary',
  },
  boundary_dns_queries_by_type_total: {
    name: 'boundary_dns_queries_by_type_total',
    type: 'counter',
    unit: '',
    help: 'Policy DNS queries by query type and response code',
    labels: { qtype: DNS_QTYPE_LABELS, rcode: DNS_RCODE_LABELS },
    scope: 'boundary',
  },
  boundary_dns_answer_duration_seconds: {
    name: 'boundary_dns_answer_duration_seconds',
    type: 'histogram',
    unit: 'seconds',
    help: 'Policy DNS: query received until the answer was ready (cache, policy, upstream)',
    labels: NONE,
    buckets: DNS_BUCKETS,
    scope: 'boundary',
  },
  boundary_dns_mappings_total: {
    name: 'boundary_dns_mappings_total',
    type: 'counter',
    unit: '',
    help: 'Synthetic mappings published and expired',
    labels: { event: ['published', 'expired'] },
    scope: 'boundary',
  },
  boundary_dns_rate_limited_total: {
    name: 'boundary_dns_rate_limited_total',
    type: 'counter',
    unit: '',
    help: 'Names refused over a rate limit, counted as they are reported: refused names (policy DNS, answered REFUSED), new names under wildcards (the lookup gate: policy DNS REFUSED, the proxy 429)',
    labels: { limit: ['refused', 'unique'] },
    scope: 'boundary',
  },
  boundary_dns_tunnel_names_total: {
    name: 'boundary_dns_tunnel_names_total',
    type: 'counter',
    unit: '',
    help: 'New names under an allowed wildcard flagged as tunnelling-shaped by the lookup gate (policy DNS and the proxy), by detection mode (enforce: refused)',
    labels: { mode: ['audit', 'enforce'] },
    scope: 'boundary',
  },
  boundary_dns_tcp_closed_total: {
    name: 'boundary_dns_tcp_closed_total',
    type: 'counter',
    unit: '',
    help: 'DNS-over-TCP connections boundary closed: idle past the timeout, idle and reclaimed for a new client at the connection limit, or new and over the limit with none idle',
    labels: { reason: TCP_CLOSE_REASONS },
    scope: 'boundary',
  },
  boundary_dns_workers: {
    name: 'boundary_dns_workers',
    type: 'gauge',
    unit: '',
    help: 'Policy DNS replay workers (--dns-workers): configured, and running with their socket bound',
    labels: { state: ['configured', 'running'] },
    scope: 'boundary',
  },
  boundary_dns_worker_replays_total: {
    name: 'boundary_dns_worker_replays_total',
    type: 'counter',
    unit: '',
    help: 'Policy DNS answers replayed by the replay workers (also in boundary_dns_queries_total), counted when merged (every 100 ms)',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_dns_worker_exits_total: {
    name: 'boundary_dns_worker_exits_total',
    type: 'counter',
    unit: '',
    help: 'Policy DNS replay workers that died: started again, or left down once their restarts in the window were spent (their share of the port then goes to the other sockets)',
    labels: { outcome: ['restarted', 'abandoned'] },
    scope: 'boundary',
  },
  boundary_dns_synthetic_addresses: {
    name: 'boundary_dns_synthetic_addresses',
    type: 'gauge',
    unit: '',
    help: 'Synthetic IPv4 addresses of the current window: reserved (live, held or in quarantine), live mappings, in quarantine, capacity',
    labels: { state: ['reserved', 'live', 'quarantined', 'capacity'] },
    scope: 'boundary',
  },
  boundary_capture_listeners: {
    name: 'boundary_capture_listeners',
    type: 'gauge',
    unit: '',
    help: 'Transparent capture listeners open, one per (synthetic address, port)',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_capture_connections: {
    name: 'boundary_capture_connections',
    type: 'gauge',
    unit: '',
    help: 'Captured (transparent) connections open across every capture listener; limit in boundary_proxy_connections_limit',
    labels: NONE,
    scope: 'boundary',
  },
} as const satisfies Record<string, MetricSpec>;
