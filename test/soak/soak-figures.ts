// The soak's measurements: per-request latency samples by client kind, the boundary's RSS and CPU time read
// from /proc/<pid>/status and /proc/<pid>/stat once a second, and the figures table that the test prints as diagnostics and bench/soak.sh
// prints at the end of a long run. No I/O except the /proc read.

import { readFile } from 'node:fs/promises';

/** RSS is sampled this often; the issue asks for RSS over time, and a second resolves a leak well enough. */
export const RSS_SAMPLE_INTERVAL_MS = 1_000;
/** Samples kept: a ten-minute soak plus its baseline at one a second, with room to spare. */
const MAX_RSS_SAMPLES = 3_600;

export interface LatencyLog {
  /** One allowed request of `kind` took `ms` and succeeded (`ok`) or not, with what went wrong. */
  record(kind: string, ms: number, ok: boolean, problem?: string): void;
  /** ms of every successful request (all kinds, or one). */
  samples(kind?: string): number[];
  attempts(): number;
  failures(): readonly string[];
  kinds(): string[];
}

/** Failures kept verbatim for the report; the count goes on past this. */
const MAX_FAILURES_KEPT = 20;

export function createLatencyLog(): LatencyLog {
  const byKind = new Map<string, number[]>();
  const failures: string[] = [];
  let attempts = 0;
  let failed = 0;
  return {
    record(kind, ms, ok, problem) {
      attempts++;
      if (!ok) {
        failed++;
        if (failures.length < MAX_FAILURES_KEPT) failures.push(`${kind}: ${problem ?? 'failed'}`);
        return;
      }
      const list = byKind.get(kind) ?? [];
      list.push(ms);
      byKind.set(kind, list);
    },
    samples: (kind) => (kind === undefined ? [...byKind.values()].flat() : [...(byKind.get(kind) ?? [])]),
    attempts: () => attempts,
    failures: () => (failed > failures.length ? [...failures, `... ${failed - failures.length} more`] : failures),
    kinds: () => [...byKind.keys()].sort(),
  };
}

/** The q-quantile (0..1) by nearest rank; NaN for no samples. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

export interface RssSample {
  readonly atMs: number;
  readonly rssMb: number;
  /** User + system CPU time of the process so far. */
  readonly cpuMs: number;
}

/** USER_HZ of /proc/<pid>/stat: 100 on every Linux build that matters here (x86_64, arm64). */
const CLOCK_TICKS_PER_SECOND = 100;

export interface RssSampler {
  readonly samples: RssSample[];
  stop(): void;
}

/** VmRSS of `pid` in MB and its CPU time, or undefined once the process is gone. */
export async function readProcSample(pid: number): Promise<{ rssMb: number; cpuMs: number } | undefined> {
  try {
    const [status, stat] = await Promise.all([readFile(`/proc/${pid}/status`, 'utf8'), readFile(`/proc/${pid}/stat`, 'utf8')]);
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    // Fields after the parenthesised command name: state is field 3, utime 14 and stime 15 (proc(5)).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return kb === undefined ? undefined : { rssMb: Number(kb) / 1024, cpuMs: (ticks * 1_000) / CLOCK_TICKS_PER_SECOND };
  } catch {
    return undefined;
  }
}

/** CPU used over [fromMs, toMs] as a share of one core, from the samples nearest inside the window. */
export function cpuPercent(samples: readonly RssSample[], fromMs: number, toMs: number): number {
  const window = samples.filter((s) => s.atMs >= fromMs && s.atMs <= toMs);
  const first = window[0];
  const last = window.at(-1);
  if (first === undefined || last === undefined || last.atMs === first.atMs) return Number.NaN;
  return (100 * (last.cpuMs - first.cpuMs)) / (last.atMs - first.atMs);
}

/** Samples RSS every RSS_SAMPLE_INTERVAL_MS from now; `now` is the soak's clock (ms since it started). */
export function sampleRss(pid: number, now: () => number): RssSampler {
  const samples: RssSample[] = [];
  const take = (): void => {
    const atMs = now();
    void readProcSample(pid).then((sample) => {
      if (sample !== undefined && samples.length < MAX_RSS_SAMPLES) samples.push({ atMs, ...sample });
    });
  };
  take();
  const timer = setInterval(take, RSS_SAMPLE_INTERVAL_MS);
  return { samples, stop: () => clearInterval(timer) };
}

/** Growth over [fromMs, toMs]: the largest sample in the window minus the first sample at or after fromMs. */
export function rssGrowthMb(samples: readonly RssSample[], fromMs: number, toMs: number): { startMb: number; maxMb: number; endMb: number; growthMb: number } {
  const window = samples.filter((s) => s.atMs >= fromMs && s.atMs <= toMs);
  const startMb = window[0]?.rssMb ?? Number.NaN;
  const maxMb = Math.max(...window.map((s) => s.rssMb));
  return { startMb, maxMb, endMb: window.at(-1)?.rssMb ?? Number.NaN, growthMb: maxMb - startMb };
}

export interface Figure {
  readonly name: string;
  readonly value: string;
  /** What it is held to, or '' for a figure only reported. */
  readonly bound: string;
}

export function formatFigures(figures: readonly Figure[]): string {
  const width = Math.max(...figures.map((f) => f.name.length));
  const valueWidth = Math.max(...figures.map((f) => f.value.length));
  return figures.map((f) => `${f.name.padEnd(width)}  ${f.value.padStart(valueWidth)}  ${f.bound}`.trimEnd()).join('\n');
}

export const ms = (value: number): string => `${value.toFixed(1)} ms`;
export const mb = (value: number): string => `${value.toFixed(1)} MB`;
