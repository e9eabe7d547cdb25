// The proxy's metrics (src/proxy/metrics.ts records them), with their label vocabularies: name, help, type, unit, each
// label's closed value set and histogram buckets. Declares; never records. app/metric-catalogue.ts lists every part's.

import { REFUSAL_REASONS } from '../credentials/outcome.js';
import { FLOOD_KINDS } from '../http2/flood-guard.js';
import { DNS_DECISION_REASONS } from '../policy/types.js';
import { BYTE_BUCKETS, CONNECT_BUCKETS, DECISION_BUCKETS, FIRST_BYTE_BUCKETS, TLS_BUCKETS } from '../telemetry/metric-buckets.js';
import type { MetricSpec } from '../telemetry/metrics.js';
import { ADMISSION_LISTENERS, CLIENT_ERROR_REASONS, OUTCOME_VERDICTS, REASON_CODES, REFUSED_CONNECTION_REASONS } from '../chain/events.js';

const NONE = {} as const;

/** Policy names (network_policies keys) labelled one by one; the rest of a larger policy is counted as `other`. */
export const MAX_POLICY_LABELS = 64;

/** The `policy` label of a decision that no policy entry made (no endpoint matched, a parse refusal, ...). */
export const NO_POLICY_LABEL = 'none';

/** Adapters as metric labels: capture is `transparent` here, as the operator knows it. */
export const METRIC_ADAPTERS = ['forward', 'connect', 'l7', 'transparent', 'dns'] as const;

export type MetricAdapter = (typeof METRIC_ADAPTERS)[number];

/** proxy/events.ts REASON_CODES once each (a reason shared by decide() and the proxy is listed in both sets). */
export const PROXY_REASONS = [...new Set(REASON_CODES)];

/** Every reason a refusal can carry: the proxy's and policy DNS's, without the allow reasons. */
export const DENIAL_REASONS = [...new Set([...REASON_CODES, ...DNS_DECISION_REASONS, 'invalid-name'])].filter((reason) => !reason.endsWith('-allowed'));

export const PROXY_METRICS = {
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
    help: 'HTTP/2 clients kept for origins: one per pinned destination (a replaced one until its streams end), and one per tunnel past its share of it',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_http2_upstream_held_streams: {
    name: 'boundary_http2_upstream_held_streams',
    type: 'gauge',
    unit: '',
    help: 'Streams open on upstream HTTP/2 sessions whose workload client is not reading them: each holds a slot of its origin until the client reads or limits.h2StallTimeoutMs resets it',
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
  boundary_http2_stalled_streams_total: {
    name: 'boundary_http2_stalled_streams_total',
    type: 'counter',
    unit: '',
    help: 'HTTP/2 client streams reset ENHANCE_YOUR_CALM because their answer moved nothing for limits.h2StallTimeoutMs while it waited on the client',
    labels: NONE,
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
    help: 'Time decide() took for each proxy intent it evaluated (an answer remembered for the same policy is not timed)',
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
} as const satisfies Record<string, MetricSpec>;
