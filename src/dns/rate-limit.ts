// Policy DNS's rate limit on refusals (docs/dns.md#rate-limits): a token bucket on refused names, the REFUSED that an
// over-limit query gets, and the aggregated report of how many there were. The new-name budget is the lookup gate's
// (net/lookup-gate.ts), shared with the proxy. No timers: the bucket refills when asked.

import { LIMIT_REPORT_INTERVAL_MS } from '../net/lookup-tally.js';
import { type BucketLimits, createTokenBucket, type TokenBucket } from '../net/token-bucket.js';
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

export const DEFAULT_REFUSAL_LIMITS: BucketLimits = Object.freeze({ perSecond: REFUSED_NAMES_PER_SECOND, burst: REFUSED_NAMES_BURST });

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

export interface RefusalLimit {
  /** A refusal may be answered in full; false: answer overLimit(query) instead. */
  admit(): boolean;
  /** REFUSED from the query alone, counted; no per-query event. */
  overLimit(query: DnsQuery, policy: Policy): Buffer;
  /**
   * Over-limit refusals a replay worker answered (REFUSED from the query, as overLimit does), with the first one's
   * name: counted, and reported by the next tick.
   */
  answeredElsewhere(count: number, name: string | undefined): void;
  /** Reports what is pending once the interval has passed (the server's tick). */
  tick(policy: Policy): void;
  /** Over-limit refusals so far. */
  total(): number;
}

/**
 * The refused-name bucket; over it, one report at once on the first, then one per interval with the count. `bucket`
 * is one on `limits` that replay workers take from too (AnswerReplicas.shareRefusals); a bucket of this thread's own
 * without it.
 */
export function createRefusalLimit(options: {
  readonly sink: AuditSink;
  readonly now: () => number;
  readonly limits?: BucketLimits;
  readonly bucket?: Pick<TokenBucket, 'take'>;
}): RefusalLimit {
  const { sink, now } = options;
  const limits = options.limits ?? DEFAULT_REFUSAL_LIMITS;
  const bucket = options.bucket ?? createTokenBucket({ ...limits, now });
  let total = 0;
  let pending = 0;
  /** The first pending refusal's name: a report of one refusal names it. */
  let pendingName: string | undefined;
  let reportedAt = Number.NEGATIVE_INFINITY;

  /** A report of one refusal names it. */
  function report(policy: Policy): void {
    sink.emit(limitEvent({ limit: 'refused', limits, policy, queries: pending, name: pending === 1 ? pendingName : undefined }));
    reportedAt = now();
    pending = 0;
    pendingName = undefined;
  }

  function count(refusals: number, name: string | undefined): void {
    if (pending === 0) pendingName = name;
    total += refusals;
    pending += refusals;
  }

  return {
    admit: () => bucket.take(),
    overLimit(query, policy) {
      count(1, query.name);
      if (now() - reportedAt >= LIMIT_REPORT_INTERVAL_MS) report(policy);
      return refusedFromQuery(query);
    },
    answeredElsewhere(refusals, name) {
      if (refusals > 0) count(refusals, name);
    },
    tick(policy) {
      if (pending > 0 && now() - reportedAt >= LIMIT_REPORT_INTERVAL_MS) report(policy);
    },
    total: () => total,
  };
}

/** The closed `limit` values of policy_dns_rate_limited: refused names (policy DNS), new names (the lookup gate). */
export const RATE_LIMITS = ['refused', 'unique'] as const;
export type RateLimitName = (typeof RATE_LIMITS)[number];

/** NET:REFUSE policy_dns_rate_limited: `queries` over the limit since the last report, by adapter for new names. */
export function limitEvent(o: {
  readonly limit: RateLimitName;
  readonly limits: BucketLimits;
  readonly policy: Pick<Policy, 'generation' | 'hash'>;
  readonly queries: number;
  readonly name: string | undefined;
  readonly byAdapter?: Readonly<Record<string, number>>;
}): AuditEvent {
  const { perSecond, burst } = o.limits;
  const message =
    o.limit === 'refused'
      ? `Policy DNS rate limit on refused names (${perSecond}/s, burst ${burst}): ${o.queries} ${o.queries === 1 ? 'query' : 'queries'} answered REFUSED`
      : `Upstream lookup limit on new names under wildcards (${perSecond}/s, burst ${burst}): ${o.queries} ${o.queries === 1 ? 'name' : 'names'} not resolved (policy DNS answers REFUSED, the proxy 429)`;
  return {
    class: 'NET',
    activity: 'REFUSE',
    severity: 'MED',
    action: 'DENIED',
    engine: 'dns',
    ...(o.name === undefined ? {} : { dst: { host: o.name } }),
    statusDetail: 'policy_dns_rate_limited',
    message,
    generation: o.policy.generation,
    policyHash: o.policy.hash,
    unmapped: {
      limit: o.limit,
      queries: o.queries,
      rate_per_second: perSecond,
      burst,
      ...(o.byAdapter === undefined ? { rcode: 'REFUSED' } : { by_adapter: o.byAdapter }),
    },
  };
}
