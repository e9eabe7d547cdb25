// Attach deadlines and withdrawal, kept in the store so they survive a restart and fire once across replicas: an
// expected or detached instance carries the time it is withdrawn at; every replica sweeps for due ones, and the
// store hands each to exactly one. The sweep also keeps this replica's heartbeat and releases the instances of
// replicas that stopped beating (their boundaries are detached now). The withdrawing replica tells a boundary
// it still holds why, closes its session and relays, and queues the withdrawal hook.

import { describeError } from '../control/protocol.js';
import type { SupervisorContext } from './context.js';
import { endSession } from './push.js';
import { REPLICA_HEARTBEAT_MS, REPLICA_LEASE_MS, type StoredWithdrawal } from './store/store.js';

/** Deadlines another replica set are found within this; this replica's own fire on time (a timer at each). */
const DEADLINE_SWEEP_MS = 1_000;

export interface AttachDeadlines {
  /** A deadline at `at` exists (this replica set it): sweep then. */
  scheduleAt(at: number): void;
  start(): Promise<void>;
  /** Why the last sweep failed (the store unreachable, say), or undefined once one succeeds: for /readyz. */
  lastError(): string | undefined;
  /** Stops sweeping and waits for a sweep in progress, for close(). */
  clear(): Promise<void>;
}

export function createAttachDeadlines(
  ctx: SupervisorContext,
  options: { attachDeadlineMs: number; hook: boolean; onWithdrawn?: (withdrawal: StoredWithdrawal) => void },
): AttachDeadlines {
  const { attachDeadlineMs, hook } = options;
  const { store, replicaId, logger, now } = ctx;
  const reason = `did not attach within the attach deadline (${Math.round(attachDeadlineMs / 1000)} s)`;
  let next: { at: number; timer: NodeJS.Timeout } | undefined;
  let periodic: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let lastBeat = Number.NEGATIVE_INFINITY;
  let stopped = false;
  let lastError: string | undefined;

  function scheduleAt(at: number): void {
    if (stopped || (next !== undefined && next.at <= at)) return;
    if (next !== undefined) clearTimeout(next.timer);
    // A timer may fire a millisecond early; the sweep then finds nothing and the periodic one catches it.
    const timer = setTimeout(() => {
      next = undefined;
      sweep();
    }, Math.max(0, at - now()) + 1);
    timer.unref();
    next = { at, timer };
  }

  function sweep(): void {
    if (stopped) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    running = sweepOnce()
      .then(
        () => {
          if (lastError !== undefined) logger.info({}, 'attach deadline sweep works again');
          lastError = undefined;
        },
        (err: unknown) => {
          const message = describeError(err);
          // Once per failure streak, not once a second while the store is down.
          if (lastError === undefined) logger.warn({ err: message }, 'attach deadline sweep failed; deadlines wait until the store answers again');
          lastError = message;
        },
      )
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          sweep();
        }
      });
  }

  async function sweepOnce(): Promise<void> {
    const t = now();
    if (t - lastBeat >= REPLICA_HEARTBEAT_MS) {
      await store.heartbeat(replicaId, t);
      lastBeat = t;
      const released = await store.releaseStaleReplicas(replicaId, t - REPLICA_LEASE_MS, t, t + attachDeadlineMs);
      if (released > 0) {
        logger.warn({ released, deadlineMs: attachDeadlineMs }, 'a supervisor replica stopped; its boundaries count as detached until they attach here or to another replica');
        scheduleAt(t + attachDeadlineMs);
      }
    }
    // What this replica wrote (an attach just made) is in the store before anything is judged due.
    await ctx.writer.flush();
    const withdrawn = await store.claimDue(now(), replicaId, hook, () => reason);
    for (const withdrawal of withdrawn) withdrawLocally(withdrawal);
  }

  function withdrawLocally(withdrawal: StoredWithdrawal): void {
    const { tables, live } = ctx;
    const { sandboxId, instanceId } = withdrawal;
    const sessionId = tables.instance(sandboxId, instanceId)?.sessionId;
    const session = sessionId === undefined ? undefined : live.get(sessionId);
    if (session !== undefined) endSession(ctx, session, { kind: 'withdraw', code: 'withdrawn', reason: withdrawal.reason });
    const relays = ctx.broker.closeInstance(sandboxId, instanceId);
    tables.withdraw(sandboxId, instanceId, withdrawal.reason);
    logger.warn({ sandboxId, instanceId, reason: withdrawal.reason, withdrawalId: withdrawal.id, hook: withdrawal.hook, relaysClosed: relays }, 'instance withdrawn');
    ctx.emit({ type: 'withdrawn', sandboxId, instanceId, detail: withdrawal.reason });
    options.onWithdrawn?.(withdrawal);
  }

  return {
    scheduleAt,
    lastError: () => lastError,
    async start() {
      sweep();
      await running;
      periodic = setInterval(sweep, DEADLINE_SWEEP_MS);
      periodic.unref();
    },
    async clear() {
      stopped = true;
      if (next !== undefined) clearTimeout(next.timer);
      next = undefined;
      clearInterval(periodic);
      await running;
    },
  };
}
