// A token bucket on the injected clock: the lookup gate's new-name budget and policy DNS's refusal rate.
// No timers: the bucket refills when asked.

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
