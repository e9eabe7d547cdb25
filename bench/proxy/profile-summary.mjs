// Summarises a V8 .cpuprofile (node --cpu-prof) of boundary under load: where the busy time goes, by function
// (self and inclusive time), by module file, and by area (decision, events/logging, headers, upstream client, node http,
// GC). Read-only; prints text.
// Usage: node profile-summary.mjs FILE.cpuprofile [--top 30] [--requests N] [--callers REGEX]
//   --requests N: requests served while profiling; adds µs per request to the area table.
//   --callers REGEX: also print the call chains of leaf functions whose name matches.

import { readFileSync } from 'node:fs';

const file = process.argv[2];
const argv = process.argv.slice(3);
const opt = (name, fallback) => {
  const i = argv.indexOf(name);
  return i < 0 ? fallback : argv[i + 1];
};
const TOP = Number(opt('--top', '30'));
const REQUESTS = Number(opt('--requests', '0'));
const profile = JSON.parse(readFileSync(file, 'utf8'));

const byId = new Map();
const parent = new Map();
for (const n of profile.nodes) byId.set(n.id, n);
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// boundary's own compiled files, wherever the build sits (dist/, bench/out/build-<sha>/dist/, a patched copy).
const BOUNDARY_FILE = /\/((?:proxy|telemetry|policy|net|dns|cli|credentials|control|pki|supervisor)\/[^/]+\.js|(?:main|boundary|config|errors)\.js)$/;
function shortUrl(url) {
  if (!url) return '';
  const path = url.replace(/^file:\/\//, '');
  if (path.includes('/node_modules/')) return path.replace(/^.*\/node_modules\//, 'nm:');
  const own = BOUNDARY_FILE.exec(path);
  return own === null ? path : `dist/${own[1]}`;
}
function keyOf(n) {
  const f = n.callFrame;
  const name = f.functionName || '(anonymous)';
  const url = shortUrl(f.url);
  return url ? `${name} ${url}:${f.lineNumber + 1}` : name;
}
function fileOf(n) {
  const url = shortUrl(n.callFrame.url);
  if (url) return url;
  return n.callFrame.functionName.startsWith('(') ? n.callFrame.functionName : '(native)';
}

// Each sample gets one area: the innermost boundary (dist/) or library (node_modules) frame on its stack names
// it, so node internals and native code count for whoever called them (writev under sonic-boom is logging,
// an AbortSignal made by forward.ts is proxy/ work); samples with no such frame are classed by their leaf.
// Time in the upstream HTTP/1.1 client (h1-*.js) counts as its own area, not as forward.ts.
const AREAS = [
  ['idle', (n) => n.callFrame.functionName === '(idle)'],
  ['gc', (n) => n.callFrame.functionName === '(garbage collector)'],
  ['logging: pino/sonic-boom', (n) => /nm:(pino|sonic-boom|fast-redact|quick-format|on-exit)/.test(fileOf(n))],
  ['upstream client: h1-client/h1-response/h1-request', (n) => /dist\/proxy\/h1-/.test(fileOf(n))],
  ['prom-client metrics', (n) => fileOf(n).startsWith('nm:prom-client')],
  ['events: ocsf/shorthand/audit', (n) => /dist\/(telemetry\/(ocsf|audit|metrics)|proxy\/events)\.js/.test(fileOf(n))],
  ['decision: policy/', (n) => fileOf(n).startsWith('dist/policy/')],
  ['destination: net/ + dns/ (resolve, SSRF)', (n) => /dist\/(net|dns)\//.test(fileOf(n))],
  ['headers/framing/path/target', (n) => /dist\/proxy\/(headers|framing|path|target)\.js/.test(fileOf(n))],
  ['proxy/ other (l7, forward, server, deny...)', (n) => fileOf(n).startsWith('dist/proxy/')],
  ['other dist/', (n) => fileOf(n).startsWith('dist/')],
  ['node http server/client', (n) => /^node:_http|^node:internal\/http|^node:http/.test(fileOf(n))],
  ['node net/streams', (n) => /^node:(net|stream|internal\/streams|internal\/stream_base_commons)/.test(fileOf(n))],
  ['other node internals', (n) => fileOf(n).startsWith('node:')],
  ['(program)/native', () => true],
];

function areaOf(n) {
  for (const [name, match] of AREAS) if (match(n)) return name;
  return '(program)/native';
}

const CALLERS = opt('--callers', undefined);
const callers = new Map();
const self = new Map();
const inclusive = new Map();
const files = new Map();
const areas = new Map();
let total = 0;
let busy = 0;
const { samples, timeDeltas } = profile;
for (let i = 0; i < samples.length; i++) {
  const dt = timeDeltas[i] ?? 0;
  const leaf = byId.get(samples[i]);
  if (leaf === undefined) continue;
  total += dt;
  const leafKey = keyOf(leaf);
  if (leaf.callFrame.functionName !== '(idle)') busy += dt;
  self.set(leafKey, (self.get(leafKey) ?? 0) + dt);
  if (CALLERS !== undefined && new RegExp(CALLERS).test(leafKey)) {
    const chain = [];
    for (let n = byId.get(parent.get(leaf.id)); n !== undefined && chain.length < 6; n = byId.get(parent.get(n.id))) chain.push(keyOf(n));
    const k = `${leafKey}\n      <- ${chain.join('\n      <- ')}`;
    callers.set(k, (callers.get(k) ?? 0) + dt);
  }
  const seen = new Set();
  const seenFiles = new Set();
  let area;
  for (let n = leaf; n !== undefined; n = byId.get(parent.get(n.id))) {
    const k = keyOf(n);
    if (!seen.has(k)) {
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + dt);
    }
    const f = fileOf(n);
    if (!seenFiles.has(f)) {
      seenFiles.add(f);
      files.set(f, (files.get(f) ?? 0) + dt);
    }
    if (area === undefined && /^(dist\/|nm:)/.test(fileOf(n))) area = areaOf(n);
  }
  area ??= areaOf(leaf);
  areas.set(area, (areas.get(area) ?? 0) + dt);
}

const ms = (us) => (us / 1000).toFixed(0).padStart(7);
const pct = (us) => `${((100 * us) / busy).toFixed(1).padStart(5)}%`;
const perReq = (us) => (REQUESTS > 0 ? `${(us / REQUESTS).toFixed(1).padStart(7)} µs/req` : '');
const top = (m, n, filter = () => true) =>
  [...m.entries()]
    .filter(([k]) => filter(k))
    .sort((a, b) => b[1] - a[1])
    .slice(0, n);

const out = [];
out.push(`profile ${file}`);
out.push(`sampled ${(total / 1e6).toFixed(1)} s, busy (not idle) ${(busy / 1e6).toFixed(1)} s; percentages are of busy time`);
out.push('');
out.push('by area (each sample counted once, in the innermost area on its stack):');
for (const [k, v] of top(areas, 50)) if (k !== 'idle') out.push(`  ${ms(v)} ms ${pct(v)} ${perReq(v)}  ${k}`);
out.push('');
out.push(`top ${TOP} functions by self time:`);
for (const [k, v] of top(self, TOP, (k) => k !== '(idle)')) out.push(`  ${ms(v)} ms ${pct(v)}  ${k}`);
out.push('');
out.push(`top ${TOP} boundary (dist/) functions by inclusive time:`);
for (const [k, v] of top(inclusive, TOP, (k) => k.includes(' dist/'))) out.push(`  ${ms(v)} ms ${pct(v)}  ${k}`);
out.push('');
out.push(`top ${TOP} module files by inclusive time:`);
for (const [k, v] of top(files, TOP, (k) => k !== '(root)' && k !== '(idle)')) out.push(`  ${ms(v)} ms ${pct(v)}  ${k}`);
if (CALLERS !== undefined) {
  out.push('');
  out.push(`callers of /${CALLERS}/ (self time, 6 frames up):`);
  for (const [k, v] of top(callers, 8)) out.push(`  ${ms(v)} ms ${pct(v)}  ${k}`);
}
process.stdout.write(`${out.join('\n')}\n`);
