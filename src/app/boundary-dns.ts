// Policy DNS wiring for the composition root (boundary.ts, which stays under its size cap): the one lookup gate that
// policy DNS and the proxy share, the path DNS audit events take (counted per query, then aggregated, then the
// boundary's sink) and the handler wrapper that times answers. bench/dns-server.ts builds the same, so the benchmark
// measures what production runs.

import { createDnsEventAggregator, type DnsEventAggregator } from '../dns/event-aggregate.js';
import { lookupReportEvent } from '../dns/lookup-events.js';
import type { Registry } from 'prom-client';
import type { Config } from './config.js';
import { countLookupReport, createLookupMetrics, type LookupMetrics, meteredDnsSink } from '../dns/metrics.js';
import type { DnsAnswer, DnsHandler } from '../dns/server.js';
import { GLOBAL_TIMERS } from '../shared/timers.js';
import { observeSince } from '../chain/timing.js';
import { createLookupGate, type LookupGate } from '../net/lookup-gate.js';
import type { Resolver } from '../net/resolver.js';
import type { Policy } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Observer } from '../telemetry/metrics.js';

/**
 * The one lookup gate (docs/dns.md#the-lookup-gate), built once and handed to policy DNS and the proxy, with its
 * counters: its reports become the policy_dns_rate_limited and policy_dns_tunnel_suspected events, stamped with the
 * policy in force, counted on their way to `sink`.
 */
export function createBoundaryLookups(options: {
  readonly config: Pick<Config, 'dnsTunnelDetection' | 'newNamesPerSecond' | 'newNamesBurst'>;
  readonly resolver: Resolver;
  readonly now: () => number;
  readonly policy: () => Policy;
  readonly sink: AuditSink;
  readonly registry: Registry;
}): { readonly lookups: LookupGate; readonly metrics: LookupMetrics } {
  const { config, sink, policy } = options;
  const metrics = createLookupMetrics(options.registry);
  const lookups = createLookupGate({
    resolver: options.resolver,
    now: options.now,
    tunnelDetection: config.dnsTunnelDetection,
    newNames: { perSecond: config.newNamesPerSecond, burst: config.newNamesBurst },
    report(report) {
      const event = lookupReportEvent(report, policy());
      countLookupReport(metrics, event);
      sink.emit(event);
    },
  });
  return { lookups, metrics };
}

type DnsMetricsArgs = Parameters<typeof meteredDnsSink>;

/**
 * The sink policy DNS emits into: every query is counted (metrics see each one), then per-query events are
 * aggregated (dns/event-aggregate.ts) before `sink`. close() writes the pending counts: call it after the DNS
 * listener closed and before telemetry does.
 */
export function createDnsEventSink(options: {
  readonly sink: AuditSink;
  readonly metrics: DnsMetricsArgs[1];
  readonly decisions?: DnsMetricsArgs[2];
  readonly now: () => number;
}): DnsEventAggregator {
  const aggregator = createDnsEventAggregator({ sink: options.sink, now: options.now, timers: GLOBAL_TIMERS });
  return { ...aggregator, sink: meteredDnsSink(aggregator.sink, options.metrics, options.decisions) };
}

/**
 * `handler` with each answer's time recorded on `answerSeconds`; an upstream answer leaves only once `settled`
 * (the capture listeners are bound), so a client that connects at once is never refused.
 */
export function timedDnsHandler(
  handler: DnsHandler,
  options: { readonly clock: { readonly now: () => number }; readonly answerSeconds: Observer; readonly settled: () => Promise<void> | undefined },
): DnsHandler {
  const { clock, answerSeconds, settled } = options;
  const resolved = async (pending: Promise<DnsAnswer>, started: number): Promise<DnsAnswer> => {
    const response = await pending;
    await settled();
    observeSince(clock, answerSeconds, started);
    return response;
  };
  return {
    answer: function answerTimed(message, info) {
      const started = clock.now();
      const answer = handler.answer(message, info);
      if (answer instanceof Promise) return resolved(answer, started);
      observeSince(clock, answerSeconds, started);
      return answer;
    },
  };
}
