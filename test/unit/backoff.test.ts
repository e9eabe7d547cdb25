import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createBackoff, RECONNECT_BASE_MS, RECONNECT_CAP_MS, RECONNECT_RESET_AFTER_MS } from '../../src/control/backoff.js';
import { testClock } from '../harness/clock.js';

describe('reconnect backoff', () => {
  it('starts at 2 s and doubles to a 30 s cap when jitter draws zero', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    const delays = Array.from({ length: 8 }, () => backoff.next());
    assert.deepEqual(delays, [2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    assert.equal(RECONNECT_BASE_MS, 2_000);
    assert.equal(RECONNECT_CAP_MS, 30_000);
  });

  it('jitters each delay downwards by at most 20 % and never above the cap', () => {
    const clock = testClock();
    const draws = [0.999, 0.5, 0, 1];
    let i = 0;
    const backoff = createBackoff({ now: clock.now, random: () => draws[i++ % draws.length]! });
    const delays = Array.from({ length: 8 }, () => backoff.next());
    assert.deepEqual(delays.slice(0, 4), [1_600, 3_600, 8_000, 12_800]);
    for (const delay of delays) assert.ok(delay <= RECONNECT_CAP_MS && delay >= RECONNECT_BASE_MS * 0.8);
  });

  it('resets to the base after a session that stayed up for a minute', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    backoff.next();
    backoff.next();
    backoff.next();
    backoff.sessionStarted();
    clock.advance(RECONNECT_RESET_AFTER_MS);
    backoff.sessionEnded();
    assert.equal(backoff.failures(), 0);
    assert.equal(backoff.next(), 2_000);
  });

  it('keeps doubling after a session that flapped in under a minute', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    backoff.next();
    backoff.next();
    backoff.sessionStarted();
    clock.advance(RECONNECT_RESET_AFTER_MS - 1);
    backoff.sessionEnded();
    assert.equal(backoff.next(), 8_000);
  });

  it('accepts a lower base for tests without changing the production defaults', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0, baseMs: 50, capMs: 400 });
    assert.deepEqual(Array.from({ length: 5 }, () => backoff.next()), [50, 100, 200, 400, 400]);
    assert.throws(() => createBackoff({ now: clock.now, baseMs: 0 }), RangeError);
  });
});
