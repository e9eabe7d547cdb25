// A clock that only moves when the test says so, for code that takes an injected `now`.

export interface TestClock {
  readonly now: () => number;
  advance(ms: number): void;
  set(ms: number): void;
}

export function testClock(start = Date.UTC(2026, 0, 1)): TestClock {
  let current = start;
  return {
    now: () => current,
    advance(ms) {
      current += ms;
    },
    set(ms) {
      current = ms;
    },
  };
}

/** Fake `setTimeout`/`clearTimeout` (the `Timers` shape of http1/ and websocket/) on a test clock. */
export interface TestTimers {
  readonly now: () => number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Moves the clock on by `ms`, running each timer that falls due in time order (timers they set included). */
  advance(ms: number): void;
  /** Timers set and neither run nor cleared yet. */
  readonly pending: number;
}

interface FakeTimer {
  readonly at: number;
  readonly seq: number;
  readonly callback: () => void;
}

export function testTimers(clock: TestClock = testClock()): TestTimers {
  const timers = new Set<FakeTimer>();
  let seq = 0;
  const due = (until: number): FakeTimer | undefined => {
    let first: FakeTimer | undefined;
    for (const t of timers) {
      if (t.at <= until && (first === undefined || t.at < first.at || (t.at === first.at && t.seq < first.seq))) first = t;
    }
    return first;
  };
  return {
    now: clock.now,
    setTimeout(callback, ms) {
      const timer: FakeTimer = { at: clock.now() + Math.max(0, ms), seq: seq++, callback };
      timers.add(timer);
      return timer;
    },
    clearTimeout(handle) {
      timers.delete(handle as FakeTimer);
    },
    advance(ms) {
      const until = clock.now() + ms;
      for (let next = due(until); next !== undefined; next = due(until)) {
        timers.delete(next);
        clock.set(next.at);
        next.callback();
      }
      clock.set(until);
    },
    get pending() {
      return timers.size;
    },
  };
}
