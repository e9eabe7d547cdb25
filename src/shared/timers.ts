// The timers the HTTP/1.1 client runs its deadlines on: injected (tests drive a fake), the global ones by
// default. Same shape as websocket/assembly-timer.ts, declared here because http1/ imports nothing beside it.

export interface Timers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Milliseconds on the clock the timers run on: deadlines restarted by activity are checked against it. */
  now(): number;
}

/** Unref'd: a pooled socket's deadline never keeps the process alive. */
export const GLOBAL_TIMERS: Timers = Object.freeze({
  setTimeout: (callback: () => void, ms: number) => {
    const handle = setTimeout(callback, ms);
    handle.unref();
    return handle;
  },
  clearTimeout: (handle: unknown) => clearTimeout(handle as NodeJS.Timeout),
  now: () => performance.now(),
});

/** The reading the current turn took, or -1 before its first; forgotten once the turn's synchronous work is done. */
let turnNow = -1;
const forgetTurn = (): void => {
  turnNow = -1;
};
// A reaction on a settled promise is the cheapest microtask: queueMicrotask() makes an async resource for each.
const SETTLED = Promise.resolve();

/**
 * GLOBAL_TIMERS whose now() reads the clock once per turn of the event loop (every later reading in the turn is
 * the first one), for deadlines counted in seconds: the HTTP/1.1 server's and client's, which read it five times
 * per forwarded request in two turns, and a clock read is not cheap (docs/benchmarks.md#forward-http-cpu). Never
 * for durations that are measured and reported.
 */
export const TURN_TIMERS: Timers = Object.freeze({
  setTimeout: GLOBAL_TIMERS.setTimeout,
  clearTimeout: GLOBAL_TIMERS.clearTimeout,
  now: () => {
    if (turnNow < 0) {
      turnNow = performance.now();
      void SETTLED.then(forgetTurn);
    }
    return turnNow;
  },
});

/** The period of the housekeeping every owner of a SecondTick shares. */
export const SECOND_TICK_MS = 1_000;

/**
 * Once-a-second housekeeping on one timer: the policy DNS tick and an idle loop's delay sample ride the same wakeup,
 * so an idle sidecar wakes once a second for all of it, not once per owner whose timers drifted apart.
 */
export interface SecondTick {
  /** Calls `fn` with the time the tick was due (on the timers' clock), every SECOND_TICK_MS, until the returned
   *  function is called. `fn` catches its own errors: one that throws skips the owners after it for that second. */
  add(fn: (dueAt: number) => void): () => void;
}

/** A SecondTick on `timers`: armed while it has an owner, never otherwise. */
export function createSecondTick(timers: Timers = GLOBAL_TIMERS): SecondTick {
  const owners = new Set<{ readonly fn: (dueAt: number) => void }>();
  let handle: unknown;
  let dueAt = 0;
  const arm = (): void => {
    dueAt = timers.now() + SECOND_TICK_MS;
    handle = timers.setTimeout(run, SECOND_TICK_MS);
  };
  function run(): void {
    const due = dueAt;
    // Armed first, so that an owner that throws does not stop the others' seconds.
    arm();
    for (const owner of [...owners]) if (owners.has(owner)) owner.fn(due);
  }
  return {
    add(fn) {
      const owner = { fn };
      owners.add(owner);
      if (handle === undefined) arm();
      return () => {
        owners.delete(owner);
        if (owners.size === 0 && handle !== undefined) {
          timers.clearTimeout(handle);
          handle = undefined;
        }
      };
    },
  };
}

/** The process's SecondTick, on the global unref'd timers: an owner never keeps the process alive. */
export const SECOND_TICK: SecondTick = createSecondTick();
