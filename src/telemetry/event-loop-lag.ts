// nodejs_eventloop_lag_*: prom-client's eight series (names, help, aggregators), sampled so that an idle sidecar
// sleeps. prom-client's monitor wakes the process every 10 ms for its whole life, most of what an idle boundary cost
// (docs/benchmarks.md#the-event-loop-monitor). Here one timer samples every 10 ms while the loop is busy, and the
// process's once-a-second tick, shared with its other housekeeping, otherwise; each sample is what prom-client's
// 10 ms timer records, the resolution plus how late the timer ran, so a loop blocked while idle is still seen.

import { createHistogram, performance, type EventLoopUtilization } from 'node:perf_hooks';
import { GLOBAL_TIMERS, SECOND_TICK, SECOND_TICK_MS, type SecondTick, type Timers } from '../shared/timers.js';
import { Gauge, type Registry } from './prom.js';

/** prom-client's default eventLoopMonitoringPrecision: the interval of a busy loop's samples, and every sample's base. */
export const EVENT_LOOP_SAMPLE_MS = 10;
/** The interval of an idle loop's samples (the shared tick's), and how often the loop's utilization is read to
 *  choose between the two. */
export const EVENT_LOOP_IDLE_SAMPLE_MS = SECOND_TICK_MS;
/** The share of its time the loop spent working, over the last reading, from which it samples every 10 ms. Above
 *  what the 10 ms sampling itself costs an idle loop, or the sampler would keep itself busy. */
export const EVENT_LOOP_BUSY_UTILIZATION = 0.02;

const NS_PER_MS = 1e6;
const NS_PER_S = 1e9;

export interface EventLoopClock extends Timers {
  /** The loop's utilization (0-1) since the previous call. */
  utilization(): number;
  /** What an idle loop's samples ride on. */
  readonly second: SecondTick;
}

function utilizationSinceLastCall(): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}

/** Each figure of a window's samples, with its series' help and aggregator as prom-client declares them. */
const FIGURES = [
  ['min', 'The minimum recorded event loop delay.', 'min'],
  ['max', 'The maximum recorded event loop delay.', 'max'],
  ['mean', 'The mean of the recorded event loop delays.', 'average'],
  ['stddev', 'The standard deviation of the recorded event loop delays.', 'average'],
  ['p50', 'The 50th percentile of the recorded event loop delays.', 'average'],
  ['p90', 'The 90th percentile of the recorded event loop delays.', 'average'],
  ['p99', 'The 99th percentile of the recorded event loop delays.', 'average'],
] as const;

/** What the samples since the last take say, in seconds. */
export type EventLoopDelays = { readonly count: number } & { readonly [F in (typeof FIGURES)[number][0]]: number };

export interface EventLoopSampler {
  /** The samples since the last take, summed up and forgotten; NaN for each figure when there were none. */
  take(): EventLoopDelays;
}

/** Starts sampling on `clock` (unref'd timers by default) and never stops, as prom-client's monitor. */
export function startEventLoopSampler(
  clock: EventLoopClock = { ...GLOBAL_TIMERS, utilization: utilizationSinceLastCall(), second: SECOND_TICK },
): EventLoopSampler {
  const samples = createHistogram();
  let nextReading = clock.now() + EVENT_LOOP_IDLE_SAMPLE_MS;
  // When the busy loop's own 10 ms timer is due.
  let due = 0;
  // Leaves the shared tick; undefined while the loop is busy.
  let leave: (() => void) | undefined;

  function sample(dueAt: number): void {
    const now = clock.now();
    samples.record(Math.max(1, Math.round((EVENT_LOOP_SAMPLE_MS + now - dueAt) * NS_PER_MS)));
    // Called by its own 10 ms timer only while busy, by the shared tick only while idle.
    let busy = leave === undefined;
    if (now >= nextReading) {
      busy = clock.utilization() >= EVENT_LOOP_BUSY_UTILIZATION;
      nextReading = now + EVENT_LOOP_IDLE_SAMPLE_MS;
    }
    if (busy) {
      leave?.();
      leave = undefined;
      due = now + EVENT_LOOP_SAMPLE_MS;
      clock.setTimeout(ownTick, EVENT_LOOP_SAMPLE_MS);
    } else leave ??= clock.second.add(sample);
  }
  const ownTick = (): void => sample(due);

  leave = clock.second.add(sample);
  return {
    take() {
      const { count } = samples;
      // An empty window has no delays to report: NaN, not the histogram's extremes (a minimum of 2^63 ns).
      const seconds = (ns: number): number => (count === 0 ? Number.NaN : ns / NS_PER_S);
      const delays = {
        count,
        min: seconds(samples.min),
        max: seconds(samples.max),
        mean: seconds(samples.mean),
        stddev: seconds(samples.stddev),
        p50: seconds(samples.percentile(50)),
        p90: seconds(samples.percentile(90)),
        p99: seconds(samples.percentile(99)),
      };
      samples.reset();
      return delays;
    },
  };
}

/** Registers the eight series on `registry`, in prom-client's order; each scrape reports the samples since the last. */
export function eventLoopLag(registry: Registry, sampler: EventLoopSampler = startEventLoopSampler()): void {
  const registers = [registry];
  // First, as in prom-client: a scrape reads the series in this order, and this one's collect sets the others.
  // Its own value is how long a setImmediate() took, set when it ran: the next scrape reports it, as prom-client's.
  const lag: Gauge = new Gauge({
    name: 'nodejs_eventloop_lag_seconds',
    help: 'Lag of event loop in seconds.',
    registers,
    aggregator: 'average',
    collect() {
      const start = process.hrtime.bigint();
      setImmediate(() => lag.set(Number(process.hrtime.bigint() - start) / NS_PER_S));
      const delays = sampler.take();
      for (const [figure, gauge] of figures) gauge.set(delays[figure]);
    },
  });
  const figures = FIGURES.map(([figure, help, aggregator]) => [figure, new Gauge({ name: `nodejs_eventloop_lag_${figure}_seconds`, help, registers, aggregator })] as const);
}
