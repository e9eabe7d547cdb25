// bench/proxy.sh only: `boundary run` from a given build with metrics off (no-op recorders, nothing registered,
// no clock reads for histograms), so the metrics-on and metrics-off rows measure the same code.
// Usage: node boundary-metrics-off.mjs DIST_DIR run [run options]   (builds its CliIo as src/app/main.ts does)
// BOUNDARY_BENCH_METRICS=on starts the same entry with metrics on: bench/proxy.sh does that for the `boundary` row
// whenever boundary-nometrics is measured, because an A/A run (both rows with metrics on, one through main.js and
// one through this file) differed by 5-20 % on this host, more than the cost under test.

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dist, command, ...rest] = process.argv.slice(2);
if (dist === undefined || command !== 'run') {
  process.stderr.write('usage: boundary-metrics-off.mjs DIST_DIR run [options]\n');
  process.exit(2);
}
import { existsSync } from 'node:fs';
const runModule = existsSync(resolve(dist, 'app/cli/run.js')) ? 'app/cli/run.js' : 'cli/run.js';
const { runCommand } = await import(pathToFileURL(resolve(dist, runModule)).href);
const controller = new AbortController();
process.once('SIGTERM', () => controller.abort());
process.once('SIGINT', () => controller.abort());
const io = {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
  signal: controller.signal,
  now: Date.now,
  metricsOff: process.env.BOUNDARY_BENCH_METRICS !== 'on',
};
process.exitCode = await runCommand(rest, io);
