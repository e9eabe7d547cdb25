// Aggregates policy DNS's per-query events (DNS Activity QUERY, and the NET:REFUSE beside a refusal) on their way
// to the audit sink: the first occurrence of each (name, qtype, rcode, decision) goes out at once, its repeats are
// counted and go out as one event with `unmapped.count` per interval (docs/events.md#aggregated-dns-events).
// Every other event passes straight through. Owns one timer; time is injected. Never drops an occurrence.

import type { AuditEvent, AuditSink } from '../telemetry/event.js';

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

/** The timer shape of http1/timers.ts (dns/ does not import http1/); the root passes GLOBAL_TIMERS, tests fake ones. */
export interface AggregateTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface DnsEventAggregator {
  /** Where policy DNS emits. */
  readonly sink: AuditSink;
  /** Writes every pending count now. */
  flush(): void;
  /** flush(), and stops the timer; later events pass straight through. Idempotent. */
  close(): void;
}

interface Slot {
  /** The first occurrence, as written: the aggregate repeats its fields. */
  readonly first: AuditEvent;
  /** Occurrences since the last event written for this key. */
  count: number;
  /** Epoch ms of the first counted occurrence; the aggregate ends when it is written (no clock read per repeat). */
  startTime: number;
}

/**
 * Per-query events worth aggregating: every DNS QUERY and the NET:REFUSE policy DNS writes beside a refusal. Each
 * names the asker (`src`); an event without one already speaks for many queries (the rate limits' own reports,
 * dns/rate-limit.ts, and these aggregates) and passes through, or its own counts would be folded into ours.
 */
function aggregated(event: AuditEvent): boolean {
  if (event.src === undefined) return false;
  return (event.class === 'DNS' && event.activity === 'QUERY') || (event.class === 'NET' && event.activity === 'REFUSE' && event.engine === 'dns');
}

export function createDnsEventAggregator(options: {
  readonly sink: AuditSink;
  readonly now: () => number;
  readonly timers: AggregateTimers;
  readonly intervalMs?: number;
  readonly maxKeys?: number;
}): DnsEventAggregator {
  const { sink, now, timers } = options;
  const intervalMs = options.intervalMs ?? DNS_EVENT_INTERVAL_MS;
  const maxKeys = options.maxKeys ?? MAX_DNS_EVENT_KEYS;
  const slots = new Map<string, Slot>();
  // policy-dns.ts stamps every answer's events from one prepared base: events of one question share their
  // `unmapped` object, so its key is built once per base, not once per query.
  const keys = new WeakMap<object, string>();
  let timer: unknown;
  let closed = false;

  function keyOf(event: AuditEvent): string {
    const u = event.unmapped;
    let key = u === undefined ? undefined : keys.get(u);
    if (key === undefined) {
      key = `${event.class}|${event.activity}|${event.dst?.host ?? ''}|${String(u?.qtype ?? '')}|${String(u?.rcode ?? '')}|${event.action ?? ''}|${String(u?.reason_code ?? '')}|${event.statusDetail ?? ''}`;
      if (u !== undefined) keys.set(u, key);
    }
    return key;
  }

  /** The aggregate of a slot's counted repeats: the first occurrence's fields, no source (repeats come from many ports). */
  function aggregateOf(slot: Slot, endTime: number): AuditEvent {
    const { first, count, startTime } = slot;
    const { src: _src, ...rest } = first;
    return {
      ...rest,
      message: `${first.message} (${count} more in ${Math.max(1, Math.ceil((endTime - startTime) / 1000))} s)`,
      unmapped: { ...first.unmapped, count, start_time: startTime, end_time: endTime, interval_ms: intervalMs },
    };
  }

  /** Writes each counted slot; a slot that saw no repeat is forgotten, so its next occurrence is a first again. */
  function flush(): void {
    const at = now();
    for (const [key, slot] of slots) {
      if (slot.count === 0) {
        slots.delete(key);
        continue;
      }
      sink.emit(aggregateOf(slot, at));
      slot.count = 0;
    }
  }

  function onInterval(): void {
    timer = undefined;
    flush();
    if (slots.size > 0 && !closed) timer = timers.setTimeout(onInterval, intervalMs);
  }

  function emit(event: AuditEvent): void {
    if (closed || !aggregated(event)) {
      sink.emit(event);
      return;
    }
    const key = keyOf(event);
    const slot = slots.get(key);
    if (slot !== undefined) {
      if (slot.count === 0) slot.startTime = now();
      slot.count++;
      return;
    }
    if (slots.size >= maxKeys) {
      flush();
      // Still full: every slot had repeats and is kept for the next interval; start over rather than grow.
      if (slots.size >= maxKeys) slots.clear();
    }
    sink.emit(event);
    slots.set(key, { first: event, count: 0, startTime: 0 });
    timer ??= timers.setTimeout(onInterval, intervalMs);
  }

  return {
    sink: { emit },
    flush,
    close() {
      if (closed) return;
      closed = true;
      if (timer !== undefined) timers.clearTimeout(timer);
      timer = undefined;
      flush();
      slots.clear();
    },
  };
}
