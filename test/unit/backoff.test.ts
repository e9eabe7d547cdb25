import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AttemptOutcome,
  createBackoff,
  HEALTHY_SESSION_MIN_MS,
  RECONNECT_AFTER_HEALTHY_SESSION_MS,
  RECONNECT_AFTER_HEALTHY_SESSION_SPREAD_MS,
  RECONNECT_BASE_MS,
  RECONNECT_CAP_MS,
  RECONNECT_QUICK_WINDOW_MS,
} from '../../src/control/backoff.js';
import { testClock } from '../harness/clock.js';

const FAILED: AttemptOutcome = { kind: 'failed', retryable: true };
const FINAL: AttemptOutcome = { kind: 'failed', retryable: false };
const ENDED: AttemptOutcome = { kind: 'session-ended' };

describe('reconnect backoff', () => {
  it('starts at 2 s and doubles to a 30 s cap over consecutive failures when jitter draws zero', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    const delays = Array.from({ length: 8 }, () => backoff.next(FAILED));
    assert.deepEqual(
      delays.map((d) => d.delayMs),
      [2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000],
    );
    assert.deepEqual(
      delays.map((d) => [d.reason, d.failures]),
      Array.from({ length: 8 }, (_, i) => ['backoff', i + 1]),
    );
    assert.equal(RECONNECT_BASE_MS, 2_000);
    assert.equal(RECONNECT_CAP_MS, 30_000);
  });

  it('jitters each backoff delay downwards by at most 20 % and never above the cap', () => {
    const clock = testClock();
    const draws = [0.999, 0.5, 0, 1];
    let i = 0;
    const backoff = createBackoff({ now: clock.now, random: () => draws[i++ % draws.length]! });
    const delays = Array.from({ length: 8 }, () => backoff.next(FAILED).delayMs);
    assert.deepEqual(delays.slice(0, 4), [1_600, 3_600, 8_000, 12_800]);
    for (const delay of delays) assert.ok(delay <= RECONNECT_CAP_MS && delay >= RECONNECT_BASE_MS * 0.8);
  });

  it('re-attaches within a second after a healthy session, however many failures came before it', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    for (let i = 0; i < 6; i += 1) backoff.next(FAILED);
    backoff.attached();
    clock.advance(HEALTHY_SESSION_MIN_MS);
    assert.deepEqual(backoff.next(ENDED), { delayMs: RECONNECT_AFTER_HEALTHY_SESSION_MS, reason: 'after-healthy-session', failures: 0 });
    assert.equal(backoff.failures(), 0);
    // The long schedule starts over: once past the quick window the next failure waits the base again.
    clock.advance(RECONNECT_QUICK_WINDOW_MS);
    assert.deepEqual(backoff.next(FAILED), { delayMs: RECONNECT_BASE_MS, reason: 'backoff', failures: 1 });
  });

  it('keeps retrying quickly while a restarting supervisor\'s port is closed, then backs off from the base', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 1 });
    backoff.attached();
    clock.advance(20_000);
    let next = backoff.next(ENDED);
    const quick: number[] = [];
    // Connection refused on every try: quick retries until the window closes, each at most a second apart.
    for (let i = 0; i < 50; i += 1) {
      clock.advance(next.delayMs);
      next = backoff.next(FAILED);
      if (next.reason !== 'after-healthy-session') break;
      quick.push(next.delayMs);
    }
    assert.equal(quick.length, Math.ceil(RECONNECT_QUICK_WINDOW_MS / 1_000) - 1);
    assert.ok(quick.every((d) => d <= 1_000));
    assert.equal(next.reason, 'backoff');
    assert.equal(next.delayMs, RECONNECT_BASE_MS * 0.8, 'the first backoff after the window is the base, jittered');
    assert.equal(next.failures, quick.length + 1, 'the quick retries still count as failed attempts');
  });

  it('gives no quick window after a failure that was not preceded by a healthy session', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    backoff.attached();
    clock.advance(HEALTHY_SESSION_MIN_MS - 1);
    assert.equal(backoff.next(ENDED).reason, 'backoff');
    assert.equal(backoff.next(FAILED).delayMs, 4_000);
  });

  it('spreads the quick re-attach uniformly over 250-1000 ms so a fleet does not arrive in step', () => {
    const clock = testClock();
    const draws = [0, 0.5, 0.999_999];
    const delays = draws.map((draw) => {
      const backoff = createBackoff({ now: clock.now, random: () => draw });
      backoff.attached();
      clock.advance(20_000);
      return backoff.next(ENDED).delayMs;
    });
    assert.deepEqual(delays, [250, 625, 1_000]);
    assert.equal(RECONNECT_AFTER_HEALTHY_SESSION_MS + RECONNECT_AFTER_HEALTHY_SESSION_SPREAD_MS, 1_000);
  });

  it('re-attaches quickly after each of many supervisor restarts ~20 s apart', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 1 });
    for (let restart = 0; restart < 10; restart += 1) {
      backoff.attached();
      clock.advance(20_000);
      const next = backoff.next(ENDED);
      assert.equal(next.reason, 'after-healthy-session');
      assert.ok(next.delayMs <= 1_000, `restart ${restart}: ${next.delayMs} ms`);
      clock.advance(next.delayMs);
    }
  });

  it('counts a session attached for less than the healthy minimum as a failure, so admit-and-drop meets the backoff', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    const delays: number[] = [];
    for (let i = 0; i < 6; i += 1) {
      backoff.attached();
      clock.advance(HEALTHY_SESSION_MIN_MS - 1);
      const next = backoff.next(ENDED);
      assert.equal(next.reason, 'backoff');
      delays.push(next.delayMs);
    }
    assert.deepEqual(delays, [2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    assert.equal(backoff.failures(), 6);
  });

  it('counts an admitted session whose first policy was never acknowledged as a failure', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    // The client reports such a session as failed: attached() was never called.
    clock.advance(60_000);
    assert.deepEqual(backoff.next(ENDED), { delayMs: 2_000, reason: 'backoff', failures: 1 });
  });

  it('does not carry one session\'s attachment over to the next attempt', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    backoff.attached();
    clock.advance(HEALTHY_SESSION_MIN_MS);
    assert.equal(backoff.next(ENDED).reason, 'after-healthy-session');
    clock.advance(60_000);
    assert.equal(backoff.next(ENDED).reason, 'backoff');
  });

  it('goes straight to the cap for a refusal that is not retryable, even right after a healthy session, and keeps counting', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0 });
    backoff.attached();
    clock.advance(HEALTHY_SESSION_MIN_MS);
    backoff.next(ENDED);
    assert.deepEqual(backoff.next(FINAL), { delayMs: RECONNECT_CAP_MS, reason: 'not-retryable', failures: 1 });
    assert.deepEqual(backoff.next(FAILED), { delayMs: RECONNECT_BASE_MS, reason: 'backoff', failures: 2 });
    const jittered = createBackoff({ now: clock.now, random: () => 1 }).next(FINAL);
    assert.equal(jittered.delayMs, RECONNECT_CAP_MS * 0.8, 'jittered like any capped delay, never above the cap');
  });

  it('accepts lower settings for tests without changing the production defaults', () => {
    const clock = testClock();
    const backoff = createBackoff({ now: clock.now, random: () => 0, baseMs: 50, capMs: 400 });
    assert.deepEqual(
      Array.from({ length: 5 }, () => backoff.next(FAILED).delayMs),
      [50, 100, 200, 400, 400],
    );
    assert.throws(() => createBackoff({ now: clock.now, baseMs: 0 }), RangeError);
    assert.throws(() => createBackoff({ now: clock.now, healthyMinMs: -1 }), RangeError);
  });
});
