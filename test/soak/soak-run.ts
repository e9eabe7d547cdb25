// The soak driver shared by test/soak/soak.test.ts (short form, in `npm test`) and bench/soak.sh (long form):
// start the stack, run steady allowed traffic through a warm-up, an idle baseline and the hostile phase, then
// SIGTERM the boundary with the held hostile sockets still open, and return every figure. Asserts nothing.

import { availableParallelism, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as pause } from 'node:timers/promises';
import { SHUTDOWN_DRAIN_MS } from '../../src/app/boundary-shutdown.js';
import { withinDeadline } from '../harness/waiters.js';
import { cpuPercent, createLatencyLog, type LatencyLog, quantile, type RssSample, rssGrowthMb, sampleRss } from './soak-figures.js';
import type { HostileTally } from './soak-hostile.js';
import { FIRST_BYTE_TIMEOUT_MS } from '../../src/proxy/admission.js';
import { startHttpHostiles } from './soak-hostile-http.js';
import { startOtherHostiles } from './soak-hostile-other.js';
import { type SoakStack, startSoakStack } from './soak-stack.js';
import { startSteadyTraffic } from './soak-steady.js';

/** Short form (npm test): about 60 s in all with start-up and shutdown. bench/soak.sh sets SOAK_SECONDS=600. */
export const SHORT_HOSTILE_SECONDS = 24;
/** Steady traffic before anything is measured: the tsx child's first requests compile and warm the JIT. */
const WARMUP_SECONDS = 4;
/** The idle baseline: at least this long, and a fifth of the hostile phase on long runs. */
const MIN_BASELINE_SECONDS = 10;
/** RSS growth is measured after this part of the hostile phase: leaf certificates, pools and JIT fill up first. */
const MIN_RSS_WARMUP_SECONDS = 10;
const RSS_WARMUP_FRACTION = 0.2;
/**
 * Bounds a hang only: a process still alive this long past the drain deadline is stuck on a handle its drain did
 * not close, and would never exit. Whether it drained in time is its exit code (0, not 3), not the time it took.
 */
export const EXIT_MARGIN_MS = 30_000;

export interface SoakOptions {
  readonly hostileSeconds: number;
}

export interface PhaseFigures {
  readonly attempts: number;
  readonly failures: readonly string[];
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly byKind: Readonly<Record<string, { readonly n: number; readonly p50Ms: number; readonly p99Ms: number }>>;
}

export interface SoakReport {
  readonly hostileSeconds: number;
  readonly baselineSeconds: number;
  readonly firstByteTimeoutMs: number | undefined;
  /** 1-minute load average of the host when the soak started and when its hostile phase ended. */
  readonly loadAverage: { readonly start: number; readonly end: number; readonly cores: number };
  readonly baseline: PhaseFigures;
  readonly hostile: PhaseFigures;
  readonly p99Ratio: number;
  readonly rss: { readonly samples: readonly RssSample[]; readonly startMb: number; readonly maxMb: number; readonly endMb: number; readonly growthMb: number };
  /** CPU use as a share of one core: the boundary's, and the test process's (load, origins, log parsing). */
  readonly cpu: { readonly baselinePercent: number; readonly hostilePercent: number; readonly driverHostilePercent: number };
  readonly hostiles: readonly HostileTally[];
  /** Pino lines that are not audit events (warnings, errors), as samples. */
  readonly plainLogs: readonly string[];
  /** The first few lines of each event key (SOAK_REPORT's JSON only). */
  readonly eventSamples: Readonly<Record<string, readonly string[]>>;
  /** The boundary's own audit events by class:activity:reason, over the whole run. */
  readonly events: Readonly<Record<string, number>>;
  readonly exit: { readonly code: number | null; readonly signal: string | null; readonly ms: number; readonly deadlineMs: number; readonly lastLines: readonly string[] };
}

/** SOAK_SECONDS from the environment (bench/soak.sh), else the short form. */
export function soakSecondsFrom(env: NodeJS.ProcessEnv): number {
  const seconds = Number(env.SOAK_SECONDS ?? SHORT_HOSTILE_SECONDS);
  return Number.isInteger(seconds) && seconds > 0 ? seconds : SHORT_HOSTILE_SECONDS;
}

/** The idle baseline's length for a hostile phase of `hostileSeconds`. */
export function baselineSecondsFor(hostileSeconds: number): number {
  return Math.max(MIN_BASELINE_SECONDS, Math.round(hostileSeconds / 5));
}

