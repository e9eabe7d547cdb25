// Renders a SoakReport as the figures table (test diagnostics in the short form, bench/soak.sh's output in the
// long one) and holds the bounds both forms assert, so the table shows each figure beside what it is held to.

import { type Figure, formatFigures, mb, ms } from './soak-figures.js';
import type { SoakReport } from './soak-run.js';

/** Hostile phases at least this long are the long form and are held to the issue's 2x target. */
export const LONG_FORM_SECONDS = 300;
/** The issue's target: p99 of allowed requests under the hostile mix at most twice the idle baseline's. */
export const LONG_P99_RATIO = 2;
/**
 * The short form's bound. Its baseline is 10 s, about 330 samples, so p99 is one of the three or four slowest
 * requests, and the host (2 cores) also runs the load generator and other people's jobs: with a load average of 9,
 * baseline p99 measured 26-99 ms and the ratio 0.5x-4.8x over six runs. 10x still fails a boundary whose event
 * loop the hostile mix really blocks (a synchronous stall per hostile request shows as far more), and the ratio and
 * the load average are always printed, so drift stays visible. The long form is held to the issue's 2x.
 */
export const SHORT_P99_RATIO = 10;
/**
 * RSS may grow this much between the end of the hostile warm-up and the end of the phase. The boundary settles
 * near 100-150 MB; a per-request or per-connection leak over thousands of requests and sockets passes this in
 * the long form, while V8's heap growing in steps (a few 10 MB at a time) stays under it.
 */
export const RSS_GROWTH_BOUND_MB = 64;
/** A clean drain on loopback takes well under this; a slower exit prints the boundary's last lines. */
const SLOW_EXIT_MS = 2_000;

export function p99RatioBound(report: SoakReport): number {
  return report.hostileSeconds >= LONG_FORM_SECONDS ? LONG_P99_RATIO : SHORT_P99_RATIO;
}

function successRate(phase: SoakReport['baseline']): string {
  const ok = phase.attempts - failuresCount(phase);
  return `${((100 * ok) / Math.max(1, phase.attempts)).toFixed(2)} % (${ok}/${phase.attempts})`;
}

export function failuresCount(phase: SoakReport['baseline']): number {
  const more = /^\.\.\. (\d+) more$/.exec(phase.failures.at(-1) ?? '');
  return more === null ? phase.failures.length : phase.failures.length - 1 + Number(more[1]);
}

export function reportFigures(report: SoakReport): Figure[] {
  const figures: Figure[] = [
    { name: 'hostile phase', value: `${report.hostileSeconds} s`, bound: `baseline ${report.baselineSeconds} s` },
    { name: 'host load average, start / end', value: `${report.loadAverage.start.toFixed(1)} / ${report.loadAverage.end.toFixed(1)}`, bound: `${report.loadAverage.cores} cores` },
    { name: 'allowed success, baseline', value: successRate(report.baseline), bound: 'must be 100 %' },
    { name: 'allowed success, hostile', value: successRate(report.hostile), bound: 'must be 100 %' },
    { name: 'allowed p50, baseline / hostile', value: `${ms(report.baseline.p50Ms)} / ${ms(report.hostile.p50Ms)}`, bound: '' },
    { name: 'allowed p99, baseline / hostile', value: `${ms(report.baseline.p99Ms)} / ${ms(report.hostile.p99Ms)}`, bound: '' },
    { name: 'allowed p99 ratio', value: `${report.p99Ratio.toFixed(2)}x`, bound: `<= ${p99RatioBound(report)}x (target 2x)` },
  ];
  for (const [kind, hostile] of Object.entries(report.hostile.byKind)) {
    const base = report.baseline.byKind[kind];
    figures.push({ name: `  p99 ${kind}`, value: `${ms(base?.p99Ms ?? Number.NaN)} -> ${ms(hostile.p99Ms)}`, bound: `n ${base?.n ?? 0} / ${hostile.n}` });
  }
  const { rss } = report;
  figures.push(
    { name: 'RSS after warm-up / max / end', value: `${mb(rss.startMb)} / ${mb(rss.maxMb)} / ${mb(rss.endMb)}`, bound: '' },
    { name: 'RSS growth after warm-up', value: mb(rss.growthMb), bound: `<= ${RSS_GROWTH_BOUND_MB} MB` },
    { name: 'boundary CPU, baseline / hostile', value: `${report.cpu.baselinePercent.toFixed(0)} % / ${report.cpu.hostilePercent.toFixed(0)} %`, bound: 'of one core' },
    { name: 'test process CPU, hostile', value: `${report.cpu.driverHostilePercent.toFixed(0)} %`, bound: 'load, origins, log parsing; same cores' },
  );
  for (const h of report.hostiles) {
    figures.push({ name: `hostile ${h.name}`, value: `${h.refused}/${h.attempts} as expected`, bound: `${h.expected}${h.note === '' ? '' : `; ${h.note}`}` });
  }
  figures.push({
    name: 'SIGTERM exit',
    value: `code ${report.exit.code ?? report.exit.signal} in ${ms(report.exit.ms)}`,
    bound: `code 0 within ${report.exit.deadlineMs} ms`,
  });
  return figures;
}

export function formatReport(report: SoakReport): string {
  const rssSeries = report.rss.samples.map((s) => `${(s.atMs / 1_000).toFixed(0)}s:${s.rssMb.toFixed(0)}`).join(' ');
  const unexpected = report.hostiles.flatMap((h) => h.unexpected.map((u) => `  ${h.name}: ${u}`));
  const failures = [...report.baseline.failures, ...report.hostile.failures].map((f) => `  ${f}`);
  const events = Object.entries(report.events)
    .map(([key, n]) => `  ${n} ${key}`)
    .join('\n');
  return [
    formatFigures(reportFigures(report)),
    `RSS MB over time: ${rssSeries}`,
    ...(failures.length > 0 ? ['allowed requests that failed:', ...failures] : []),
    ...(unexpected.length > 0 ? ['hostile outcomes not as expected:', ...unexpected] : []),
    `boundary audit events:\n${events}`,
    ...(report.plainLogs.length > 0 ? ['boundary log lines that are not audit events (samples):', ...report.plainLogs.map((l) => `  ${l}`)] : []),
    ...(report.exit.ms > SLOW_EXIT_MS || report.exit.code !== 0 ? ['boundary lines before its exit:', ...report.exit.lastLines.map((l) => `  ${l}`)] : []),
  ].join('\n');
}
