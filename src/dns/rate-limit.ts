// Policy DNS's rate limits (docs/dns.md#rate-limits): token buckets on refused and on new names, the REFUSED that an
// over-limit query gets, and the aggregated report of how many there were. No timers: buckets refill when asked.

import type { Policy } from '../policy/types.js';
import type { AuditEvent, AuditSink } from '../telemetry/event.js';
import { type DnsQuery, RCODES } from './answer.js';

/**
 * Policy refusals per second answered in full (NXDOMAIN with an SOA, a DNS Activity and a NET:REFUSE event each).
 * A workload that asks for names it may not have a few times a second is normal (a retry, a probe); a flood of them
 * is not, and every event is a log line. Beyond the bucket the answer is REFUSED, built from the query alone.
 */
export const REFUSED_NAMES_PER_SECOND = 20;
/** Refusals in a burst before the rate applies: a tool probing a handful of names at start-up stays in full. */
export const REFUSED_NAMES_BURST = 200;
/**
 * New names resolved upstream per second (a cache miss that no other query is already resolving). This is the
 * bandwidth a DNS tunnel gets under an allowed wildcard: each new name carries up to ~250 bytes to the zone's server.
 * A workload re-resolves each name it uses at most once per mapping TTL (30 s at most), so 10/s keeps 300 names live.
 */
export const UNIQUE_NAMES_PER_SECOND = 10;
/** New names in a burst: a start-up that resolves every dependency at once (package registries, APIs, CDNs). */
export const UNIQUE_NAMES_BURST = 100;
/** Over-limit queries get one event when the limit is first hit, then at most one per interval with the count. */
export const LIMIT_REPORT_INTERVAL_MS = 10_000;

export const RATE_LIMITS = ['refused', 'unique'] as const;
export type RateLimitName = (typeof RATE_LIMITS)[number];

export interface RateLimitSettings {
  readonly refusedPerSecond: number;
  readonly refusedBurst: number;
  readonly uniquePerSecond: number;
  readonly uniqueBurst: number;
}

export const DEFAULT_RATE_LIMITS: RateLimitSettings = Object.freeze({
  refusedPerSecond: REFUSED_NAMES_PER_SECOND,
  refusedBurst: REFUSED_NAMES_BURST,
  uniquePerSecond: UNIQUE_NAMES_PER_SECOND,
  uniqueBurst: UNIQUE_NAMES_BURST,
});

export interface TokenBucket {
  /** Takes one token if there is one. */
  take(): boolean;
}

/** Starts full; refills continuously at `perSecond` up to `burst`, computed from `now` at each take(). */
export function createTokenBucket(options: { readonly perSecond: number; readonly burst: number; readonly now: () => number }): TokenBucket {
  const { perSecond, burst, now } = options;
  let tokens = burst;
  let last = now();
  return {
    take() {
      const t = now();
      // A clock that steps back refills nothing (and never drains).
      if (t > last) {
        tokens = Math.min(burst, tokens + ((t - last) * perSecond) / 1_000);
        last = t;
      }
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
  };
}

const FLAG_QR = 0x8000;
const FLAG_RD = 0x0100;
const FLAG_RA = 0x0080;

/**
 * The cheapest answer there is: the query's own header and question with QR, RA and RCODE REFUSED, no records and no
 * OPT. REFUSED, not the policy refusal's NXDOMAIN: stubs read it as "ask later" (EAI_AGAIN), which is what a limit
 * means, and it needs no SOA to encode.
 */
export function refusedFromQuery(query: DnsQuery): Buffer {
  const out = Buffer.allocUnsafe(query.questionEnd);
  query.wire.copy(out, 0, 0, query.questionEnd);
  out.writeUInt16BE(FLAG_QR | (query.rd ? FLAG_RD : 0) | FLAG_RA | RCODES.REFUSED, 2);
  out.writeUInt16BE(1, 4);
  out.writeUInt32BE(0, 6);
  out.writeUInt16BE(0, 10);
  return out;
}

/** Counts over-limit queries and reports them: at once on the first, then once per interval with the count. */
export interface LimitReport {
  count(policy: Policy, name: string): void;
  /** Reports what is pending once the interval has passed (the server's tick). */
  flush(policy: Policy): void;
  total(): number;
}

export function createLimitReport(options: {
  readonly limit: RateLimitName;
  readonly perSecond: number;
  readonly burst: number;
  readonly sink: AuditSink;
  readonly now: () => number;
}): LimitReport {
  const { sink, now } = options;
  let total = 0;
  let pending = 0;
  let reportedAt = Number.NEGATIVE_INFINITY;

  function report(policy: Policy, queries: number, name: string | undefined): void {
    reportedAt = now();
    pending = 0;
    sink.emit(limitEvent({ ...options, policy, queries, name }));
  }

  return {
    count(policy, name) {
      total++;
      pending++;
      if (now() - reportedAt >= LIMIT_REPORT_INTERVAL_MS) report(policy, pending, pending === 1 ? name : undefined);
    },
    flush(policy) {
      if (pending > 0 && now() - reportedAt >= LIMIT_REPORT_INTERVAL_MS) report(policy, pending, undefined);
    },
    total: () => total,
  };
}

function limitEvent(o: { limit: RateLimitName; perSecond: number; burst: number; policy: Policy; queries: number; name: string | undefined }): AuditEvent {
  const what = o.limit === 'refused' ? 'refused names' : 'new names';
  return {
    class: 'NET',
    activity: 'REFUSE',
    severity: 'MED',
    action: 'DENIED',
    engine: 'dns',
    ...(o.name === undefined ? {} : { dst: { host: o.name } }),
    statusDetail: 'policy_dns_rate_limited',
    message: `Policy DNS rate limit on ${what} (${o.perSecond}/s, burst ${o.burst}): ${o.queries} ${o.queries === 1 ? 'query' : 'queries'} answered REFUSED`,
    generation: o.policy.generation,
    policyHash: o.policy.hash,
    unmapped: { limit: o.limit, queries: o.queries, rate_per_second: o.perSecond, burst: o.burst, rcode: 'REFUSED' },
  };
}
