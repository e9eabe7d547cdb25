// Delivers the store's pending withdrawal hooks: claims a batch under a lease (so replicas do not deliver the same
// one at once), delivers with withdrawal-hook.ts, records the result, and retries with backoff until acknowledged.

import type { Logger } from '../telemetry/logger.js';
import type { StoredWithdrawal, SupervisorStore } from './store/store.js';
import { HOOK_TIMEOUT_MS, MAX_HOOK_ERROR_CHARS } from './withdrawal-hook.js';

/**
 * Nobody else claims a delivery before this; covers a command and a webhook at HOOK_TIMEOUT_MS each. A longer
 * `timeoutMs` can outlive the lease, and another replica may then deliver the same withdrawal too: receivers
 * dedupe on the idempotency key anyway.
 */
const HOOK_LEASE_MS = 2 * HOOK_TIMEOUT_MS + 30_000;
/** Deliveries claimed per pass. */
const HOOK_BATCH = 16;
/** Deliveries in flight at once in one runner. */
const HOOK_CONCURRENCY = 4;
/** First retry delay; doubles per attempt up to HOOK_RETRY_MAX_MS. */
const HOOK_RETRY_BASE_MS = 1_000;
const HOOK_RETRY_MAX_MS = 300_000;
/** Without a kick, a pass runs this often: picks up deliveries whose lease ran out on a replica that died. */
const HOOK_POLL_MS = 2_000;
/** Failures keep being retried; from this attempt on each one is logged at error instead of warn. */
export const HOOK_ERROR_AFTER_ATTEMPTS = 10;

interface HookRunnerOptions {
  readonly store: SupervisorStore;
  readonly deliver: (withdrawal: StoredWithdrawal) => Promise<void>;
  readonly now: () => number;
  readonly logger: Logger;
  /** HOOK_POLL_MS when absent. */
  readonly pollMs?: number;
  /** HOOK_RETRY_BASE_MS and HOOK_RETRY_MAX_MS when absent; tests shorten them so retries do not take seconds. */
  readonly retryBaseMs?: number;
  readonly retryMaxMs?: number;
  /** [0, 1), for the retry jitter; Math.random when absent. */
  readonly random?: () => number;
}

export interface HookRunner {
  /** Starts the loop: a pass now, then one every pollMs (sooner when a retry falls due first). */
  start(): void;
  /** A pass soon: the supervisor calls it right after a withdrawal. Ignored before start() and after close(). */
  kick(): void;
  /** Stops the loop and waits for deliveries in flight (each bounded by the hook timeout). Idempotent. */
  close(): Promise<void>;
}

/**
 * The delay before attempt `attempts + 1`: base doubling per attempt, capped, then "equal jitter" (a random point
 * in the upper half) so replicas and withdrawals that failed together do not retry in lockstep.
 */
function hookRetryDelayMs(attempts: number, baseMs: number, maxMs: number, random: () => number): number {
  const exponent = Math.min(Math.max(attempts - 1, 0), 30);
  const capped = Math.min(maxMs, baseMs * 2 ** exponent);
  return Math.round(capped / 2 + (capped / 2) * random());
}

/** Delivers the store's pending withdrawal hooks: claim, deliver, record; retried with backoff until acknowledged. */
export function createHookRunner(options: HookRunnerOptions): HookRunner {
  const { store, deliver, now } = options;
  const logger = options.logger.child({ component: 'withdrawal-hook' });
  const pollMs = options.pollMs ?? HOOK_POLL_MS;
  const retryBaseMs = options.retryBaseMs ?? HOOK_RETRY_BASE_MS;
  const retryMaxMs = options.retryMaxMs ?? HOOK_RETRY_MAX_MS;
  const random = options.random ?? Math.random;
  let started = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;

  function schedule(delayMs: number): void {
    if (closed || !started) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(runPass, Math.max(0, delayMs));
    timer.unref();
  }

  function runPass(): void {
    timer = undefined;
    if (closed) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    running = pass().then((nextDueMs) => {
      running = undefined;
      if (again) {
        again = false;
        schedule(0);
      } else schedule(nextDueMs);
    });
  }

  /** One or more batches; resolves with the delay until the next pass. Never rejects. */
  async function pass(): Promise<number> {
    let nextDueMs = pollMs;
    for (;;) {
      let claimed: StoredWithdrawal[];
      try {
        const at = now();
        claimed = await store.claimHookDeliveries(at, at + HOOK_LEASE_MS, HOOK_BATCH);
      } catch (err) {
        logger.warn({ err: describe(err) }, 'withdrawal hook deliveries could not be claimed; trying again at the next poll');
        return pollMs;
      }
      const retryAts = await deliverAll(claimed);
      for (const retryAt of retryAts) nextDueMs = Math.min(nextDueMs, retryAt - now());
      // A full batch means more may be due now; a closing runner takes no new work.
      if (claimed.length < HOOK_BATCH || closed) return nextDueMs;
    }
  }

  /** Delivers with at most HOOK_CONCURRENCY in flight; resolves with the next attempt time of each failure. */
  async function deliverAll(claimed: readonly StoredWithdrawal[]): Promise<number[]> {
    const retryAts: number[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let item = claimed[next++]; item !== undefined; item = claimed[next++]) {
        const retryAt = await deliverOne(item);
        if (retryAt !== undefined) retryAts.push(retryAt);
      }
    };
    await Promise.all(Array.from({ length: Math.min(HOOK_CONCURRENCY, claimed.length) }, worker));
    return retryAts;
  }

  async function deliverOne(withdrawal: StoredWithdrawal): Promise<number | undefined> {
    const fields = { sandboxId: withdrawal.sandboxId, instanceId: withdrawal.instanceId, withdrawalId: withdrawal.id, attempts: withdrawal.attempts };
    let failure: string | undefined;
    try {
      await deliver(withdrawal);
    } catch (err) {
      failure = describe(err).slice(0, MAX_HOOK_ERROR_CHARS);
    }
    try {
      if (failure === undefined) {
        await store.hookDelivered(withdrawal.id, now());
        logger.info(fields, 'withdrawal hook delivered');
        return undefined;
      }
      const nextAttemptAt = now() + hookRetryDelayMs(withdrawal.attempts, retryBaseMs, retryMaxMs, random);
      await store.hookFailed(withdrawal.id, failure, nextAttemptAt);
      const line = { ...fields, err: failure, nextAttemptAt: new Date(nextAttemptAt).toISOString() };
      if (withdrawal.attempts >= HOOK_ERROR_AFTER_ATTEMPTS) logger.error(line, 'withdrawal hook keeps failing; retrying until acknowledged');
      else logger.warn(line, 'withdrawal hook failed; will retry');
      return nextAttemptAt;
    } catch (err) {
      // The lease runs out and the delivery is claimed again: at-least-once holds, the result is only late.
      logger.warn({ ...fields, err: describe(err) }, 'withdrawal hook result could not be recorded');
      return undefined;
    }
  }

  return {
    start() {
      if (started || closed) return;
      started = true;
      schedule(0);
    },
    kick() {
      schedule(0);
    },
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}

function describe(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text === '' ? 'unknown error' : text;
}
