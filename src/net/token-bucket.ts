// A token bucket on the injected clock: the lookup gate's new-name budget and policy DNS's refusal rate; and the same
// bucket kept in shared memory, which several threads take from at once (policy DNS's replay workers). No timers:
// a bucket refills when asked.

/** A rate and the burst allowed before it applies. */
export interface BucketLimits {
  readonly perSecond: number;
  readonly burst: number;
}

export interface TokenBucket {
  /** Takes one token if there is one. */
  take(): boolean;
  /** Milliseconds until take() would succeed; 0 when a token is there now. */
  waitMs(): number;
}

/** Starts full; refills continuously at `perSecond` up to `burst`, computed from `now` when asked. */
export function createTokenBucket(options: BucketLimits & { readonly now: () => number }): TokenBucket {
  const { perSecond, burst, now } = options;
  let tokens = burst;
  let last = now();
  function refill(): void {
    const t = now();
    // A clock that steps back refills nothing (and never drains).
    if (t > last) {
      tokens = Math.min(burst, tokens + ((t - last) * perSecond) / 1_000);
      last = t;
    }
  }
  return {
    take() {
      refill();
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
    waitMs() {
      refill();
      return tokens >= 1 ? 0 : Math.ceil(((1 - tokens) * 1_000) / perSecond);
    },
  };
}

/** The shared bucket's state: one 64-bit cell. */
export const SHARED_BUCKET_BYTES = BigInt64Array.BYTES_PER_ELEMENT;
/** How far past now the cell may ever point, in µs: a whole burst of the slowest rate stays inside a signed 64-bit cell. */
const MAX_SHARED_SPAN_US = 2n ** 62n;

/**
 * The bucket of createTokenBucket kept in `state` (SHARED_BUCKET_BYTES, zeroed: full), for every thread that holds
 * the buffer. It is kept as the time at which it will be full again, in microseconds on `now`'s timeline (the
 * generic cell rate algorithm), so one compare-and-swap takes a token: a take admitted now moves that time on by
 * one token's worth, and is refused when that would put it more than `burst` tokens' worth past now. `now` must
 * read the same timeline in every thread (worker-protocol.ts sharedClock).
 */
export function createSharedTokenBucket(state: SharedArrayBuffer, limits: BucketLimits, now: () => number): Pick<TokenBucket, 'take'> {
  const cell = new BigInt64Array(state, 0, 1);
  const burst = BigInt(Math.max(0, Math.floor(limits.burst)));
  // At least 1 µs a token: a rate past a million a second is no limit this clock could tell apart. At most what keeps
  // a whole burst inside the cell (a full refill within MAX_SHARED_SPAN_US, about 146,000 years): a rate of 0 refills
  // that slowly, which is never.
  const slowest = MAX_SHARED_SPAN_US / (burst > 0n ? burst : 1n);
  const perToken = limits.perSecond > 0 ? Math.max(1, Math.round(1_000_000 / limits.perSecond)) : Number.POSITIVE_INFINITY;
  const interval = perToken < Number(slowest) ? BigInt(perToken) : slowest;
  const span = interval * burst;
  return {
    take() {
      const t = BigInt(Math.floor(now() * 1_000));
      for (;;) {
        const full = Atomics.load(cell, 0);
        const next = (full > t ? full : t) + interval;
        if (next - t > span) return false;
        if (Atomics.compareExchange(cell, 0, full, next) === full) return true;
      }
    },
  };
}
