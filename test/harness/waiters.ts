// waiterList(): items recorded as they arrive, and promises for the first (already seen or later) that matches.
// For harness recorders (log lines, events); a waiter that times out rejects naming what it waited for.

export interface WaiterList<T> {
  readonly items: T[];
  push(item: T): void;
  /** `what` names the awaited item in the timeout error; a function is asked only when the wait times out. */
  waitFor(predicate: (item: T) => boolean, timeoutMs: number, what: string | (() => string)): Promise<T>;
}

export function waiterList<T>(): WaiterList<T> {
  const items: T[] = [];
  const waiters = new Set<{ predicate: (item: T) => boolean; resolve: (item: T) => void }>();
  return {
    items,
    push(item) {
      items.push(item);
      for (const waiter of waiters) {
        if (waiter.predicate(item)) {
          waiters.delete(waiter);
          waiter.resolve(item);
        }
      }
    },
    waitFor(predicate, timeoutMs, what) {
      const seen = items.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no matching ${typeof what === 'string' ? what : what()} within ${timeoutMs} ms`));
        }, timeoutMs);
        const waiter = {
          predicate,
          resolve: (item: T) => {
            clearTimeout(timer);
            resolve(item);
          },
        };
        waiters.add(waiter);
      });
    },
  };
}
