// Reconnect delays for the control channel: BASE doubling to CAP, jittered downwards, reset after a
// session that stayed up RESET_AFTER. Pure arithmetic over an injected clock and random source.

export const RECONNECT_BASE_MS = 2_000;
export const RECONNECT_CAP_MS = 30_000;
export const RECONNECT_RESET_AFTER_MS = 60_000;
/** Each delay is drawn from [d × (1 − JITTER), d]: never above the cap, spread so a fleet does not reconnect in step. */
export const RECONNECT_JITTER_RATIO = 0.2;

export interface BackoffOptions {
  readonly now: () => number;
  readonly random?: () => number;
  readonly baseMs?: number;
  readonly capMs?: number;
  readonly resetAfterMs?: number;
  readonly jitterRatio?: number;
}

export interface Backoff {
  /** The delay before the next attempt; each call counts one more failure. */
  next(): number;
  /** A session was established (admitted). */
  sessionStarted(): void;
  /** The established session ended; resets the schedule if it lasted at least resetAfterMs. */
  sessionEnded(): void;
  /** Consecutive failures since the last reset. */
  failures(): number;
}

export function createBackoff(options: BackoffOptions): Backoff {
  const baseMs = options.baseMs ?? RECONNECT_BASE_MS;
  const capMs = options.capMs ?? RECONNECT_CAP_MS;
  const resetAfterMs = options.resetAfterMs ?? RECONNECT_RESET_AFTER_MS;
  const jitter = options.jitterRatio ?? RECONNECT_JITTER_RATIO;
  const random = options.random ?? Math.random;
  if (!(baseMs > 0 && capMs >= baseMs && jitter >= 0 && jitter < 1)) {
    throw new RangeError(`backoff needs 0 < base <= cap and 0 <= jitter < 1 (base ${baseMs}, cap ${capMs}, jitter ${jitter})`);
  }
  let failures = 0;
  let sessionStart: number | undefined;
  return {
    next() {
      // 2^failures grows without bound; stop doubling once past the cap so the number stays finite.
      const exponent = Math.min(failures, 30);
      const nominal = Math.min(capMs, baseMs * 2 ** exponent);
      failures += 1;
      return Math.max(1, Math.round(nominal * (1 - jitter * random())));
    },
    sessionStarted() {
      sessionStart = options.now();
    },
    sessionEnded() {
      if (sessionStart !== undefined && options.now() - sessionStart >= resetAfterMs) failures = 0;
      sessionStart = undefined;
    },
    failures: () => failures,
  };
}
