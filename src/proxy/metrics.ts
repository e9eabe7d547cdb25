// The proxy's metrics (catalogue entries in src/metric-catalogue.ts): decisions by adapter, verdict, reason and
// policy name, credential outcomes, connection gauges and the request-path histograms. The per-request path only
// bumps plain counts (added to the counters at scrape time) and calls observe() on series bound at start.

import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { MAX_POLICY_LABELS, type MetricAdapter, NO_POLICY_LABEL, PROXY_METRICS } from './metric-specs.js';
import type { FloodKind } from '../http2/flood-guard.js';
import type { Adapter } from '../policy/types.js';
import { createCounter, createGauge, createHistogram, metricsOff, type Observer, OTHER_LABEL_VALUE, type PlainGauge, plainGauge } from '../telemetry/metrics.js';
import { ADMISSION_LISTENERS, type AdmissionListener, OUTCOME_VERDICTS, type Outcome, type OutcomeVerdict, type ReasonCode, type RefusedConnectionReason } from '../chain/events.js';

export interface ProxyMetrics {
  /** Counts one connection or request outcome: adapter, verdict, reason, policy name and credential refusal. */
  readonly countOutcome: (o: Outcome) => void;
  readonly countDecision: (adapter: Adapter, verdict: OutcomeVerdict, reason: ReasonCode) => void;
  /**
   * The count of policy DNS answers of one verdict, reason and policy (adapter `dns`), resolved once: policy DNS
   * binds it per prepared answer and counts each query with one call, no lookups.
   */
  readonly bindDns: (verdict: 'allow' | 'deny', reason: string | undefined, policy: string | undefined) => { inc(): void };
  /** The loaded policy's network_policies keys: each becomes a `policy` label value (bounded), created at zero. */
  readonly setPolicies: (names: readonly string[]) => void;
  readonly refusedConnections: { inc(labels: { reason: RefusedConnectionReason }): void };
  /** A connection reaped by the first-byte timeout (proxy/admission.ts); rare, so counted directly. */
  readonly firstByteTimeouts: { inc(labels: { listener: AdmissionListener }): void };
  /** Registers how many distinct sources a listener holds now; read at scrape time, never on the accept path. */
  readonly watchSources: (listener: AdmissionListener, count: () => number) => void;
  /** Registers the HTTP/2 server's open client sessions and kept upstream clients; read at scrape time. */
  readonly watchHttp2: (counts: { readonly clientSessions: () => number; readonly upstreamClients: () => number; readonly upstreamHeld: () => number }) => void;
  /** A client session the flood guard closed; rare, so counted directly. */
  readonly http2FloodClosed: { inc(labels: { flood: FloodKind }): void };
  /** A client stream reset for a stalled answer; rare, so counted directly. */
  readonly http2StalledStreams: { inc(labels: Record<never, never>): void };
  readonly clientErrors: { inc(labels: { reason: 'head-too-large' | 'timeout' | 'reset' | 'malformed' }): void };
  readonly credentialsSubstituted: () => void;
  readonly connections: PlainGauge;
  readonly connectionsLimit: PlainGauge;
  readonly tunnels: PlainGauge;
  readonly reloadClosed: { inc(labels: Record<never, never>): void };
  /** Monotonic ms for the histograms below; a constant when metrics are off, so nothing is read from the clock. */
  readonly now: () => number;
  readonly decisionSeconds: Observer;
  readonly upstreamConnectSeconds: Observer;
  readonly firstByteSeconds: Observer;
  readonly tlsClientSeconds: Observer;
  readonly tlsUpstreamSeconds: Observer;
  readonly requestBytes: Observer;
  readonly responseBytes: Observer;
}

function metricAdapter(adapter: Adapter): MetricAdapter | typeof OTHER_LABEL_VALUE {
  if (adapter === 'capture') return 'transparent';
  return adapter === 'explain' ? OTHER_LABEL_VALUE : adapter;
}

/** One label combination's count not yet added to the counters. */
interface PendingCount {
  readonly adapter: MetricAdapter | typeof OTHER_LABEL_VALUE;
  readonly verdict: OutcomeVerdict;
  readonly reason: string;
  count: number;
}

const VERDICT_INDEX: Readonly<Record<OutcomeVerdict, number>> = { allow: 0, audit: 1, deny: 2, fail: 3 };

