import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TURN_TIMERS } from '../../src/shared/timers.js';

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Spins until performance.now() has moved on from `from`. */
function after(from: number): void {
  while (performance.now() <= from) {
    // A busy wait of a few microseconds at most: the clock's resolution.
  }
}

describe('TURN_TIMERS', () => {
  it('reads the clock once per turn: later readings in the same turn are the first one', () => {
    const first = TURN_TIMERS.now();
    after(first);
    assert.equal(TURN_TIMERS.now(), first);
  });

  it('reads it again in the next turn, and after the microtasks of this one', async () => {
    const first = TURN_TIMERS.now();
    after(first);
    await Promise.resolve();
    await Promise.resolve();
    const later = TURN_TIMERS.now();
    assert.ok(later > first);
    after(later);
    await nextTurn();
    assert.ok(TURN_TIMERS.now() > later);
  });

  it('reads the same clock as performance.now()', () => {
    const before = performance.now();
    const reading = TURN_TIMERS.now();
    assert.ok(reading >= before && reading <= performance.now());
  });
});
