// The answer and the finding when the synthetic pool declines a mapping (docs/dns.md#synthetic-pools): rate or live
// limit, or an exhausted window. The finding is emitted once per interval per kind with a count, never once per query.
// Pure state on an injected `now`; no timers: the DNS server's tick (or the next refusal) reports the ones held back.

import type { AllocateFailure } from '../net/synthetic.js';
import type { Policy } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import { type DnsOutcome, exhaustedFinding } from './events.js';

/** One finding per kind in this interval at most: a flood of names must not become a flood of log lines. */
export const MAPPING_REFUSAL_REPORT_INTERVAL_MS = 10_000;

type PoolRefusal = Exclude<AllocateFailure, 'stale-generation'>;

/** `status_detail` of the SERVFAIL answer and of the finding, per kind. */
export const MAPPING_REFUSAL_DETAILS: Readonly<Record<PoolRefusal, string>> = {
  'rate-limited': 'policy_dns_mapping_rate',
  'live-limit': 'policy_dns_mapping_limit',
  exhausted: 'policy_dns_pool_exhausted',
};

interface Tally {
  /** When the last finding of this kind was emitted. */
  since: number;
  /** Refusals after that finding, not yet reported, and the last of them. */
  held: number;
  name: string;
  message: string;
}

export interface MappingRefusals {
  /** The outcome to answer with; emits the finding when none went out for this kind within the interval. */
  refuse(failure: PoolRefusal, name: string, message: string, policy: Policy): DnsOutcome;
  /** Reports the refusals held back once their interval is over (the DNS server's tick calls it). */
  tick(policy: Policy): void;
}

export function createMappingRefusals(options: { readonly sink: AuditSink; readonly now: () => number; readonly intervalMs?: number }): MappingRefusals {
  const intervalMs = options.intervalMs ?? MAPPING_REFUSAL_REPORT_INTERVAL_MS;
  const tallies = new Map<PoolRefusal, Tally>();
  function report(failure: PoolRefusal, tally: Tally, count: number, policy: Policy, at: number): void {
    const finding = exhaustedFinding(tally.name, tally.message, policy);
    options.sink.emit({
      ...finding,
      statusDetail: MAPPING_REFUSAL_DETAILS[failure],
      message: `${finding.message}${count > 1 ? ` (${count} refusals since the last report)` : ''}`,
      unmapped: { count, interval_ms: intervalMs },
    });
    tally.since = at;
    tally.held = 0;
  }

  return {
    refuse(failure, name, message, policy) {
      const at = options.now();
      let tally = tallies.get(failure);
      if (tally === undefined) {
        tally = { since: Number.NEGATIVE_INFINITY, held: 0, name, message };
        tallies.set(failure, tally);
      }
      tally.name = name;
      tally.message = message;
      // The first refusal of a quiet spell goes out at once, with any held back before it.
      if (at - tally.since >= intervalMs) report(failure, tally, tally.held + 1, policy, at);
      else tally.held++;
      // SERVFAIL: the name is eligible and may be answered once the limit allows; no NET:REFUSE per query (the
      // DNS Activity event and boundary_dns_queries_total still count every one), and never cached.
      return { rcode: 'SERVFAIL', answers: [], ttlSeconds: undefined, cacheUntil: undefined, statusDetail: MAPPING_REFUSAL_DETAILS[failure] };
    },
    tick(policy) {
      const at = options.now();
      for (const [failure, tally] of tallies) if (tally.held > 0 && at - tally.since >= intervalMs) report(failure, tally, tally.held, policy, at);
    },
  };
}
