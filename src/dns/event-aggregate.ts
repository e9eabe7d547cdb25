// Aggregates policy DNS's per-query events (DNS Activity QUERY, and the NET:REFUSE beside a refusal) on their way
// to the audit sink: the first occurrence of each (name, qtype, rcode, decision) goes out at once, its repeats are
// counted and go out as one event with `unmapped.count` per interval (docs/events.md#aggregated-dns-events).
// Every other event passes straight through; the counting is telemetry/event-aggregate.ts's.

import { type AggregateTimers, createEventAggregator, type EventAggregator } from '../telemetry/event-aggregate.js';
import type { AuditEvent, AuditSink } from '../telemetry/event.js';

export type { AggregateTimers } from '../telemetry/event-aggregate.js';

/**
 * How long repeats of one question are counted before their event goes out. A stub resolver retrying a refused
 * name, or a client that ignores TTLs, asks the same question thousands of times a second; 10 s keeps a denial
 * loop visible within seconds while the log writes one line per question per interval instead of per query.
 */
export const DNS_EVENT_INTERVAL_MS = 10_000;
/**
 * Distinct questions counted at once. Reaching it flushes every count early (nothing is lost, and memory stays
 * bounded under a flood of unique names, each of which is a first occurrence written at once anyway).
 */
export const MAX_DNS_EVENT_KEYS = 4_096;

export type DnsEventAggregator = EventAggregator;

/**
 * Per-query events worth aggregating: every DNS QUERY and the NET:REFUSE policy DNS writes beside a refusal. Each
 * names the asker (`src`); an event without one already speaks for many queries (the rate limits' own reports,
 * dns/rate-limit.ts, and these aggregates) and passes through, or its own counts would be folded into ours.
 */
function aggregated(event: AuditEvent): boolean {
  return (event.class === 'DNS' && event.activity === 'QUERY') || (event.class === 'NET' && event.activity === 'REFUSE' && event.engine === 'dns');
}

export function createDnsEventAggregator(options: {
  readonly sink: AuditSink;
  readonly now: () => number;
  readonly timers: AggregateTimers;
  readonly intervalMs?: number;
  readonly maxKeys?: number;
}): DnsEventAggregator {
  // policy-dns.ts stamps every answer's events from one prepared base: events of one question share their
  // `unmapped` object, so its key is built once per base, not once per query.
  const keys = new WeakMap<object, string>();
  function keyOf(event: AuditEvent): string {
    const u = event.unmapped;
    let key = u === undefined ? undefined : keys.get(u);
    if (key === undefined) {
      key = `${event.class}|${event.activity}|${event.dst?.host ?? ''}|${String(u?.qtype ?? '')}|${String(u?.rcode ?? '')}|${event.action ?? ''}|${String(u?.reason_code ?? '')}|${event.statusDetail ?? ''}`;
      if (u !== undefined) keys.set(u, key);
    }
    return key;
  }
  return createEventAggregator({
    sink: options.sink,
    now: options.now,
    timers: options.timers,
    intervalMs: options.intervalMs ?? DNS_EVENT_INTERVAL_MS,
    maxKeys: options.maxKeys ?? MAX_DNS_EVENT_KEYS,
    aggregated,
    keyOf,
  });
}
