// The control applier's order and shutdown: delivered messages run one at a time in arrival order, and close()
// abandons the one in flight (a policy compile can take seconds) and everything queued behind it. Knows nothing
// about policies or messages; apply.ts decides what a step does.

export interface ApplyQueue {
  /** Runs `step` after every step queued before it; once closed, settles to `whenClosed` without running it. */
  inOrder<T>(step: () => T | Promise<T>, whenClosed: T): Promise<T>;
  /**
   * `work`'s result, or undefined once close() was called: a step awaiting it is released at once, and a rejection
   * caused by the shutdown itself (a compiler ended under it) is not reported as a failure.
   */
  abandonable<T>(work: () => T | Promise<T>): Promise<T | undefined>;
  /** Settles once every step queued so far has run. */
  settled(): Promise<void>;
  closed(): boolean;
  /** Idempotent. */
  close(): void;
}

export function createApplyQueue(): ApplyQueue {
  let closed = false;
  const closing = new AbortController();
  let tail: Promise<unknown> = Promise.resolve();
  return {
    inOrder(step, whenClosed) {
      const run = tail.then(() => (closed ? whenClosed : step()));
      tail = run.catch(() => undefined);
      return run;
    },
    abandonable(work) {
      return new Promise((resolve, reject) => {
        // A listener per call, removed after: racing one shared promise would keep a reaction per call for ever.
        const abandon = (): void => resolve(undefined);
        closing.signal.addEventListener('abort', abandon, { once: true });
        Promise.resolve()
          .then(work)
          .then(resolve, (err: unknown) => (closed ? resolve(undefined) : reject(err)))
          .finally(() => closing.signal.removeEventListener('abort', abandon));
      });
    },
    settled: () => tail.then(() => undefined),
    closed: () => closed,
    close() {
      closed = true;
      closing.abort();
    },
  };
}
