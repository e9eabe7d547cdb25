// waiterList(): items recorded as they arrive, and promises for the first (already seen or later) that matches.
// The one waiter of the harness recorders (log lines, events, states, child output); a waiter that times out
// rejects naming what it waited for, and end() rejects every waiter once nothing more can arrive.

export interface WaiterList<T> {
  /** Every item pushed, in order (always empty with `record: false`). */
  readonly items: T[];
  push(item: T): void;
  /**
   * `what` names the awaited item in the timeout error and `detail` adds context after it; functions are
   * asked only when the wait times out.
   */
  waitFor(predicate: (item: T) => boolean, timeoutMs: number, what: string | (() => string), detail?: () => string): Promise<T>;
  /** Nothing more will arrive: pending waiters reject with `error`, and so do later waits that match no item. */
  end(error: Error): void;
}

export interface WaiterListOptions {
  /** false: push() only wakes waiters, for sources whose caller checks the current value itself (states). */
  readonly record?: boolean;
  /** Unref'd timeout timers: a pending wait does not keep the process alive. */
  readonly unref?: boolean;
}

interface Waiter<T> {
  readonly predicate: (item: T) => boolean;
  readonly resolve: (item: T) => void;
  readonly reject: (err: Error) => void;
}

export function waiterList<T>(options: WaiterListOptions = {}): WaiterList<T> {
  const record = options.record ?? true;
  const items: T[] = [];
  const waiters = new Set<Waiter<T>>();
  let ended: Error | undefined;
  return {
    items,
    push(item) {
      if (record) items.push(item);
      for (const waiter of waiters) {
        if (waiter.predicate(item)) {
          waiters.delete(waiter);
          waiter.resolve(item);
        }
      }
    },
    waitFor(predicate, timeoutMs, what, detail) {
      const seen = items.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      if (ended !== undefined) return Promise.reject(ended);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          const tail = detail === undefined ? '' : `; ${detail()}`;
          reject(new Error(`no matching ${typeof what === 'string' ? what : what()} within ${timeoutMs} ms${tail}`));
        }, timeoutMs);
        if (options.unref === true) timer.unref();
        const waiter: Waiter<T> = {
          predicate,
          resolve: (item) => {
            clearTimeout(timer);
            resolve(item);
          },
          reject: (err) => {
            clearTimeout(timer);
            reject(err);
          },
        };
        waiters.add(waiter);
      });
    },
    end(error) {
      ended = error;
      for (const waiter of waiters) waiter.reject(error);
      waiters.clear();
    },
  };
}

/**
 * How long withinDeadline() waits by default: an event on loopback that has not come by then is not coming. Bounds a
 * hang only, never a measure of speed: a loaded host stretches an event that takes milliseconds to seconds.
 */
export const DEADLINE_MS = 30_000;

/** `promise`, or a rejection naming `what` once `ms` passed: for events that carry no timeout of their own. */
export function withinDeadline<T>(promise: Promise<T>, what: string, ms = DEADLINE_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not seen within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
