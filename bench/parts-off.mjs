// bench/parts-off.mjs — a copy of a build with parts of boundary's per-request telemetry taken out, for the pair
// benches' BOUNDARY_REF or BOUNDARY_DIST: what each part costs end to end is the pair's ratio against the build as it
// is. Never a product option: the patch is made on the compiled copy only, and fails unless each place it edits is
// found exactly once.
//
// Usage: node bench/parts-off.mjs <parts> [dist]     prints the copy's dist directory (bench/out/parts-off-<parts>/)
//   parts, comma-separated:
//     audit-line  events are built and handed to the audit sink as before; it writes no line for any of them
//     event       no decision event from any adapter: each outcome is still made and counted in the metrics
//     metrics     no-op recorders, no clock reads for histograms, no process metrics (io.metricsOff, as
//                 bench/proxy/boundary-metrics-off.mjs starts it)
//   e.g. BOUNDARY_REF=$(node bench/parts-off.mjs event) bench/h2-pair.sh
//        PAIR="boundary-ref codec-floor" BOUNDARY_REF=$(node bench/parts-off.mjs event,metrics) bench/h2-pair.sh
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** Per part: the compiled file, what it says, and what it says with the part out. */
const PATCHES = {
  'audit-line': { file: 'telemetry/audit.js', from: /writeOcsf\(event, time, uid, level\);/g, to: 'void 0;' },
  event: { file: 'chain/events.js', from: /^ {4}sink\.emit\(outcomeEvent\(o\)\);\n/gm, to: '' },
  metrics: { file: 'app/main.js', from: /^( +)now: Date\.now,\n/gm, to: '$&$1metricsOff: true,\n' },
};

const [list, distArg] = process.argv.slice(2);
const parts = (list ?? '').split(',').filter((p) => p !== '');
if (parts.length === 0 || parts.some((p) => !(p in PATCHES))) {
  process.stderr.write(`usage: node bench/parts-off.mjs <${Object.keys(PATCHES).join('|')}>[,...] [dist]\n`);
  process.exit(2);
}
const dist = resolve(distArg ?? join(root, 'dist'));
if (!existsSync(join(dist, 'app/main.js'))) throw new Error(`${dist} is not a build (no app/main.js)`);
const out = join(root, 'bench/out', `parts-off-${[...parts].sort().join('-')}`);
rmSync(out, { recursive: true, force: true });
cpSync(dist, join(out, 'dist'), { recursive: true });
// As bench/build-ref.sh's builds: the copy runs as ES modules whatever bench/out holds.
cpSync(join(root, 'package.json'), join(out, 'package.json'));
for (const part of parts) {
  const { file, from, to } = PATCHES[part];
  const path = join(out, 'dist', file);
  const text = readFileSync(path, 'utf8');
  const found = text.match(from)?.length ?? 0;
  if (found !== 1) throw new Error(`${part}: expected one match of ${from} in ${file}, found ${found}: the build changed; update this patch`);
  writeFileSync(path, text.replace(from, to));
}
process.stdout.write(`${join(out, 'dist')}\n`);