export function createProxyMetrics(registry: Registry): ProxyMetrics {
  // adapter -> verdict -> reason: three lookups with the caller's codes, no key or label object built.
  // Bounded by the closed label sets themselves, as the counters' own series are.
  const pending = new Map<string, Map<string, Map<string, PendingCount>>>();
  // policy label -> counts per verdict (VERDICT_INDEX); bounded by MAX_POLICY_LABELS + none + other.
  const policyCounts = new Map<string, number[]>();
  const policyLabels = new Set<string>([NO_POLICY_LABEL, OTHER_LABEL_VALUE]);
  let flushing = false;

  function flush(): void {
    if (flushing) return;
    flushing = true;
    try {
      for (const verdicts of pending.values()) {
        for (const reasons of verdicts.values()) {
          for (const entry of reasons.values()) {
            if (entry.count === 0) continue;
            const { adapter, verdict, reason, count } = entry;
            entry.count = 0;
            detailed.inc({ adapter: adapter as MetricAdapter, verdict, reason: reason as ReasonCode }, count);
            byAdapter.inc({ adapter: adapter as MetricAdapter, verdict }, count);
            if (verdict === 'deny') denials.inc({ reason: reason as ReasonCode }, count);
          }
        }
      }
      for (const [policy, counts] of policyCounts) {
        for (let i = 0; i < OUTCOME_VERDICTS.length; i++) {
          const n = counts[i] ?? 0;
          if (n === 0) continue;
          counts[i] = 0;
          byPolicy.inc({ policy, verdict: OUTCOME_VERDICTS[i] as OutcomeVerdict }, n);
        }
      }
    } finally {
      flushing = false;
    }
  }
  const detailed = createCounter(registry, PROXY_METRICS.boundary_proxy_decisions_total, { collect: flush });
  const byAdapter = createCounter(registry, PROXY_METRICS.boundary_decisions_total, { collect: flush });
  const denials = createCounter(registry, PROXY_METRICS.boundary_denials_total, { collect: flush });
  const byPolicy = createCounter(registry, PROXY_METRICS.boundary_policy_decisions_total, { collect: flush });
  const credentialsRefused = createCounter(registry, PROXY_METRICS.boundary_credentials_refused_total);
  let substituted = 0;
  // Tallied per request, added at scrape time.
  createCounter(registry, PROXY_METRICS.boundary_credentials_substituted_total, {
    collect(counter) {
      if (substituted === 0) return;
      counter.inc({}, substituted);
      substituted = 0;
    },
  });

  function presetPolicy(policy: string): void {
    for (const verdict of OUTCOME_VERDICTS) byPolicy.inc({ policy, verdict }, 0);
  }
  for (const policy of policyLabels) presetPolicy(policy);

  /** The pending count of one label combination; entries are reset at a scrape, never removed, so one may be held. */
  function pendingCount(adapter: Adapter, verdict: OutcomeVerdict, reason: string): PendingCount {
    let verdicts = pending.get(adapter);
    if (verdicts === undefined) {
      verdicts = new Map();
      pending.set(adapter, verdicts);
    }
    let reasons = verdicts.get(verdict);
    if (reasons === undefined) {
      reasons = new Map();
      verdicts.set(verdict, reasons);
    }
    let entry = reasons.get(reason);
    if (entry === undefined) {
      entry = { adapter: metricAdapter(adapter), verdict, reason, count: 0 };
      reasons.set(reason, entry);
    }
    return entry;
  }

  function countDecision(adapter: Adapter, verdict: OutcomeVerdict, reason: string): void {
    pendingCount(adapter, verdict, reason).count++;
  }

  /** The per-verdict counts of a policy label; like pendingCount's entries, reset at a scrape and never removed. */
  function policyCountsOf(label: string): number[] {
    let counts = policyCounts.get(label);
    if (counts === undefined) {
      counts = [0, 0, 0, 0];
      policyCounts.set(label, counts);
    }
    return counts;
  }

  function countPolicy(policy: string | undefined, verdict: OutcomeVerdict): void {
    const counts = policyCountsOf(policy === undefined ? NO_POLICY_LABEL : policyLabels.has(policy) ? policy : OTHER_LABEL_VALUE);
    counts[VERDICT_INDEX[verdict]] = (counts[VERDICT_INDEX[verdict]] ?? 0) + 1;
  }

  const sourceCounts = new Map<AdmissionListener, () => number>();
  createGauge(registry, PROXY_METRICS.boundary_proxy_connection_sources, {
    collect(gauge) {
      for (const listener of ADMISSION_LISTENERS) gauge.set({ listener }, sourceCounts.get(listener)?.() ?? 0);
    },
  });

  let http2: Parameters<ProxyMetrics['watchHttp2']>[0] | undefined;
  createGauge(registry, PROXY_METRICS.boundary_http2_client_sessions, {
    collect: (gauge) => gauge.set({}, http2?.clientSessions() ?? 0),
  });
  createGauge(registry, PROXY_METRICS.boundary_http2_upstream_clients, {
    collect: (gauge) => gauge.set({}, http2?.upstreamClients() ?? 0),
  });
  createGauge(registry, PROXY_METRICS.boundary_http2_upstream_held_streams, {
    collect: (gauge) => gauge.set({}, http2?.upstreamHeld() ?? 0),
  });

  const off = metricsOff(registry);
  const tls = createHistogram(registry, PROXY_METRICS.boundary_tls_handshake_duration_seconds);
  return {
    countOutcome(o) {
      countDecision(o.adapter, o.verdict, o.reason);
      countPolicy(o.policy, o.verdict);
      const credential = o.extra?.credential_reason;
      if (typeof credential === 'string') credentialsRefused.inc({ reason: credential as never });
    },
    countDecision,
    bindDns(verdict, reason, policy) {
      const entry = pendingCount('dns', verdict, reason ?? (verdict === 'allow' ? 'endpoint-allowed' : OTHER_LABEL_VALUE));
      const index = VERDICT_INDEX[verdict];
      // setPolicies only ever adds labels: a known one (or none) stays what it is, an unknown one may become known.
      const counts = policy === undefined || policyLabels.has(policy) ? policyCountsOf(policy ?? NO_POLICY_LABEL) : undefined;
      return {
        inc() {
          entry.count++;
          if (counts === undefined) countPolicy(policy, verdict);
          else counts[index] = (counts[index] ?? 0) + 1;
        },
      };
    },
    setPolicies(names) {
      for (const name of names) {
        if (policyLabels.size >= MAX_POLICY_LABELS + 2) break;
        if (policyLabels.has(name)) continue;
        policyLabels.add(name);
        presetPolicy(name);
      }
    },
    refusedConnections: createCounter(registry, PROXY_METRICS.boundary_proxy_refused_connections_total),
    firstByteTimeouts: createCounter(registry, PROXY_METRICS.boundary_proxy_first_byte_timeouts_total),
    watchSources(listener, count) {
      sourceCounts.set(listener, count);
    },
    watchHttp2(counts) {
      http2 = counts;
    },
    http2FloodClosed: createCounter(registry, PROXY_METRICS.boundary_http2_flood_closed_total),
    http2StalledStreams: createCounter(registry, PROXY_METRICS.boundary_http2_stalled_streams_total),
    clientErrors: createCounter(registry, PROXY_METRICS.boundary_proxy_client_errors_total),
    credentialsSubstituted: () => {
      substituted++;
    },
    connections: plainGauge(createGauge(registry, PROXY_METRICS.boundary_proxy_connections)),
    connectionsLimit: plainGauge(createGauge(registry, PROXY_METRICS.boundary_proxy_connections_limit)),
    tunnels: plainGauge(createGauge(registry, PROXY_METRICS.boundary_proxy_tunnels)),
    reloadClosed: createCounter(registry, PROXY_METRICS.boundary_proxy_reload_closed_total),
    now: off ? () => 0 : () => performance.now(),
    decisionSeconds: createHistogram(registry, PROXY_METRICS.boundary_decision_duration_seconds).bind({}),
    upstreamConnectSeconds: createHistogram(registry, PROXY_METRICS.boundary_upstream_connect_duration_seconds).bind({}),
    firstByteSeconds: createHistogram(registry, PROXY_METRICS.boundary_upstream_first_byte_duration_seconds).bind({}),
    tlsClientSeconds: tls.bind({ side: 'client' }),
    tlsUpstreamSeconds: tls.bind({ side: 'upstream' }),
    requestBytes: createHistogram(registry, PROXY_METRICS.boundary_http_request_bytes).bind({}),
    responseBytes: createHistogram(registry, PROXY_METRICS.boundary_http_response_bytes).bind({}),
  };
}
