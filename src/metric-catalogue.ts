// Every metric boundary and the reference supervisor expose: name, help, type, unit, each label's closed value set
// and histogram buckets. Parts create their metrics only from these entries, through src/telemetry/metrics.ts; the
// README's metric table is generated from this file (scripts/metrics-table.ts). Declares; never records.
// At the top of src/ rather than in telemetry/: it names closed sets owned by policy/, proxy/, dns/, control/ and
// credentials/, and telemetry/ may import only types from them (STYLE.md section 2).

import { CONTROL_ERROR_KINDS } from './control/messages.js';
import type { ControlPhase } from './control/client.js';
import { REFUSAL_REASONS } from './credentials/outcome.js';
import { RCODES } from './dns/answer.js';
import { FLOOD_KINDS } from './http2/flood-guard.js';
import { DNS_DECISION_REASONS } from './policy/types.js';
import { ADMISSION_LISTENERS, CLIENT_ERROR_REASONS, OUTCOME_VERDICTS, REASON_CODES, REFUSED_CONNECTION_REASONS } from './proxy/events.js';
import type { MetricSpec } from './telemetry/metrics.js';

/** Policy names (network_policies keys) labelled one by one; the rest of a larger policy is counted as `other`. */
export const MAX_POLICY_LABELS = 64;
/** The `policy` label of a decision that no policy entry made (no endpoint matched, a parse refusal, ...). */
export const NO_POLICY_LABEL = 'none';

/** Adapters as metric labels: capture is `transparent` here, as the operator knows it. */
export const METRIC_ADAPTERS = ['forward', 'connect', 'l7', 'transparent', 'dns'] as const;
export type MetricAdapter = (typeof METRIC_ADAPTERS)[number];
/** proxy/events.ts REASON_CODES once each (a reason shared by decide() and the proxy is listed in both sets). */
const PROXY_REASONS = [...new Set(REASON_CODES)];
/** Every reason a refusal can carry: the proxy's and policy DNS's, without the allow reasons. */
const DENIAL_REASONS = [...new Set([...REASON_CODES, ...DNS_DECISION_REASONS, 'invalid-name'])].filter((reason) => !reason.endsWith('-allowed'));
const DNS_RCODE_LABELS = Object.keys(RCODES) as (keyof typeof RCODES)[];
/** Query types a workload asks for in practice; any other is counted as `other`. */
const DNS_QTYPE_LABELS = ['A', 'AAAA', 'CNAME', 'HTTPS', 'SVCB', 'MX', 'TXT', 'NS', 'SOA', 'PTR', 'SRV', 'CAA', 'ANY'] as const;
export const DNS_OUTCOMES = [
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
  'mapping-rate-limited',
  'mapping-limit',
] as const;
export type DnsOutcomeLabel = (typeof DNS_OUTCOMES)[number];
/** control/client.ts ControlPhase, listed here so this file does not load the control client. */
export const CONTROL_STATES = ['idle', 'connecting', 'attached', 'waiting', 'superseded', 'closed'] as const satisfies readonly ControlPhase[];
type MissingControlState = Exclude<ControlPhase, (typeof CONTROL_STATES)[number]>;
// A new phase that is not listed above fails to compile here.
const CONTROL_STATES_COMPLETE: MissingControlState extends never ? true : never = true;
void CONTROL_STATES_COMPLETE;

const ms = (n: number): number => n / 1000;
/** Buckets from loopback measurements plus real-network headroom (docs/metrics.md#buckets). */
const DECISION_BUCKETS = [ms(0.002), ms(0.005), ms(0.01), ms(0.025), ms(0.05), ms(0.1), ms(0.25), ms(1)];
const CONNECT_BUCKETS = [ms(0.1), ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5, 10];
const FIRST_BYTE_BUCKETS = [ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5, 5, 10, 30];
const TLS_BUCKETS = [ms(0.5), ms(1), ms(2), ms(3), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5];
const DNS_BUCKETS = [ms(0.025), ms(0.05), ms(0.1), ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 5];
const BYTE_BUCKETS = [0, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864];

const NONE = {} as const;

