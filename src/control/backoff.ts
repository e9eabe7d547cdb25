// When the control client tries again, and why: a quick jittered re-attach after a healthy session (and
// for a short window after it), BASE doubling to CAP after consecutive failures, the cap for a refusal the
// supervisor calls final.
// Pure arithmetic over an injected clock and random source; never touches a timer or a socket.

/** Failed attempts back off from here, doubling per consecutive failure. */
export const RECONNECT_BASE_MS = 2_000;
export const RECONNECT_CAP_MS = 30_000;
/** Each backoff delay is drawn from [d × (1 − JITTER), d]: never above the cap, spread so a fleet does not reconnect in step. */
const RECONNECT_JITTER_RATIO = 0.2;
/**
 * After a healthy session the next attempt comes after this plus up to RECONNECT_AFTER_HEALTHY_SESSION_SPREAD_MS
 * (uniform): a supervisor restart costs each boundary well under a second, and a fleet of thousands spreads
 * its handshakes over the spread instead of arriving in the same millisecond.
 */
export const RECONNECT_AFTER_HEALTHY_SESSION_MS = 250;
export const RECONNECT_AFTER_HEALTHY_SESSION_SPREAD_MS = 750;
/**
 * A session is healthy when it was attached (admitted, first policy applied and acknowledged) and stayed
 * attached at least this long. A shorter one counts as a failed attempt, so a supervisor that admits and
 * at once drops every session meets the doubling backoff, not a reconnect storm. Kept under a second:
 * a supervisor crash-looping every few seconds still serves real sessions, and those should come back fast.
 */
export const HEALTHY_SESSION_MIN_MS = 500;
/**
 * For this long after a healthy session ended, failed attempts still retry at the quick delay: a restarting
 * supervisor leaves its port closed for a moment (close then listen; a killed pod's replacement starting),
 * and a first retry that lands in that gap must not cost the doubling schedule. Bounded: about ten cheap
 * attempts per healthy session, after which failures back off from the base.
 */
export const RECONNECT_QUICK_WINDOW_MS = 5_000;

/** Why the next attempt waits as long as it does; rendered on /readyz. */
const RECONNECT_REASONS = ['after-healthy-session', 'backoff', 'not-retryable'] as const;
export type ReconnectReason = (typeof RECONNECT_REASONS)[number];

/** How the attempt that just ended went. */
export type AttemptOutcome =
  /** Never attached: dial, handshake, attach refusal, or admitted but the first policy never acknowledged. */
  | { readonly kind: 'failed'; readonly retryable: boolean }
  /** Attached, then ended (cleanly or not); healthy only if it stayed attached HEALTHY_SESSION_MIN_MS. */
  | { readonly kind: 'session-ended' };

interface ReconnectDelay {
  readonly delayMs: number;
  readonly reason: ReconnectReason;
  /** Failed attempts since the last healthy session, this one included. */
  readonly failures: number;
}

export interface BackoffOptions {
  readonly now: () => number;
  readonly random?: () => number;
  readonly baseMs?: number;
  readonly capMs?: number;
  readonly jitterRatio?: number;
  readonly afterHealthyMs?: number;
  readonly afterHealthySpreadMs?: number;
  readonly healthyMinMs?: number;
  readonly quickWindowMs?: number;
}

interface Backoff {
  /** The session is attached: admitted, and its first policy applied and acknowledged. */
  attached(): void;
  /** The delay before the next attempt, given how the last one ended. */
  next(outcome: AttemptOutcome): ReconnectDelay;
  /** Failed attempts since the last healthy session. */
  failures(): number;
}

export function createBackoff(options: BackoffOptions): Backoff {
  const baseMs = options.baseMs ?? RECONNECT_BASE_MS;
  const capMs = options.capMs ?? RECONNECT_CAP_MS;
  const jitter = options.jitterRatio ?? RECONNECT_JITTER_RATIO;
  const afterHealthyMs = options.afterHealthyMs ?? RECONNECT_AFTER_HEALTHY_SESSION_MS;
  const spreadMs = options.afterHealthySpreadMs ?? RECONNECT_AFTER_HEALTHY_SESSION_SPREAD_MS;
  const healthyMinMs = options.healthyMinMs ?? HEALTHY_SESSION_MIN_MS;
  const quickWindowMs = options.quickWindowMs ?? RECONNECT_QUICK_WINDOW_MS;
  const random = options.random ?? Math.random;
  if (!(baseMs > 0 && capMs >= baseMs && jitter >= 0 && jitter < 1 && afterHealthyMs >= 0 && spreadMs >= 0 && healthyMinMs >= 0 && quickWindowMs >= 0)) {
    throw new RangeError(
      `backoff needs 0 < base <= cap, 0 <= jitter < 1 and non-negative healthy-session settings (base ${baseMs}, cap ${capMs}, jitter ${jitter}, after healthy ${afterHealthyMs} + ${spreadMs}, healthy min ${healthyMinMs}, quick window ${quickWindowMs})`,
    );
  }
  let failures = 0;
  // Failures that got a backoff delay: the exponent, so quick retries inside the window do not count.
  let backedOff = 0;
  let attachedAt: number | undefined;
  let quickUntil = Number.NEGATIVE_INFINITY;

  const jittered = (nominal: number): number => Math.max(1, Math.round(nominal * (1 - jitter * random())));
  const quick = (): number => Math.round(afterHealthyMs + spreadMs * random());

  return {
    attached() {
      attachedAt = options.now();
    },
    next(outcome) {
      const now = options.now();
      const since = attachedAt;
      attachedAt = undefined;
      if (outcome.kind === 'session-ended' && since !== undefined && now - since >= healthyMinMs) {
        failures = 0;
        backedOff = 0;
        quickUntil = now + quickWindowMs;
        return { delayMs: quick(), reason: 'after-healthy-session', failures };
      }
      failures += 1;
      if (outcome.kind === 'failed' && !outcome.retryable) {
        // The supervisor said no until someone fixes something: no quick retries, straight to the cap.
        quickUntil = Number.NEGATIVE_INFINITY;
        return { delayMs: jittered(capMs), reason: 'not-retryable', failures };
      }
      if (now < quickUntil) return { delayMs: quick(), reason: 'after-healthy-session', failures };
      backedOff += 1;
      // 2^n grows without bound; stop doubling once past the cap so the number stays finite.
      const exponent = Math.min(backedOff - 1, 30);
      return { delayMs: jittered(Math.min(capMs, baseMs * 2 ** exponent)), reason: 'backoff', failures };
    },
    failures: () => failures,
  };
}
