// Driver of bench/bundle.sh: idle memory of several builds of boundary, interleaved. Each round starts every build
// once, one after the other in a rotating order, as `node <dist>/app/main.js run --policy policies/default.yaml` on
// loopback, and reads /proc/<pid>/status (VmRSS, RssAnon, RssFile) and the admin /metrics (heap in use) at each of
// SAMPLE_AT_S seconds after the spawn. Prints medians and ranges per build and time; writes the samples as JSON.

import { spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';

const ROOT = process.env.ROOT ?? process.cwd();
const WORK = process.env.WORK ?? '/tmp/boundary-bundle';
const ROUNDS = Number(process.env.ROUNDS ?? '5');
/** name=dist pairs, space-separated: the first is the baseline the others are compared with. */
const BUILDS = (process.env.BUILDS ?? `dist=${join(ROOT, 'dist')}`).split(/\s+/).filter(Boolean).map((pair) => {
  const cut = pair.indexOf('=');
  return { name: pair.slice(0, cut), dist: pair.slice(cut + 1) };
});
const POLICY = process.env.POLICY ?? join(ROOT, 'policies', 'default.yaml');
// Issue 33 reads idle RSS 15 s after start. V8's memory reducer runs about 8 s after start-up allocation stops, so a
// start slowed down by load may not have been compacted by then; the later reading is after it in any case.
const SAMPLE_AT_S = (process.env.SAMPLE_AT_S ?? '18 45').split(/\s+/).filter(Boolean).map(Number);
const OUT_FILE = process.env.OUT_FILE ?? join(ROOT, 'bench', 'out', 'bundle.json');
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

const log = (msg) => process.stderr.write(`[bundle ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const delay = (ms) => new Promise((done) => setTimeout(done, ms));
const mib = (kb) => (kb / 1024).toFixed(1);

function status(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { rssKb: kb('VmRSS'), anonKb: kb('RssAnon'), fileKb: kb('RssFile') };
}

function freePort() {
  return new Promise((done) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => done(port));
    });
  });
}

async function heapUsedKb(admin) {
  const text = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
  return Math.round(Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? Number.NaN) / 1024);
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** One start of one build: its memory at each of SAMPLE_AT_S after the spawn. */
async function sample(build, round) {
  const dir = join(WORK, `${build.name}-${round}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'state'), { recursive: true });
  const [proxy, admin, dns] = [await freePort(), await freePort(), await freePort()];
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, [join(build.dist, 'app', 'main.js'), 'run', '--policy', POLICY, '--proxy-listen', `127.0.0.1:${proxy}`,
    '--admin-listen', `127.0.0.1:${admin}`, '--dns-listen', `127.0.0.1:${dns}`, '--state-dir', join(dir, 'state'), '--log-format', 'json'],
    { cwd: ROOT, stdio: ['ignore', openSync(join(dir, 'out.log'), 'w'), openSync(join(dir, 'err.log'), 'w')] });
  try {
    let readyMs;
    while (readyMs === undefined) {
      if (child.exitCode !== null) throw new Error(`${build.name} exited ${child.exitCode}: ${readFileSync(join(dir, 'err.log'), 'utf8').slice(-400)}`);
      if (await fetch(`http://127.0.0.1:${admin}/readyz`).then((r) => r.ok, () => false)) readyMs = Date.now() - spawnedAt;
      else if (Date.now() - spawnedAt > READY_TIMEOUT_MS) throw new Error(`${build.name} not ready`);
      else await delay(100);
    }
    const taken = [];
    for (const at of SAMPLE_AT_S) {
      await delay(spawnedAt + at * 1000 - Date.now());
      const s = { build: build.name, round, at, readyMs, ...status(child.pid), heapUsedKb: await heapUsedKb(admin) };
      log(`round ${round} ${build.name} at ${at} s: VmRSS ${s.rssKb} KB (anon ${s.anonKb}, file ${s.fileKb}), heap used ${s.heapUsedKb} KB, ready in ${readyMs} ms`);
      taken.push(s);
    }
    return taken;
  } finally {
    await stop(child);
  }
}

const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};

mkdirSync(WORK, { recursive: true });
log(`${ROUNDS} round(s) of ${BUILDS.map((b) => b.name).join(', ')}; sampled ${SAMPLE_AT_S.join(' and ')} s after start; MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? '(unset)'}`);
const samples = [];
for (let round = 1; round <= ROUNDS; round++) {
  // Rotate the order, so no build always follows the same one.
  const order = BUILDS.map((_, i) => BUILDS[(i + round - 1) % BUILDS.length]);
  for (const build of order) samples.push(...(await sample(build, round)));
}

const keys = [['rssKb', 'VmRSS'], ['anonKb', 'RssAnon'], ['fileKb', 'RssFile'], ['heapUsedKb', 'heap used']];
const base = BUILDS[0].name;
const summary = {};
for (const at of SAMPLE_AT_S) {
  summary[at] = {};
  const pick = (name, round) => samples.find((s) => s.build === name && s.round === round && s.at === at);
  for (const build of BUILDS) {
    const mine = samples.filter((s) => s.build === build.name && s.at === at);
    const row = Object.fromEntries(keys.map(([k]) => [k, { median: median(mine.map((s) => s[k])), min: Math.min(...mine.map((s) => s[k])), max: Math.max(...mine.map((s) => s[k])) }]));
    row.readyMs = median(mine.map((s) => s.readyMs));
    // Each build against the baseline of the same round: the median of those differences.
    if (build.name !== base) {
      const rounds = Array.from({ length: ROUNDS }, (_, i) => i + 1);
      row.vsBaseKb = Object.fromEntries(keys.map(([k]) => [k, median(rounds.map((r) => pick(build.name, r)[k] - pick(base, r)[k]))]));
    }
    summary[at][build.name] = row;
  }
}
mkdirSync(join(OUT_FILE, '..'), { recursive: true });
writeFileSync(OUT_FILE, `${JSON.stringify({ meta: { rounds: ROUNDS, sampleAtS: SAMPLE_AT_S, policy: POLICY, node: process.version, mallocArenaMax: process.env.MALLOC_ARENA_MAX, builds: BUILDS }, summary, samples }, null, 2)}\n`);

const pad = (s, n) => String(s).padEnd(n);
for (const at of SAMPLE_AT_S) {
  process.stdout.write(`idle memory ${at} s after start, MiB: median [min-max] of ${ROUNDS}; Δ = median of per-round differences to ${base}\n`);
  process.stdout.write(`${pad('build', 8)}${keys.map(([, label]) => pad(label, 26)).join('')}ready ms\n`);
  for (const build of BUILDS) {
    const s = summary[at][build.name];
    const cell = (k) => `${mib(s[k].median)} [${mib(s[k].min)}-${mib(s[k].max)}]${s.vsBaseKb ? ` Δ${mib(s.vsBaseKb[k])}` : ''}`;
    process.stdout.write(`${pad(build.name, 8)}${keys.map(([k]) => pad(cell(k), 26)).join('')}${s.readyMs}\n`);
  }
}
process.stdout.write(`raw samples: ${OUT_FILE}\n`);
