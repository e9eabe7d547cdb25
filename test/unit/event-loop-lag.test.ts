import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import {
  EVENT_LOOP_BUSY_UTILIZATION,
  EVENT_LOOP_IDLE_SAMPLE_MS,
  EVENT_LOOP_SAMPLE_MS,
  type EventLoopClock,
  eventLoopLag,
  startEventLoopSampler,
} from '../../src/telemetry/event-loop-lag.js';
import { createSecondTick, type Timers } from '../../src/shared/timers.js';

/** A clock whose one pending timer runs when the test says, as late as it says; utilization is what the test sets. */
function fakeClock() {
  let now = 0;
  let pending: { readonly callback: () => void; readonly at: number } | undefined;
  const intervals: number[] = [];
  let readings = 0;
  const state = { utilization: 0 };
  const timers: Timers = {
    now: () => now,
    setTimeout(callback, ms) {
      assert.equal(pending, undefined, 'one timer at a time');
      intervals.push(ms);
      pending = { callback, at: now + ms };
      return pending;
    },
    clearTimeout() {
      pending = undefined;
    },
  };
  // The once-a-second tick on the same timers: while the loop is idle, its timer is the one pending.
  const clock: EventLoopClock = {
    ...timers,
    utilization() {
      readings++;
      return state.utilization;
    },
    second: createSecondTick(timers),
  };
  return {
    clock,
    state,
    intervals,
    readings: () => readings,
    /** Runs the pending timer `lateMs` after it was due. */
    fire(lateMs = 0) {
      const timer = pending;
      assert.ok(timer !== undefined);
      pending = undefined;
      now = timer.at + lateMs;
      timer.callback();
    },
  };
}

/** A recorded sample, in ms, within the histogram's 3 significant digits. */
const sampleIs = (actualS: number, expectedMs: number) => assert.ok(Math.abs(actualS * 1e3 - expectedMs) <= expectedMs / 500, `${actualS} s against ${expectedMs} ms`);

describe('event loop delay sampling', () => {
  it('samples an idle loop once a second, each sample the resolution plus how late the timer ran', () => {
    const c = fakeClock();
    const sampler = startEventLoopSampler(c.clock);
    assert.deepEqual(c.intervals, [EVENT_LOOP_IDLE_SAMPLE_MS]);
    c.fire();
    c.fire(250);
    c.fire(3);
    assert.deepEqual(c.intervals, [EVENT_LOOP_IDLE_SAMPLE_MS, EVENT_LOOP_IDLE_SAMPLE_MS, EVENT_LOOP_IDLE_SAMPLE_MS, EVENT_LOOP_IDLE_SAMPLE_MS]);
    const samples = sampler.take();
    assert.equal(samples.count, 3);
    sampleIs(samples.min, EVENT_LOOP_SAMPLE_MS);
    // A loop blocked for a quarter of a second while idle is recorded as a 10 ms timer would have seen it.
    sampleIs(samples.max, EVENT_LOOP_SAMPLE_MS + 250);
    const empty = sampler.take();
    assert.equal(empty.count, 0, 'a take forgets what it handed over');
    assert.ok(Number.isNaN(empty.min) && Number.isNaN(empty.p99));
  });

  it('samples every 10 ms while the loop is busy, reads the utilization once a second, and goes back when idle', () => {
    const c = fakeClock();
    const sampler = startEventLoopSampler(c.clock);
    c.state.utilization = EVENT_LOOP_BUSY_UTILIZATION;
    c.fire();
    assert.equal(c.readings(), 1);
    assert.equal(c.intervals.at(-1), EVENT_LOOP_SAMPLE_MS);
    const perReading = EVENT_LOOP_IDLE_SAMPLE_MS / EVENT_LOOP_SAMPLE_MS;
    // 99 more ticks, one of them a millisecond late: 991 ms since the reading.
    for (let i = 1; i < perReading; i++) c.fire(i === 1 ? 1 : 0);
    assert.equal(c.readings(), 1, 'no reading until a second has passed');
    assert.equal(c.intervals.at(-1), EVENT_LOOP_SAMPLE_MS);
    c.state.utilization = EVENT_LOOP_BUSY_UTILIZATION * 0.99;
    for (let i = 0; i < perReading && c.readings() === 1; i++) c.fire();
    assert.equal(c.readings(), 2);
    assert.equal(c.intervals.at(-1), EVENT_LOOP_IDLE_SAMPLE_MS);
    const samples = sampler.take();
    assert.ok(samples.count > perReading, `${samples.count}`);
    sampleIs(samples.min, EVENT_LOOP_SAMPLE_MS);
    sampleIs(samples.max, EVENT_LOOP_SAMPLE_MS + 1);
  });

  it('reports prom-client\'s eight series from the samples since the last scrape, NaN when there were none', async () => {
    const c = fakeClock();
    const registry = new Registry();
    eventLoopLag(registry, startEventLoopSampler(c.clock));
    c.fire(0);
    c.fire(20);
    c.fire(40);
    const value = async (name: string): Promise<number> => {
      const metric = registry.getSingleMetric(name);
      assert.ok(metric !== undefined, name);
      const { values } = await metric.get();
      return values[0]?.value ?? Number.NaN;
    };
    const text = await registry.metrics();
    for (const name of ['seconds', 'min_seconds', 'max_seconds', 'mean_seconds', 'stddev_seconds', 'p50_seconds', 'p90_seconds', 'p99_seconds']) {
      assert.match(text, new RegExp(`^# TYPE nodejs_eventloop_lag_${name} gauge$`, 'm'));
    }
    assert.match(text, /^# HELP nodejs_eventloop_lag_p99_seconds The 99th percentile of the recorded event loop delays\.$/m);
    const near = (actual: number, expected: number) => assert.ok(Math.abs(actual - expected) < 0.0005, `${actual} against ${expected}`);
    near(await value('nodejs_eventloop_lag_min_seconds'), 0.01);
    near(await value('nodejs_eventloop_lag_max_seconds'), 0.05);
    near(await value('nodejs_eventloop_lag_mean_seconds'), 0.03);
    near(await value('nodejs_eventloop_lag_p50_seconds'), 0.03);
    // Taken: the next scrape, with no sample between, has no delays to report.
    await registry.metrics();
    for (const name of ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99']) assert.ok(Number.isNaN(await value(`nodejs_eventloop_lag_${name}_seconds`)), name);
    // The setImmediate() lag of the scrape before, set once it ran.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const lag = await value('nodejs_eventloop_lag_seconds');
    assert.ok(lag > 0 && lag < 60, `${lag}`);
  });
});
