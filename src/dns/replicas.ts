// What policy DNS shares with its replay workers (docs/dns.md#replay-workers): the cache slot a question's answer
// lives in, the cached answer's shape, and the hook through which the handler hands cacheable answers out.
// Pure types and one pure function; dns/workers.ts implements the hooks, dns/replay-worker.ts reads the slots.

import { type DnsQuery, QCLASS_IN, QTYPE_A, QTYPE_AAAA, type WireAnswer } from './answer.js';
import type { BucketLimits, TokenBucket } from '../net/token-bucket.js';
import type { PreparedEvents } from './events.js';

/** Cached answers live in one map per (type, EDNS use), because the template differs: IN-class A and AAAA only. */
export const ANSWER_SLOTS = 4;

/** The slot of `query`'s cached answer (0 to ANSWER_SLOTS - 1), or -1 for a question never cached. */
export function answerSlot(query: DnsQuery): number {
  if (query.qclass !== QCLASS_IN) return -1;
  const edns = query.edns === undefined ? 0 : 1;
  return query.type === QTYPE_A ? edns : query.type === QTYPE_AAAA ? 2 + edns : -1;
}

/** What a cached answer needs on its fast path, in the entry itself (the outcome's fields, read once per query). */
export interface CacheEntry {
  readonly template: WireAnswer;
  readonly events: PreparedEvents;
  readonly generation: number;
  /** outcome.cacheUntil: Infinity, or the mapping's expiry. */
  readonly until: number;
  /** outcome.denied: a policy refusal, charged to the refused-name rate. */
  readonly denied: boolean;
  /** The replicas' epoch when the query that made this answer began (AnswerReplicas.epoch). */
  readonly epoch: number;
}

/**
 * The replay workers as policy DNS sees them: an epoch to stamp answers with, where cacheable answers go, and the
 * refused-name bucket they share.
 */
export interface AnswerReplicas {
  /** Bumped by the main thread before anything a worker may have cached changes (policy, mappings). */
  epoch(): number;
  /**
   * A cached answer a worker may replay: to every worker when it was just made (`to` undefined), or to the one
   * worker that passed on a query the main thread answered from its cache (that worker lacks it).
   */
  publish(slot: number, name: string, entry: CacheEntry, to: number | undefined): void;
  /**
   * The refused-name bucket on `limits`, which every worker takes from before it replays a refusal; `overLimit`
   * hears the refusals workers answered REFUSED over it. Until policy DNS has called this, refusals are not handed
   * out, and workers pass every repeat refusal on.
   */
  shareRefusals(limits: BucketLimits, overLimit: (count: number, name: string | undefined) => void): Pick<TokenBucket, 'take'>;
}
