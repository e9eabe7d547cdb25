// Report for bench/proxy.sh: reads the per-run records (NDJSON) and the run metadata, prints the median table
// with boundary's ratios and the issue's bars, and writes everything (raw runs included) to one JSON file.
//
// Usage: node report.mjs META.json RESULTS.ndjson OUT.json

import { readFileSync, writeFileSync } from 'node:fs';

const [metaFile, resultsFile, outFile] = process.argv.slice(2);
const meta = JSON.parse(readFileSync(metaFile, 'utf8'));
const runs = readFileSync(resultsFile, 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .map((l) => JSON.parse(l));

const CASE_LABEL = {
  http: 'HTTP GET, keep-alive (wrk)',
  'http-l7': 'HTTP GET, L7 rest endpoint (wrk)',
  'tls-new': 'CONNECT+TLS, new tunnel per request',
  'tls-reuse': 'CONNECT+TLS, reused tunnels',
  large: 'HTTP GET, large answer, no credential bound (wrk)',
  'large-cred': 'HTTP GET, large answer, credential bound: body scanned (wrk)',
};
const BOUNDARIES = ['boundary', 'boundary-l7', 'boundary-nometrics'];
const BASELINES = ['direct', 'node-floor', 'node-floor-raw', 'node-floor-llhttp', 'tinyproxy', 'squid'];

/** One run's record normalised to the same fields for wrk and the CONNECT client. */
function normalise(x) {
  const r = x.r;
  if (r.failed) return { ...x, ok: false };
  const wrk = r.duration_us !== undefined;
  const seconds = wrk ? r.duration_us / 1e6 : r.duration_s;
  const requests = r.requests;
  // wrk counts a connection the server closed after a response as a read error; tinyproxy closes every client
  // connection after one response (no keep-alive), so read errors are reported apart as `closed`.
  const bad = wrk ? r.status_errors + r.connect_errors + r.write_errors + r.timeouts : r.non2xx + r.errors;
  const closed = wrk ? r.read_errors : 0;
  return {
    case: x.case,
    proxy: x.proxy,
    run: x.run,
    ok: true,
    rps: requests / seconds,
    p50_ms: wrk ? r.p50_us / 1000 : r.p50_ms,
    p99_ms: wrk ? r.p99_us / 1000 : r.p99_ms,
    errors: bad,
    closed,
    requests,
    // Requests per CPU-second of the proxy: throughput per fully used core, robust to co-tenant noise.
    rps_per_core: x.server_cpu_s > 0 ? requests / x.server_cpu_s : null,
    server_cpu_pct: (100 * x.server_cpu_s) / x.seconds,
    server_cpu_us_per_req: requests > 0 ? (x.server_cpu_s * 1e6) / requests : null,
    origin_served_http: x.origin_served_http,
    client_cpu_pct: r.client_cpu_pct ?? (r.client_cpu_s !== undefined ? (100 * r.client_cpu_s) / seconds : null),
    // Host CPU used by anything other than this bench's own processes during the window (other users' tests,
    // the kernel's softirq work is included in the processes it ran for): a noise indicator, in % of one core.
    other_cpu_pct: otherCpu(x, r, seconds),
  };
}

function otherCpu(x, r, seconds) {
  if (x.host_busy_cpu_s === undefined) return null;
  const client = r.client_cpu_s ?? ((r.client_cpu_pct ?? 0) * seconds) / 100;
  const ours = x.proxy === 'direct' ? x.origin_cpu_s : x.server_cpu_s + x.origin_cpu_s;
  return Math.max(0, (100 * (x.host_busy_cpu_s - ours - client)) / (x.window_s ?? x.seconds));
}

function median(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const m = v.length >> 1;
  return v.length % 2 === 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

const normalised = runs.map(normalise);
const groups = new Map();
for (const r of normalised) {
  const key = `${r.case}\u0000${r.proxy}`;
  if (!groups.has(key)) groups.set(key, []);
  groups.get(key).push(r);
}

const rows = [];
for (const [key, list] of groups) {
  const [c, p] = key.split('\u0000');
  const good = list.filter((r) => r.ok);
  rows.push({
    case: c,
    proxy: p,
    runs: good.length,
    failed_runs: list.length - good.length,
    rps: median(good.map((r) => r.rps)),
    rps_min: good.length ? Math.min(...good.map((r) => r.rps)) : null,
    rps_max: good.length ? Math.max(...good.map((r) => r.rps)) : null,
    p50_ms: median(good.map((r) => r.p50_ms)),
    p99_ms: median(good.map((r) => r.p99_ms)),
    errors: good.reduce((a, r) => a + r.errors, 0),
    closed: good.reduce((a, r) => a + r.closed, 0),
    rps_per_core: median(good.map((r) => r.rps_per_core)),
    server_cpu_pct: median(good.map((r) => r.server_cpu_pct)),
    server_cpu_us_per_req: median(good.map((r) => r.server_cpu_us_per_req)),
    client_cpu_pct: median(good.map((r) => r.client_cpu_pct)),
    other_cpu_pct: median(good.map((r) => r.other_cpu_pct)),
  });
}
const find = (c, p) => rows.find((r) => r.case === c && r.proxy === p);

// Ratios: each boundary row against the baselines of the same case (for http-l7, the http baselines).
for (const row of rows) {
  if (!BOUNDARIES.includes(row.proxy)) continue;
  const baseCase = row.case === 'http-l7' ? 'http' : row.case === 'large-cred' ? 'large' : row.case;
  row.ratios = {};
  for (const b of BASELINES) {
    const base = find(baseCase, b);
    if (base?.rps && row.rps) row.ratios[`rps_vs_${b}`] = row.rps / base.rps;
    if (base?.p99_ms && row.p99_ms) row.ratios[`p99_vs_${b}`] = row.p99_ms / base.p99_ms;
    if (b !== 'direct' && base?.rps_per_core && row.rps_per_core) row.ratios[`per_core_vs_${b}`] = row.rps_per_core / base.rps_per_core;
  }
}

const fmt = (x, d = 0) => (x === null || x === undefined ? '-' : x.toFixed(d));
const ratio = (x) => (x === undefined ? '-' : `${x.toFixed(2)}x`);
const order = ['http', 'http-l7', 'tls-new', 'tls-reuse', 'large', 'large-cred'];
const proxyOrder = ['direct', 'boundary', 'boundary-nometrics', 'boundary-l7', 'node-floor', 'node-floor-raw', 'node-floor-llhttp', 'tinyproxy', 'squid'];
rows.sort((a, b) => order.indexOf(a.case) - order.indexOf(b.case) || proxyOrder.indexOf(a.proxy) - proxyOrder.indexOf(b.proxy));

const header = ['case', 'proxy', 'req/s', 'p50 ms', 'p99 ms', 'err', 'srv cpu%', 'cpu µs/req', 'client cpu%', 'noise cpu%', '/direct', '/node-floor', '/tinyproxy', '/squid', 'p99/squid', 'per-core /floor', 'per-core /floor-raw', 'per-core /floor-llhttp', 'per-core /tiny', 'per-core /squid'];
const table = [header];
for (const r of rows) {
  const q = r.ratios ?? {};
  table.push([
    CASE_LABEL[r.case] ?? r.case,
    r.proxy + (r.failed_runs ? ` (${r.failed_runs} failed)` : ''),
    fmt(r.rps),
    fmt(r.p50_ms, 2),
    fmt(r.p99_ms, 2),
    String(r.errors) + (r.closed ? ` (${r.closed} closed)` : ''),
    fmt(r.server_cpu_pct),
    fmt(r.server_cpu_us_per_req, 1),
    fmt(r.client_cpu_pct),
    fmt(r.other_cpu_pct),
    ratio(q.rps_vs_direct),
    ratio(q['rps_vs_node-floor']),
    ratio(q.rps_vs_tinyproxy),
    ratio(q.rps_vs_squid),
    ratio(q.p99_vs_squid),
    ratio(q['per_core_vs_node-floor']),
    ratio(q['per_core_vs_node-floor-raw']),
    ratio(q['per_core_vs_node-floor-llhttp']),
    ratio(q.per_core_vs_tinyproxy),
    ratio(q.per_core_vs_squid),
  ]);
}
const widths = header.map((_, i) => Math.max(...table.map((row) => row[i].length)));
const line = (row) => row.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ');
const out = [];
out.push('');
out.push(
  `boundary proxy benchmark ${meta.stamp} — medians of ${meta.runs} runs × ${meta.duration_s}s (warm-up ${meta.warmup_s}s); ` +
    `wrk -t${meta.wrk_threads} -c${meta.conns}; CONNECT client concurrency ${meta.concurrency}`,
);
out.push(
  `cpus=${meta.cpus} pinned=${meta.pinned === '1' ? `yes (load ${meta.load_cpus}, origin ${meta.origin_cpus}, proxy ${meta.proxy_cpus})` : 'no'}; ` +
    `node ${meta.node}; ${meta.squid}; tinyproxy ${meta.tinyproxy}; boundary ${meta.boundary_commit}${meta.boundary_dist && !meta.boundary_dist.endsWith('/dist') ? ` from ${meta.boundary_dist}` : ''}${meta.profile === '1' ? ' (UNDER --cpu-prof)' : ''}`,
);
out.push('srv cpu% / cpu µs/req: CPU used by the proxy process (direct rows: the origin) in the measured window, % of one core.');
out.push('client cpu%: the load generator (wrk or connect-load); noise cpu%: host CPU used by processes outside this bench.');
out.push('err: non-2xx, timeouts, connect/write errors summed over runs; (N closed): connections the proxy closed after a');
out.push('response (tinyproxy has no client keep-alive). per-core: req/s per proxy CPU-second, ratio of boundary to the other.');
out.push('node-floor(-raw): bare node:http forward proxies (bench/proxy/bare-forward.mjs; -raw: raw sockets upstream): no policy, events or metrics;');
out.push('node-floor-llhttp: the same with raw sockets upstream and llhttp on the workload sockets instead of node:http\'s server.');
out.push('');
out.push(line(header));
out.push(widths.map((w) => '-'.repeat(w)).join('  '));
for (const row of table.slice(1)) out.push(line(row));
out.push('');
for (const p of ['boundary', 'tinyproxy', 'squid']) {
  const state = meta[`state_${p}`];
  if (state !== 'ok' && state !== 'not requested') out.push(`NOT MEASURED — ${state}`);
}

// The issue's bars, for boundary's forward proxy (http case).
const b = find('http', 'boundary');
const bars = [];
if (b?.ratios) {
  const q = b.ratios;
  const bar = (name, value, want, pass) => bars.push({ name, value, want, pass });
  if (q.rps_vs_tinyproxy !== undefined) bar('req/s vs tinyproxy', q.rps_vs_tinyproxy, '>= 2.0x', q.rps_vs_tinyproxy >= 2);
  if (q.rps_vs_squid !== undefined) {
    bar('req/s vs squid', q.rps_vs_squid, '>= 0.9x', q.rps_vs_squid >= 0.9);
    bar('req/s vs squid (stretch)', q.rps_vs_squid, '>= 1.0x', q.rps_vs_squid >= 1);
    bar('req/s vs squid (issue 33)', q.rps_vs_squid, '>= 1.5x', q.rps_vs_squid >= 1.5);
  }
  if (q.p99_vs_squid !== undefined) bar('p99 vs squid', q.p99_vs_squid, '<= 2.0x', q.p99_vs_squid <= 2);
  if (q.per_core_vs_squid !== undefined) bar('(noise-robust) req per CPU-second vs squid', q.per_core_vs_squid, '>= 0.9x', q.per_core_vs_squid >= 0.9);
  for (const [name, label] of [['node-floor', 'bare node:http proxy'], ['node-floor-raw', 'node:http server, raw upstream'], ['node-floor-llhttp', 'llhttp server, raw upstream']]) {
    const floor = q[`per_core_vs_${name}`];
    if (floor !== undefined) bar(`req per CPU-second vs the Node floor (${label})`, floor, '>= 0.83x (within 1.2x)', floor >= 1 / 1.2);
  }
  out.push('bars (boundary forward HTTP, policy + audit events on):');
  for (const x of bars) out.push(`  ${x.pass ? 'PASS' : 'MISS'}  ${x.name}: ${x.value.toFixed(2)}x (want ${x.want})`);
}
// Metrics on against off: the same build in two processes, measured in the same interleaved rounds.
const on = find('http', 'boundary');
const off = find('http', 'boundary-nometrics');
if (on?.rps && off?.rps) {
  const perRound = [];
  for (const a of normalised.filter((r) => r.ok && r.case === 'http' && r.proxy === 'boundary')) {
    const z = normalised.find((r) => r.ok && r.case === 'http' && r.proxy === 'boundary-nometrics' && r.run === a.run);
    if (z?.rps) perRound.push(a.rps / z.rps);
  }
  const value = on.rps / off.rps;
  const paired = median(perRound);
  bars.push({ name: 'metrics on / off req/s', value, want: '>= 0.95x', pass: value >= 0.95 });
  out.push(
    `metrics on / off (forward HTTP, medians): ${on.rps.toFixed(0)} / ${off.rps.toFixed(0)} req/s = ${value.toFixed(3)}x ` +
      `(want >= 0.95x: ${value >= 0.95 ? 'PASS' : 'MISS'}); median of per-round ratios ${fmt(paired, 3)}x ` +
      `(${perRound.map((x) => x.toFixed(3)).join(' ')}); ` +
      `cpu µs/req ${fmt(on.server_cpu_us_per_req, 1)} / ${fmt(off.server_cpu_us_per_req, 1)}`,
  );
}
for (const k of ['boundary', 'boundary_l7', 'tinyproxy', 'squid']) {
  if (meta[`check_${k}`]) out.push(`check ${k.replace('_', '-')}: ${meta[`check_${k}`]}`);
}
process.stdout.write(`${out.join('\n')}\n`);
writeFileSync(outFile, `${JSON.stringify({ meta, rows, bars, runs: normalised, raw: runs }, null, 2)}\n`);
