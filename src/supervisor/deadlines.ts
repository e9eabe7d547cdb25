// Attach deadlines and withdrawal: an expected or detached instance that does not attach in time is withdrawn
// (told why, its session and relays closed, moved to the withdrawn table). Owns the deadline timers.

import type { SupervisorContext } from './context.js';
import { pushMessage } from './push.js';

export interface AttachDeadlines {
  /** Starts (or restarts) the instance's deadline. */
  arm(sandboxId: string, instanceId: string): void;
  /** Stops the instance's deadline: it attached. */
  disarm(sandboxId: string, instanceId: string): void;
  /** Stops every deadline, for close(). */
  clear(): void;
}

export function createAttachDeadlines(ctx: SupervisorContext, options: { attachDeadlineMs: number }): AttachDeadlines {
  const { attachDeadlineMs } = options;
  const deadlines = new Map<string, NodeJS.Timeout>();
  const key = (sandboxId: string, instanceId: string): string => `${sandboxId}/${instanceId}`;

  function arm(sandboxId: string, instanceId: string): void {
    const k = key(sandboxId, instanceId);
    clearTimeout(deadlines.get(k));
    const timer = setTimeout(() => {
      deadlines.delete(k);
      withdraw(sandboxId, instanceId, `did not attach within the attach deadline (${Math.round(attachDeadlineMs / 1000)} s)`);
    }, attachDeadlineMs);
    timer.unref();
    deadlines.set(k, timer);
  }

  function disarm(sandboxId: string, instanceId: string): void {
    clearTimeout(deadlines.get(key(sandboxId, instanceId)));
    deadlines.delete(key(sandboxId, instanceId));
  }

  function clear(): void {
    for (const timer of deadlines.values()) clearTimeout(timer);
    deadlines.clear();
  }

  function withdraw(sandboxId: string, instanceId: string, reason: string): void {
    const { tables, live, logger } = ctx;
    const instance = tables.instance(sandboxId, instanceId);
    if (instance === undefined) return;
    const sessionId = instance.sessionId;
    const session = sessionId === undefined ? undefined : live.get(sessionId);
    if (session !== undefined) {
      pushMessage(ctx, session, { kind: 'withdraw', code: 'withdrawn', reason });
      live.delete(session.sessionId);
      session.watch?.end();
      session.session.close();
    }
    disarm(sandboxId, instanceId);
    const relays = ctx.broker.closeInstance(sandboxId, instanceId);
    tables.withdraw(sandboxId, instanceId, reason);
    logger.warn({ sandboxId, instanceId, reason, relaysClosed: relays }, 'instance withdrawn');
    ctx.emit({ type: 'withdrawn', sandboxId, instanceId, detail: reason });
  }

  return { arm, disarm, clear };
}
