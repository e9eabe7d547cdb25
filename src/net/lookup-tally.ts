// The lookup gate's held-back counts (docs/dns.md#the-lookup-gate): refusals and flagged names are reported at once
// the first time, then at most once per interval with the count, split by the adapter that asked. Pure state.

/** Who asked the gate: policy DNS for a workload's query, or the proxy for a destination (CONNECT, forward, upgrade). */
export const LOOKUP_VIAS = ['dns', 'proxy'] as const;
export type LookupVia = (typeof LOOKUP_VIAS)[number];
export type ViaCounts = Readonly<Record<LookupVia, number>>;

/** Over-limit and flagged names get one report when first seen, then at most one per interval with the count. */
export const LIMIT_REPORT_INTERVAL_MS = 10_000;

export interface Tally {
  /** Counts since the last report, by adapter. */
  readonly pending: Record<LookupVia, number>;
  reportedAt: number;
}

export function createTally(): Tally {
  return { pending: { dns: 0, proxy: 0 }, reportedAt: Number.NEGATIVE_INFINITY };
}

export function pendingTotal(tally: Tally): number {
  return tally.pending.dns + tally.pending.proxy;
}

/** True when something is pending and the interval since the last report has passed (or `force`). */
export function reportDue(tally: Tally, at: number, force = false): boolean {
  return pendingTotal(tally) > 0 && (force || at - tally.reportedAt >= LIMIT_REPORT_INTERVAL_MS);
}

/** The pending counts, cleared and stamped as reported at `at`. */
export function takePending(tally: Tally, at: number): ViaCounts {
  const out = { ...tally.pending };
  tally.pending.dns = 0;
  tally.pending.proxy = 0;
  tally.reportedAt = at;
  return out;
}
