// spyLogTimers(): counts the timers the log destination keeps (those armed from src/telemetry/log-*.ts or sonic-boom),
// by wrapping the global timer functions; process.getActiveResourcesInfo() leaves out unref'd timers.

/** Where a timer of the log destination is armed from: a frame of its stack names one of these. */
const LOG_CODE = /log-destination|log-stream|sonic-boom/;

export interface LogTimers {
  /** Log timers armed and not yet fired (one-shot) or cleared. */
  live(): number;
  /** Resolves once a log timer's callback next returns. */
  nextFire(): Promise<void>;
  restore(): void;
}

type Callback = (...args: unknown[]) => void;

export function spyLogTimers(): LogTimers {
  const original = {
    setTimeout: globalThis.setTimeout,
    setInterval: globalThis.setInterval,
    clearTimeout: globalThis.clearTimeout,
    clearInterval: globalThis.clearInterval,
  };
  const live = new Set<unknown>();
  let waiters: (() => void)[] = [];
  const fromLogCode = (): boolean => LOG_CODE.test(new Error().stack ?? '');

  function fired(): void {
    const woken = waiters;
    waiters = [];
    for (const wake of woken) wake();
  }

  function arm(make: typeof setTimeout | typeof setInterval, oneShot: boolean) {
    return (callback: Callback, ms?: number, ...args: unknown[]): NodeJS.Timeout => {
      if (!fromLogCode()) return make(callback, ms, ...args);
      const timer: NodeJS.Timeout = make(
        (...given: unknown[]) => {
          if (oneShot) live.delete(timer);
          callback(...given);
          fired();
        },
        ms,
        ...args,
      );
      live.add(timer);
      return timer;
    };
  }

  function disarm(clear: typeof clearTimeout) {
    return (timer: NodeJS.Timeout | string | number | undefined): void => {
      live.delete(timer);
      clear(timer);
    };
  }

  globalThis.setTimeout = arm(original.setTimeout, true) as typeof setTimeout;
  globalThis.setInterval = arm(original.setInterval, false) as typeof setInterval;
  globalThis.clearTimeout = disarm(original.clearTimeout);
  globalThis.clearInterval = disarm(original.clearInterval);
  return {
    live: () => live.size,
    nextFire: () => new Promise<void>((resolve) => waiters.push(resolve)),
    restore() {
      Object.assign(globalThis, original);
    },
  };
}
