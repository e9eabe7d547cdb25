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