export const METRICS = {
  boundary_build_info: {
    name: 'boundary_build_info',
    type: 'gauge',
    unit: 'info',
    help: 'Always 1; the labels name the boundary version (package.json) and the Node.js version',
    labels: NONE,
    runtimeLabels: { version: 'package.json version', node: 'process.version' },
    scope: 'boundary',
  },
  boundary_ready: {
    name: 'boundary_ready',
    type: 'gauge',
    unit: '',
    help: '1 while /readyz answers 200, else 0',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_policy_generation: {
    name: 'boundary_policy_generation',
    type: 'gauge',
    unit: '',
    help: 'Generation of the policy in force (0: none loaded yet)',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_policy_reloads_total: {
    name: 'boundary_policy_reloads_total',
    type: 'counter',
    unit: '',
    help: 'Policy loads by source (file, control) and outcome (loaded, refused)',
    labels: { source: ['file', 'control'], outcome: ['loaded', 'refused'] },
    scope: 'boundary',
  },
  boundary_decisions_total: {
    name: 'boundary_decisions_total',
    type: 'counter',
    unit: '',
    help: 'Connections, requests and DNS queries by adapter and final verdict',
    labels: { adapter: METRIC_ADAPTERS, verdict: OUTCOME_VERDICTS },
    scope: 'boundary',
  },
  boundary_denials_total: {
    name: 'boundary_denials_total',
    type: 'counter',
    unit: '',
    help: 'Denied connections, requests and DNS queries by reason code',
    labels: { reason: DENIAL_REASONS },
    scope: 'boundary',
  },
  boundary_policy_decisions_total: {
    name: 'boundary_policy_decisions_total',
    type: 'counter',
    unit: '',
    help: 'Decisions by the network_policies entry that made them and verdict (audit: would have been denied)',
    labels: { verdict: OUTCOME_VERDICTS },
    runtimeLabels: { policy: `network_policies keys of the loaded policy (first ${MAX_POLICY_LABELS}), ${NO_POLICY_LABEL}, other` },
    scope: 'boundary',
  },
  boundary_proxy_decisions_total: {
    name: 'boundary_proxy_decisions_total',
    type: 'counter',
    unit: '',
    help: 'Proxy connections and requests by adapter, final verdict and reason (series appear on first use)',
    labels: { adapter: METRIC_ADAPTERS, verdict: OUTCOME_VERDICTS, reason: PROXY_REASONS },
    scope: 'boundary',
  },
  boundary_proxy_refused_connections_total: {
    name: 'boundary_proxy_refused_connections_total',
    type: 'counter',
    unit: '',
    help: 'Connections refused before any request was read: the listener was full, or the source address held its share of it',
    labels: { reason: REFUSED_CONNECTION_REASONS },
    scope: 'boundary',
  },
  boundary_proxy_first_byte_timeouts_total: {
    name: 'boundary_proxy_first_byte_timeouts_total',
    type: 'counter',
    unit: '',
    help: 'Connections closed because nothing was sent within the first-byte timeout of accept (transparent: either way)',
    labels: { listener: ADMISSION_LISTENERS },
    scope: 'boundary',
  },
  boundary_proxy_connection_sources: {
    name: 'boundary_proxy_connection_sources',
    type: 'gauge',
    unit: '',
    help: 'Distinct client source addresses holding open connections, per listener (each is held to its share of the limit)',
    labels: { listener: ADMISSION_LISTENERS },
    scope: 'boundary',
  },
  boundary_proxy_client_errors_total: {
    name: 'boundary_proxy_client_errors_total',
    type: 'counter',
    unit: '',
    help: 'Request heads rejected by the parser (malformed, oversized, timed out)',
    labels: { reason: CLIENT_ERROR_REASONS },
    scope: 'boundary',
  },
  boundary_proxy_connections: {
    name: 'boundary_proxy_connections',
    type: 'gauge',
    unit: '',
    help: 'Open client connections of the proxy listener',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_proxy_connections_limit: {
    name: 'boundary_proxy_connections_limit',
    type: 'gauge',
    unit: '',
    help: 'The limit of boundary_proxy_connections (max connections); the capture listeners share the same limit in total',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_proxy_tunnels: {
    name: 'boundary_proxy_tunnels',
    type: 'gauge',
    unit: '',
    help: 'Open CONNECT tunnels and WebSocket relays',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_proxy_reload_closed_total: {
    name: 'boundary_proxy_reload_closed_total',
    type: 'counter',
    unit: '',
    help: 'Tunnels closed because a policy reload changed their decision',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_http2_client_sessions: {
    name: 'boundary_http2_client_sessions',
    type: 'gauge',
    unit: '',
    help: 'Open HTTP/2 sessions with workload clients: inspected tunnels and captured connections whose client speaks HTTP/2',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_http2_upstream_clients: {
    name: 'boundary_http2_upstream_clients',
    type: 'gauge',
    unit: '',
    help: 'HTTP/2 clients kept for origins, one per pinned destination (a replaced one until its streams end)',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_http2_flood_closed_total: {
    name: 'boundary_http2_flood_closed_total',
    type: 'counter',
    unit: '',
    help: 'HTTP/2 client sessions closed with GOAWAY ENHANCE_YOUR_CALM by the flood guard, by flood',
    labels: { flood: FLOOD_KINDS },
    scope: 'boundary',
  },
  boundary_credentials_substituted_total: {
    name: 'boundary_credentials_substituted_total',
    type: 'counter',
    unit: '',
    help: 'Requests sent upstream with at least one credential placeholder substituted',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_credentials_refused_total: {
    name: 'boundary_credentials_refused_total',
    type: 'counter',
    unit: '',
    help: 'Requests refused by credential handling, by reason',
    labels: { reason: REFUSAL_REASONS },
    scope: 'boundary',
  },
  boundary_decision_duration_seconds: {
    name: 'boundary_decision_duration_seconds',
    type: 'histogram',
    unit: 'seconds',
    help: 'Time decide() took for one proxy intent',
    labels: NONE,
    buckets: DECISION_BUCKETS,
    scope: 'boundary',
  },
  boundary_upstream_connect_duration_seconds: {
    name: 'boundary_upstream_connect_duration_seconds',
    type: 'histogram',
    unit: 'seconds',
    help: 'TCP connect to the pinned upstream address, until accepted',
    labels: NONE,
    buckets: CONNECT_BUCKETS,
    scope: 'boundary',
  },
  boundary_upstream_first_byte_duration_seconds: {
    name: 'boundary_upstream_first_byte_duration_seconds',
    type: 'histogram',
    unit: 'seconds',
    help: 'Forwarded and inspected HTTP requests: request sent until the upstream response head arrived',
    labels: NONE,
    buckets: FIRST_BYTE_BUCKETS,
    scope: 'boundary',
  },
  boundary_tls_handshake_duration_seconds: {
    name: 'boundary_tls_handshake_duration_seconds',
    type: 'histogram',
    unit: 'seconds',
    help: 'Completed TLS handshakes: client (interception, boundary serves a leaf) and upstream (boundary verifies)',
    labels: { side: ['client', 'upstream'] },
    buckets: TLS_BUCKETS,
    scope: 'boundary',
  },
  boundary_http_request_bytes: {
    name: 'boundary_http_request_bytes',
    type: 'histogram',
    unit: 'bytes',
    help: 'Request body bytes sent upstream per forwarded or inspected request (Content-Length or rewritten size)',
    labels: NONE,
    buckets: BYTE_BUCKETS,
    scope: 'boundary',
  },
  boundary_http_response_bytes: {
    name: 'boundary_http_response_bytes',
    type: 'histogram',
    unit: 'bytes',
    help: 'Response body bytes relayed to the client per completed forwarded or inspected request',
    labels: NONE,
    buckets: BYTE_BUCKETS,
    scope: 'boundary',
  },
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
    help: 'Policy DNS queries answered REFUSED over a rate limit: on refused names, on new names (counted as they are reported)',
    labels: { limit: ['refused', 'unique'] },
    scope: 'boundary',
  },
  boundary_dns_tunnel_names_total: {
    name: 'boundary_dns_tunnel_names_total',
    type: 'counter',
    unit: '',
    help: 'Names under an allowed wildcard flagged as tunnelling-shaped, by detection mode (enforce: refused)',
    labels: { mode: ['audit', 'enforce'] },
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
  boundary_control_state: {
    name: 'boundary_control_state',
    type: 'gauge',
    unit: '',
    help: 'Attached mode: 1 for the control channel state now, 0 for the others',
    labels: { state: CONTROL_STATES },
    scope: 'boundary',
  },
  boundary_control_reconnects_total: {
    name: 'boundary_control_reconnects_total',
    type: 'counter',
    unit: '',
    help: 'Attached mode: failed attaches and ended sessions by error kind',
    labels: { kind: [...CONTROL_ERROR_KINDS, 'session-ended'] },
    scope: 'boundary',
  },
  boundary_control_events_total: {
    name: 'boundary_control_events_total',
    type: 'counter',
    unit: '',
    help: 'Attached mode: audit events forwarded to the supervisor or dropped (buffer full, send failed)',
    labels: { outcome: ['forwarded', 'dropped'] },
    scope: 'boundary',
  },
  boundary_control_certificate_expiry_seconds: {
    name: 'boundary_control_certificate_expiry_seconds',
    type: 'gauge',
    unit: 'seconds',
    help: 'notAfter of the control client certificate in use, as unix time in seconds',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_supervisor_certificate_expiry_seconds: {
    name: 'boundary_supervisor_certificate_expiry_seconds',
    type: 'gauge',
    unit: 'seconds',
    help: 'notAfter of the supervisor serving certificate in use, as unix time in seconds',
    labels: NONE,
    scope: 'supervisor',
  },
} as const satisfies Record<string, MetricSpec>;

export type MetricName = keyof typeof METRICS;

/** Every entry's key equals its name: one spelling, checked by the catalogue test. */
export function catalogueEntries(): readonly MetricSpec[] {
  return Object.values(METRICS);
}
