// The limits that keep a synthetic window from running out (docs/dns.md#synthetic-pools): how long a freed address
// waits in quarantine, how many mappings may be live and how fast new ones may be made, per pool (one pool per
// boundary, so per sandbox) and per endpoint contract. Pure state on the pool's injected `now`; no timers.

export const MIN_MAPPING_TTL_SECONDS = 1;
export const MAX_MAPPING_TTL_SECONDS = 30;

/**
 * Quarantine beyond the longest TTL: for resolvers and runtimes that keep an answer past its TTL (a stub cache
 * that restarts the TTL it was handed, Java's default 30 s address cache), and so that a reused address never meets
 * the old mapping's listeners, which linger EXPIRED_LISTENER_LINGER_MS (30 s, proxy/capture-listeners.ts).
 */
export const QUARANTINE_MARGIN_MS = 30_000;
/** An address whose mapping expired and that no connection holds waits this long before another name may get it. */
export const SYNTHETIC_QUARANTINE_MS = MAX_MAPPING_TTL_SECONDS * 1_000 + QUARANTINE_MARGIN_MS;
/**
 * A mapping asked for again this soon after its expiry is refreshed like a live one, free of the limits below: the
 * stub asks as the answer runs out, and the upstream may take its 2 s timeout and a TCP retry (dns/upstream.ts).
 */
export const MAPPING_REFRESH_GRACE_MS = 5_000;

/** Mappings live at once (unexpired, in the refresh grace or held by a connection): what a sandbox plausibly uses. */
export const MAX_LIVE_MAPPINGS = 1_024;
/** New mappings (a new address, or an expired mapping brought back) per second, sustained: a generous crawl. */
export const MAX_NEW_MAPPINGS_PER_SECOND = 100;
/** New mappings in a burst, on top of the rate: a workload starting up and resolving everything at once. */
export const NEW_MAPPINGS_BURST = 400;
/**
 * One endpoint contract (in practice one wildcard endpoint) gets at most 1/CONTRACT_SHARE_DIVISOR of each limit, so
 * a flood of names under one wildcard leaves the rest for every other name, the workload's real API included.
 */
export const CONTRACT_SHARE_DIVISOR = 4;
/** The window size the limits above are chosen for (the default /15 gives /19 windows); smaller windows scale them. */
const LIMITS_SIZED_FOR_ADDRESSES = 8_192;

export interface MappingLimits {
  readonly live: number;
  readonly perSecond: number;
  readonly burst: number;
}

/** The pool-wide limits for a window of `capacity` addresses: the defaults, scaled down for a smaller window. */
export function mappingLimits(capacity: number): MappingLimits {
  const scale = Math.min(1, capacity / LIMITS_SIZED_FOR_ADDRESSES);
  return {
    live: Math.max(1, Math.floor(MAX_LIVE_MAPPINGS * scale)),
    perSecond: MAX_NEW_MAPPINGS_PER_SECOND * scale,
    burst: Math.max(1, Math.floor(NEW_MAPPINGS_BURST * scale)),
  };
}

/**
 * The most addresses that can be taken at once under `limits` (docs/dns.md#synthetic-pools): every address taken at
 * t is live at t or entered quarantine after t - Q, so it was live at t - Q (at most `live`) or made live after it
 * (at most `burst + perSecond * Q`). Connections to expired addresses come on top; capture refuses and closes them.
 */
export function mostAddressesTaken(limits: MappingLimits): number {
  return limits.live + limits.burst + Math.ceil((limits.perSecond * SYNTHETIC_QUARANTINE_MS) / 1_000);
}

export const BUDGET_REFUSALS = ['rate-limited', 'live-limit'] as const;
export type BudgetRefusal = (typeof BUDGET_REFUSALS)[number];

interface Bucket {
  tokens: number;
  at: number;
  live: number;
}

export interface MappingBudget {
  readonly limits: MappingLimits;
  /** Why a mapping of `contract` may not be made live now, with a message; undefined when it may. Takes nothing. */
  refusal(contract: string): { readonly refusal: BudgetRefusal; readonly message: string } | undefined;
  /** Takes one token of the pool's and of the contract's bucket and counts one more live mapping of `contract`. */
  spend(contract: string): void;
  /** One live mapping of `contract` went into quarantine (or was held past its life by a connection). */
  release(contract: string): void;
  /** Mappings live now. */
  live(): number;
  /** Forgets contracts with nothing live and a full bucket, so the table stays as small as the live set. */
  sweep(): void;
}

export function createMappingBudget(limits: MappingLimits, now: () => number): MappingBudget {
  const share = {
    live: Math.max(1, Math.floor(limits.live / CONTRACT_SHARE_DIVISOR)),
    perSecond: limits.perSecond / CONTRACT_SHARE_DIVISOR,
    burst: Math.max(1, Math.floor(limits.burst / CONTRACT_SHARE_DIVISOR)),
  };
  const pool: Bucket = { tokens: limits.burst, at: now(), live: 0 };
  const contracts = new Map<string, Bucket>();

  function refill(bucket: Bucket, of: MappingLimits, at: number): Bucket {
    bucket.tokens = Math.min(of.burst, bucket.tokens + ((at - bucket.at) * of.perSecond) / 1_000);
    bucket.at = at;
    return bucket;
  }
  function contractBucket(contract: string, at: number): Bucket {
    let bucket = contracts.get(contract);
    if (bucket === undefined) {
      bucket = { tokens: share.burst, at, live: 0 };
      contracts.set(contract, bucket);
    }
    return refill(bucket, share, at);
  }

  return {
    limits,
    refusal(contract) {
      const at = now();
      const mine = contractBucket(contract, at);
      refill(pool, limits, at);
      if (pool.live >= limits.live) return { refusal: 'live-limit', message: `${limits.live} synthetic mappings are live (the pool's limit)` };
      if (mine.live >= share.live) return { refusal: 'live-limit', message: `${share.live} synthetic mappings of one endpoint contract are live (its share)` };
      if (pool.tokens < 1) return { refusal: 'rate-limited', message: `new synthetic mappings are limited to ${limits.perSecond}/s (burst ${limits.burst})` };
      if (mine.tokens < 1) return { refusal: 'rate-limited', message: `new synthetic mappings of one endpoint contract are limited to ${share.perSecond}/s (burst ${share.burst})` };
      return undefined;
    },
    spend(contract) {
      const mine = contractBucket(contract, now());
      pool.tokens -= 1;
      mine.tokens -= 1;
      pool.live++;
      mine.live++;
    },
    release(contract) {
      const mine = contracts.get(contract);
      pool.live--;
      if (mine !== undefined) mine.live--;
    },
    live: () => pool.live,
    sweep() {
      const at = now();
      for (const [contract, bucket] of contracts) {
        if (bucket.live === 0 && refill(bucket, share, at).tokens >= share.burst) contracts.delete(contract);
      }
    },
  };
}
