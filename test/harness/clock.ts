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
