// Write-behind to the store for the control handlers, which answer a boundary without waiting for a database:
// writes for one instance run one at a time in the order they were made (attached, then status, then detached),
// writes for different instances run concurrently. A failed write is logged and counted; it never fails a session
// (the store says how it recovers: a --state-dir file is written again until it succeeds).

import { describeError } from '../control/protocol.js';
import type { Logger } from '../telemetry/logger.js';

/** Writes waiting or running at once; past this a write is dropped and logged (a store that cannot keep up). */
const MAX_PENDING_STATE_WRITES = 50_000;

export interface StateWriter {
  /** Queues `write` behind earlier writes with the same key. `what` names it in a failure log. */
  write(key: string, what: string, write: () => Promise<unknown>): void;
  /** Resolves when every write queued so far has finished (succeeded or failed). */
  flush(): Promise<void>;
  /** Failed or dropped writes since start. */
  failures(): number;
}

/** `consequence` says in the failure log what a failed write means for the store in use. */
export function createStateWriter(options: { logger: Logger; consequence: string }): StateWriter {
  const { logger, consequence } = options;
  const tails = new Map<string, Promise<void>>();
  let pending = 0;
  let failed = 0;

  function write(key: string, what: string, run: () => Promise<unknown>): void {
    if (pending >= MAX_PENDING_STATE_WRITES) {
      failed += 1;
      logger.error({ key, what, pending }, 'supervisor state write dropped: the store is not keeping up');
      return;
    }
    pending += 1;
    const previous = tails.get(key) ?? Promise.resolve();
    const next = previous.then(run).then(
      () => undefined,
      (err: unknown) => {
        failed += 1;
        logger.warn({ key, what, err: describeError(err) }, `supervisor state write failed: ${consequence}`);
      },
    );
    const tail = next.finally(() => {
      pending -= 1;
      if (tails.get(key) === tail) tails.delete(key);
    });
    tails.set(key, tail);
  }

  async function flush(): Promise<void> {
    while (tails.size > 0) await Promise.all([...tails.values()]);
  }

  return { write, flush, failures: () => failed };
}
