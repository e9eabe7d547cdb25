// The message-assembly deadlines of the inspected WebSocket relay: a fragmented text message must keep
// progressing and complete in time. Owns only its timers, which are injected (the global ones by default).

/** docs/destinations.md#websocket-relay: a fragmented text message must progress this often ... */
export const MESSAGE_IDLE_TIMEOUT_MS = 30_000;
/** ... and be complete this long after its first fragment. */
export const MESSAGE_TOTAL_TIMEOUT_MS = 120_000;

export interface Timers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The global timers, unref'd: a pending deadline alone never keeps the process alive. */
export const GLOBAL_TIMERS: Timers = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

interface AssemblyTimer {
  /** A fragment of the message in progress arrived: restarts the idle timer, starts the total one. */
  fragment(): void;
  /** The message completed (or the relay closed): both timers stop. */
  clear(): void;
}

/** Message-assembly deadlines (docs/destinations.md#websocket-relay): `onExpire` runs once when either is missed. */
export function createAssemblyTimer(options: {
  readonly onExpire: (which: 'idle' | 'total') => void;
  readonly idleMs?: number;
  readonly totalMs?: number;
  readonly timers?: Timers;
}): AssemblyTimer {
  const timers = options.timers ?? GLOBAL_TIMERS;
  const idleMs = options.idleMs ?? MESSAGE_IDLE_TIMEOUT_MS;
  const totalMs = options.totalMs ?? MESSAGE_TOTAL_TIMEOUT_MS;
  let idle: unknown;
  let total: unknown;
  const clear = (): void => {
    if (idle !== undefined) timers.clearTimeout(idle);
    if (total !== undefined) timers.clearTimeout(total);
    idle = undefined;
    total = undefined;
  };
  const expire = (which: 'idle' | 'total'): void => {
    clear();
    options.onExpire(which);
  };
  return {
    fragment() {
      if (idle !== undefined) timers.clearTimeout(idle);
      idle = timers.setTimeout(() => expire('idle'), idleMs);
      total ??= timers.setTimeout(() => expire('total'), totalMs);
    },
    clear,
  };
}