function phaseFigures(log: LatencyLog): PhaseFigures {
  const all = log.samples();
  const byKind = Object.fromEntries(
    log.kinds().map((kind) => {
      const samples = log.samples(kind);
      return [kind, { n: samples.length, p50Ms: quantile(samples, 0.5), p99Ms: quantile(samples, 0.99) }];
    }),
  );
  return { attempts: log.attempts(), failures: log.failures(), p50Ms: quantile(all, 0.5), p99Ms: quantile(all, 0.99), byKind };
}

/** Runs the whole soak; `onCleanup` registers teardown (t.after) so a failure mid-way still ends every process. */
export async function runSoak(options: SoakOptions, onCleanup: (fn: () => Promise<void> | void) => void): Promise<SoakReport> {
  const hostileMs = options.hostileSeconds * 1_000;
  const baselineSeconds = baselineSecondsFor(options.hostileSeconds);
  const stack: SoakStack = await startSoakStack();
  onCleanup(() => stack.close());
  const loadAtStart = loadavg()[0] ?? Number.NaN;
  const t0 = performance.now();
  const now = (): number => performance.now() - t0;
  const rss = sampleRss(stack.boundary.pid, now);
  onCleanup(() => rss.stop());
  const logs = { warmup: createLatencyLog(), baseline: createLatencyLog(), hostile: createLatencyLog() };
  let current = logs.warmup;
  const steady = startSteadyTraffic(stack, () => current);
  onCleanup(() => steady.stop());

  // Phase boundaries are points on the soak's own schedule, not waits for an event.
  await pause(WARMUP_SECONDS * 1_000);
  current = logs.baseline;
  const baselineStart = now();
  await pause(baselineSeconds * 1_000);
  current = logs.hostile;
  const hostileStart = now();
  const driverCpuAtStart = process.cpuUsage();
  let active = true;
  const phaseEnd = pause(hostileMs).then(() => {
    active = false;
  });
  const phase = { active: () => active };
  const http = await startHttpHostiles(stack, phase);
  onCleanup(() => http.destroy());
  const other = await startOtherHostiles(stack, phase, options.hostileSeconds);
  onCleanup(() => other.destroy());
  await phaseEnd;
  await Promise.all([http.done, other.done]);
  await http.settle();
  const hostileEnd = now();
  const driverCpu = process.cpuUsage(driverCpuAtStart);
  const loadAtEnd = loadavg()[0] ?? Number.NaN;
  await steady.stop();

  // SIGTERM with what the hostile mix left open (idle tunnels younger than their idle timeout, zero-byte sockets
  // where there is no first-byte timeout, relays of the last WebSocket floods), as a pod is stopped mid-attack.
  const deadlineMs = SHUTDOWN_DRAIN_MS + EXIT_MARGIN_MS;
  const termAt = performance.now();
  stack.boundary.child.kill('SIGTERM');
  const exited = await withinDeadline(stack.boundary.exited(), 'boundary exit after SIGTERM', deadlineMs).catch(() => ({ code: null, signal: 'none within the deadline' }));
  const exitMs = performance.now() - termAt;
  const shutdownLines = stack.boundary.recent().filter((line) => line.includes('"time"')).map((line) => line.slice(0, 400));
  rss.stop();

  const baseline = phaseFigures(logs.baseline);
  const hostile = phaseFigures(logs.hostile);
  const rssWarmupMs = Math.max(MIN_RSS_WARMUP_SECONDS * 1_000, RSS_WARMUP_FRACTION * hostileMs);
  return {
    hostileSeconds: options.hostileSeconds,
    baselineSeconds,
    firstByteTimeoutMs: FIRST_BYTE_TIMEOUT_MS,
    loadAverage: { start: loadAtStart, end: loadAtEnd, cores: availableParallelism() },
    baseline,
    hostile,
    p99Ratio: hostile.p99Ms / baseline.p99Ms,
    rss: { samples: rss.samples, ...rssGrowthMb(rss.samples, hostileStart + rssWarmupMs, hostileEnd) },
    cpu: { baselinePercent: cpuPercent(rss.samples, baselineStart, hostileStart), hostilePercent: cpuPercent(rss.samples, hostileStart, hostileEnd),
      driverHostilePercent: (100 * (driverCpu.user + driverCpu.system)) / 1_000 / (hostileEnd - hostileStart),
    },
    hostiles: [...http.tallies, ...other.tallies],
    plainLogs: [...stack.boundary.plainLogs],
    eventSamples: Object.fromEntries(stack.boundary.samples),
    events: Object.fromEntries([...stack.boundary.tally].sort((a, b) => b[1] - a[1])),
    exit: { code: exited.code, signal: exited.signal, ms: exitMs, deadlineMs, lastLines: shutdownLines },
  };
}
