// The ring of recent denials behind the admin listener's /v1/denials: one record per denying decision event, made
// from closed fields only (never a message, detail text, query value, placeholder or secret). Bounded; pure.

import { type AuditEvent, type AuditSink, observedSink } from './event.js';
import { type ReplayFields, replayFromUnmapped } from './replay.js';

/** Denials kept; the oldest is dropped first. */
export const DENIAL_RING_SIZE = 256;
/** Most denials one /v1/denials answer returns (`last` is capped to it). */
export const MAX_DENIALS_PER_ANSWER = 100;
/** `last` when the request names none. */
export const DEFAULT_DENIALS_PER_ANSWER = 20;
const MAX_FIELD_CHARS = 256;

/** The digits a `last` parameter may have: enough for any cap, short enough that Number() stays exact. */
const LAST_PARAMETER = /^[0-9]{1,6}$/;

/**
 * The `last` parameter of a denials query (boundary /v1/denials, supervisor /v1/sandboxes/<id>/denials): the
 * default when absent, the whole number given (capped by the ring) otherwise; undefined when repeated or malformed.
 */
export function parseLastParameter(values: readonly string[]): number | undefined {
  if (values.length > 1) return undefined;
  const [value] = values;
  if (value === undefined) return DEFAULT_DENIALS_PER_ANSWER;
  return LAST_PARAMETER.test(value) ? Number(value) : undefined;
}

/** Why a `last` parameter was refused, for the 400 answer. */
export const LAST_PARAMETER_RULE = `last must be given at most once, as a whole number (at most ${MAX_DENIALS_PER_ANSWER} are returned)`;

export interface DenialRecord {
  /** RFC 3339. */
  readonly time: string;
  readonly adapter: string;
  readonly verdict: 'deny';
  /** The closed reason code (`no-endpoint-matched`, `ssrf-denied`, ...). */
  readonly reason: string;
  readonly engine: string | null;
  readonly policy: string | null;
  readonly endpoint: string | null;
  readonly method: string | null;
  readonly scheme: string | null;
  readonly host: string | null;
  readonly port: number | null;
  /** Canonical path without the query. */
  readonly path: string | null;
  /** Names of the query parameters present; never a value. */
  readonly queryKeys: readonly string[];
  /** DNS denials: the question type. */
  readonly qtype?: string;
  readonly generation: number | null;
  readonly policyHash: string | null;
  /** What explain is asked to replay it; absent for DNS denials, which name no port. */
  readonly replay?: ReplayFields;
}

export interface DenialRing<T extends DenialRecord = DenialRecord> {
  record(denial: T): void;
  /** The newest `n` (at most MAX_DENIALS_PER_ANSWER), newest first. */
  recent(n: number): readonly T[];
  /** Denials recorded since start, including those the ring no longer holds. */
  total(): number;
}

/** Also the supervisor's per-sandbox ring (supervisor/denials.ts), with records that say which instance. */
export function createDenialRing<T extends DenialRecord = DenialRecord>(capacity: number = DENIAL_RING_SIZE): DenialRing<T> {
  const slots: (T | undefined)[] = new Array<T | undefined>(capacity).fill(undefined);
  let next = 0;
  let count = 0;
  return {
    record(denial) {
      slots[next] = denial;
      next = (next + 1) % capacity;
      count += 1;
    },
    recent(n) {
      const want = Math.min(Math.max(0, Math.floor(n)), MAX_DENIALS_PER_ANSWER, count, capacity);
      const out: T[] = [];
      for (let i = 1; i <= want; i++) {
        const slot = slots[(next - i + capacity) % capacity];
        if (slot !== undefined) out.push(slot);
      }
      return out;
    },
    total: () => count,
  };
}

/** A string field cut to MAX_FIELD_CHARS, or null when absent or empty. */
export function denialText(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value.slice(0, MAX_FIELD_CHARS) : null;
}

/**
 * The record of a denying decision event, or undefined for every other event: proxy decisions carry
 * `unmapped.verdict: deny`; a policy DNS refusal is the DNS Activity event with action DENIED (the NET:REFUSE
 * beside it is the same refusal, so it is not counted twice).
 */
export function denialFromEvent(event: AuditEvent, time: number): DenialRecord | undefined {
  const u = event.unmapped;
  if (u === undefined || !isDenial(event)) return undefined;
  const dns = event.class === 'DNS';
  const replay = replayFromUnmapped(u);
  const record: DenialRecord = {
    time: new Date(time).toISOString(),
    adapter: dns ? 'dns' : (denialText(u.adapter) ?? 'unknown'),
    verdict: 'deny',
    reason: denialText(u.reason_code) ?? 'unknown',
    engine: event.engine ?? null,
    policy: denialText(event.policy),
    endpoint: denialText(u.endpoint),
    method: replay?.method ?? (event.http?.method ?? null),
    scheme: replay?.scheme ?? null,
    host: replay?.host ?? denialText(event.dst?.host) ?? denialText(event.dst?.ip),
    port: replay?.port ?? event.dst?.port ?? null,
    path: replay?.path ?? null,
    queryKeys: replay?.query_keys ?? [],
    ...(dns && typeof u.qtype === 'string' ? { qtype: u.qtype } : {}),
    generation: event.generation ?? null,
    policyHash: denialText(event.policyHash),
    ...(replay === undefined ? {} : { replay }),
  };
  return record;
}

/**
 * `sink`, also recording every denial into `ring` (event.ts observedSink: `subscribe` stays reachable, and
 * recording never throws into the emitter).
 */
export function recordingDenials(sink: AuditSink, ring: DenialRing, now: () => number): AuditSink {
  return observedSink(sink, (event) => {
    // The clock is read for denials only: most events are not one.
    if (!isDenial(event)) return;
    const denial = denialFromEvent(event, now());
    if (denial !== undefined) ring.record(denial);
  });
}

/** A refused query, or a denied connection or request. */
function isDenial(event: AuditEvent): boolean {
  const u = event.unmapped;
  if (u === undefined) return false;
  return event.class === 'DNS' ? event.action === 'DENIED' : u.verdict === 'deny' && (event.class === 'NET' || event.class === 'HTTP');
}
