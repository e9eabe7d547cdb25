// Aggregates repeated events on their way to the audit sink: the first occurrence of each key goes out at once, its
// repeats are counted and go out as one event with `unmapped.count` per interval (docs/events.md#aggregated-dns-events).
// Events the owner's predicate does not pick pass straight through. Owns one timer; time is injected. Never drops
// an occurrence. The owner (dns/event-aggregate.ts, the proxy's parser refusals) says which events repeat and how.

import type { AuditEvent, AuditSink } from './event.js';

/** The timer shape of shared/timers.ts; the root passes GLOBAL_TIMERS, tests fake ones. */
export interface AggregateTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface EventAggregator {
  /** Where the owner emits. */
  readonly sink: AuditSink;
  /** Writes every pending count now. */
  flush(): void;
  /** flush(), and stops the timer; later events pass straight through. Idempotent. */
  close(): void;
}

export interface EventAggregatorOptions {
  readonly sink: AuditSink;
  readonly now: () => number;
  readonly timers: AggregateTimers;
  /** How long repeats of one key are counted before their event goes out. */
  readonly intervalMs: number;
  /** Keys counted at once; reaching it flushes every count early, so memory stays bounded and nothing is lost. */
  readonly maxKeys: number;
  /** Whether an event is one of the repeating kind; only those are counted. Each must name its asker (`src`). */
  aggregated(event: AuditEvent): boolean;
  /** What makes two occurrences the same: every field the aggregate repeats, and the source address if it keeps one. */
  keyOf(event: AuditEvent): string;
  /** The aggregate keeps the source's address (never its port): the owner's key then includes it. */
  readonly perSource?: boolean;
}

interface Slot {
  /** The first occurrence, as written: the aggregate repeats its fields. */
  readonly first: AuditEvent;
  /** Occurrences since the last event written for this key. */
  count: number;
  /** Epoch ms of the first counted occurrence; the aggregate ends when it is written (no clock read per repeat). */
  startTime: number;
}

export function createEventAggregator(options: EventAggregatorOptions): EventAggregator {
  const { sink, now, timers, intervalMs, maxKeys, aggregated, keyOf } = options;
  const perSource = options.perSource === true;
  const slots = new Map<string, Slot>();
  let timer: unknown;
  let closed = false;

  /** The aggregate of a slot's counted repeats: the first occurrence's fields, no source port (repeats come from many). */
  function aggregateOf(slot: Slot, endTime: number): AuditEvent {
    const { first, count, startTime } = slot;
    const { src, ...rest } = first;
    return {
      ...rest,
      ...(perSource && src?.ip !== undefined ? { src: { ip: src.ip } } : {}),
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
    // An event without a source already speaks for many occurrences (an aggregate, a rate limit's report).
    if (closed || event.src === undefined || !aggregated(event)) {
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
