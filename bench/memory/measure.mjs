// Driver of bench/memory.sh: starts a real `node dist/app/main.js run` on loopback and reads its memory from
// /proc/<pid>/status (VmRSS, RssAnon, RssFile) and its admin /metrics (heap). Phases: idle after start, N idle
// CONNECT tunnels, N inspected keep-alive connections (CONNECT + TLS + one request), M live DNS mappings.
// Each phase gets a fresh boundary; the delta over its own idle sample is divided by the count. Clients and
// origin run in their own processes (clients.mjs, origin.mjs). Once settled, an idle boundary (and each floor and
// peer) is also watched for IDLE_CPU_MS: its threads' CPU and how often they woke. boundary's stdout is a pipe this
// process drains, as a container runtime does. Each idle process (boundary, floor, peer) runs beside a second,
// unmeasured copy of itself, as sidecars of one image do on a node: its private pages (Private_Clean +
// Private_Dirty in /proc/<pid>/smaps_rollup) are what it holds on its own, the pages of its binary and libraries
// being shared. Run as root, the measured idle boundary also gets a memory cgroup of its own, as a pod's container
// does, and what the kernel charges to it is read. Prints a table of medians; writes JSON.

import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const env = (name, fallback) => process.env[name] || fallback;
const ROOT = env('ROOT', process.cwd());
const HERE = join(ROOT, 'bench', 'memory');
const WORK = env('WORK', '/tmp/boundary-memory');
const RUNS = Number(env('RUNS', '3'));
const COUNT = Number(env('COUNT', '10000'));
// The synthetic window of the default /15 pool is 512 addresses per epoch (src/net/synthetic.ts).
const DNS_COUNT = Number(env('DNS_COUNT', '500'));
const PHASES = env('PHASES', 'idle tunnel inspected dns closed').split(/\s+/).filter(Boolean);
const DIST = env('BOUNDARY_DIST', join(ROOT, 'dist'));
const NODE_FLAGS = env('BOUNDARY_NODE_FLAGS', '').split(/\s+/).filter(Boolean);
const OUT_FILE = env('OUT_FILE', join(ROOT, 'bench', 'out', `memory-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}Z.json`));
const ORIGIN_HOST = 'origin.bench.test';
const DNS_SUFFIX = 'dns.bench.test';
// Settled: two samples SETTLE_INTERVAL_MS apart within SETTLE_TOLERANCE_KB; at most SETTLE_MAX_SAMPLES tries.
const SETTLE_INTERVAL_MS = 1_000;
const SETTLE_TOLERANCE_KB = 128;
const SETTLE_MAX_SAMPLES = 30;
// V8's memory reducer runs a compacting GC about 8-10 s after allocation stops; before it, "settled" RSS still
// holds start-up garbage (measured: VmRSS 65,968 KB at 3-8 s, 61,828 KB from 12 s). Samples start after this.
const SETTLE_MIN_WAIT_MS = Number(env('SETTLE_MIN_WAIT_MS', '15000'));
const READY_TIMEOUT_MS = 30_000;
const IDLE_CPU_MS = Number(env('IDLE_CPU_MS', '20000'));
/** Peers started idle beside the floors: lines of `name<TAB>command<TAB>arg...` (bench/memory.sh writes them). */
const PEERS = env('PEER_COMMANDS', '').split('\n').filter(Boolean).map((line) => line.split('\t'));
/** Each peer's neighbour, a second copy with its own port and files: lines in PEER_COMMANDS's form, same names. */
const PEER_NEIGHBOURS = new Map(env('PEER_NEIGHBOURS', '').split('\n').filter(Boolean).map((line) => {
  const [name, ...command] = line.split('\t');
  return [name, command];
}));
const CLIENTS_TIMEOUT_MS = 600_000;

const log = (msg) => process.stderr.write(`[memory ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A `Key:   N kB` line's number from a /proc file's text; NaN when absent. */
const procKb = (text, key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);

function status(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { rssKb: procKb(text, 'VmRSS'), anonKb: procKb(text, 'RssAnon'), fileKb: procKb(text, 'RssFile') };
}

/** Pages only `pid` holds (KB), and its proportional share of all it maps; NaN where smaps_rollup is not readable. */
function ownPages(pid) {
  let text = '';
  try {
    text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  } catch {
    // Another user's process read by a non-root bench.
  }
  return { privateKb: procKb(text, 'Private_Clean') + procKb(text, 'Private_Dirty'), pssKb: procKb(text, 'Pss') };
}

/**
 * A memory cgroup of its own under this process's, as a pod's container gets one: what the kernel charges to it is
 * what Kubernetes reads (container_memory_working_set_bytes: usage less inactive file pages). cgroup v1's memory
 * controller, or v2 where this process's cgroup already delegates memory to its children; undefined otherwise
 * (not root, no such controller), and the figure is not printed.
 */
function makeMemoryCgroup(tag) {
  const lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  const v1 = lines.find((l) => l.split(':')[1]?.split(',').includes('memory'));
  const base = v1 !== undefined ? join('/sys/fs/cgroup/memory', v1.split(':')[2]) : join('/sys/fs/cgroup', lines.find((l) => l.startsWith('0::'))?.slice(3) ?? '/');
  const dir = join(base, `boundary-memory-${process.pid}-${tag}`);
  try {
    if (v1 === undefined && !readFileSync(join(base, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('memory')) return undefined;
    mkdirSync(dir);
    return { dir, v1: v1 !== undefined };
  } catch {
    return undefined;
  }
}

/** What the kernel charges to `cg` (KB), and the working set Kubernetes reports from it. */
function cgroupCharge(cg) {
  const usage = Number(readFileSync(join(cg.dir, cg.v1 ? 'memory.usage_in_bytes' : 'memory.current'), 'utf8'));
  const stat = readFileSync(join(cg.dir, 'memory.stat'), 'utf8');
  const inactiveFile = Number(new RegExp(`^${cg.v1 ? 'total_inactive_file' : 'inactive_file'} (\\d+)`, 'm').exec(stat)?.[1] ?? Number.NaN);
  return { cgroupKb: usage / 1024, workingSetKb: (usage - inactiveFile) / 1024 };
}

function removeMemoryCgroup(cg) {
  if (cg === undefined) return;
  try {
    rmdirSync(cg.dir);
  } catch (err) {
    log(`could not remove ${cg.dir}: ${err.message}`);
  }
}

async function settle(pid, minWaitMs = SETTLE_MIN_WAIT_MS) {
  await delay(minWaitMs);
  let prev = status(pid);
  for (let i = 1; i < SETTLE_MAX_SAMPLES; i++) {
    await delay(SETTLE_INTERVAL_MS);
    const cur = status(pid);
    if (Math.abs(cur.rssKb - prev.rssKb) <= SETTLE_TOLERANCE_KB) return { ...cur, settled: true, samples: i + 1 };
    prev = cur;
  }
  return { ...prev, settled: false, samples: SETTLE_MAX_SAMPLES };
}

/** CPU time (ns, schedstat) and voluntary context switches of each of `pid`'s threads, by thread id. */
function taskStats(pid) {
  const stats = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      const wakeups = Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1]);
      stats.set(tid, { ns, wakeups });
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return stats;
}

/** What an idle process costs over IDLE_CPU_MS: CPU ms per second and wakeups per second, its threads summed (those
 *  alive at both readings), and its main thread's wakeups alone. */
async function idleCpu(pid) {
  const before = taskStats(pid);
  await delay(IDLE_CPU_MS);
  const after = taskStats(pid);
  let ns = 0;
  let wakeups = 0;
  for (const [tid, end] of after) {
    const start = before.get(tid);
    if (start === undefined) continue;
    ns += end.ns - start.ns;
    wakeups += end.wakeups - start.wakeups;
  }
  const seconds = IDLE_CPU_MS / 1000;
  const main = String(pid);
  const mainWakeups = (after.get(main)?.wakeups ?? Number.NaN) - (before.get(main)?.wakeups ?? Number.NaN);
  return { idleCpuMsPerS: ns / 1e6 / seconds, idleWakeupsPerS: wakeups / seconds, idleMainWakeupsPerS: mainWakeups / seconds };
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Spawns a node process and resolves with it and its first stdout line (JSON). */
function spawnWithLine(args, options = {}) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], ...options });
  const lines = createInterface({ input: child.stdout });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args[0]}: no output`)), CLIENTS_TIMEOUT_MS);
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve({ child, line: JSON.parse(line) });
    });
    child.once('exit', (code) => reject(new Error(`${args[0]} exited ${code}`)));
  });
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

async function metrics(adminPort) {
  const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`);
  const text = await res.text();
  const pick = (name) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    heapUsedKb: Math.round(pick('nodejs_heap_size_used_bytes') / 1024),
    heapTotalKb: Math.round(pick('nodejs_heap_size_total_bytes') / 1024),
    externalKb: Math.round(pick('nodejs_external_memory_bytes') / 1024),
  };
}

function makeCerts(dir) {
  mkdirSync(dir, { recursive: true });
  const ossl = (...a) => execFileSync('openssl', a, { cwd: dir, stdio: ['ignore', 'ignore', 'ignore'] });
  ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2',
    '-subj', '/CN=boundary memory bench CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  ossl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'origin.key', '-out', 'origin.csr', '-subj', `/CN=${ORIGIN_HOST}`);
  writeFileSync(join(dir, 'origin.ext'), `subjectAltName=DNS:${ORIGIN_HOST}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
  ossl('x509', '-req', '-in', 'origin.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'origin.ext', '-out', 'origin.pem');
}

/** The CLI entry of a build: dist/app/main.js, or dist/main.js in builds from before src/app/ (BOUNDARY_REF). */
function entryOf(dist) {
  return existsSync(join(dist, 'app', 'main.js')) ? join(dist, 'app', 'main.js') : join(dist, 'main.js');
}

async function startBoundary(ports, tag, cgroup = undefined) {
  const dir = join(WORK, `boundary-${tag}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'state'), { recursive: true });
  const [proxy, admin, dns] = [await freePort(), await freePort(), await freePort()];
  const args = [...NODE_FLAGS, entryOf(DIST), 'run', '--policy', join(WORK, 'policy.yaml'), '--proxy-listen', `127.0.0.1:${proxy}`,
    '--admin-listen', `127.0.0.1:${admin}`, '--dns-listen', `127.0.0.1:${dns}`, '--hosts', join(WORK, 'hosts'), '--upstream-dns', `127.0.0.1:${ports.dns}`,
    '--upstream-ca', join(WORK, 'pki', 'ca.pem'), '--unsafe-allow-loopback-upstream', '--state-dir', join(dir, 'state'), '--log-format', 'json',
    '--max-connections', String(Math.max(4096, 4 * COUNT))];
  const { openSync } = await import('node:fs');
  const stdio = ['ignore', 'pipe', openSync(join(dir, 'err.log'), 'w')];
  // In a cgroup: the shell joins it and becomes node, so every page node touches is charged there from the start.
  const child = cgroup === undefined
    ? spawn(process.execPath, args, { cwd: ROOT, stdio })
    : spawn('/bin/sh', ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup.dir, process.execPath, ...args], { cwd: ROOT, stdio });
  child.stdout.resume();
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`boundary exited ${child.exitCode}: ${readFileSync(join(dir, 'err.log'), 'utf8').slice(-400)}`);
    try {
      if ((await fetch(`http://127.0.0.1:${admin}/healthz`)).ok) break;
    } catch {}
    if (Date.now() > deadline) {
      await stop(child);
      throw new Error('boundary not ready');
    }
    await delay(100);
  }
  return { child, proxy, admin, dns, dir };
}

/** A floor or a peer, idle beside its neighbour (same command, or `neighbour`): settled RSS, own pages, idle CPU. */
async function idleProcess(command, args, neighbour = [command, ...args]) {
  const [neighbourCommand, ...neighbourArgs] = neighbour;
  const second = spawn(neighbourCommand, neighbourArgs, { stdio: 'ignore' });
  second.once('error', () => {});
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = `${stderr}${chunk}`.slice(-400);
  });
  const failed = new Promise((_, reject) => child.once('error', reject));
  try {
    await Promise.race([delay(500), failed]);
    if (child.exitCode !== null) throw new Error(`${command} exited ${child.exitCode}: ${stderr.trim()}`);
    const settled = await settle(child.pid);
    // Without its neighbour, a process's own pages would include its binary's: not read then.
    const own = second.exitCode === null ? ownPages(child.pid) : {};
    return { ...settled, ...own, ...(await idleCpu(child.pid)) };
  } finally {
    await Promise.all([stop(child), stop(second)]);
  }
}

const floor = (code) => idleProcess(process.execPath, ['-e', code]);

const median = (xs) => {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return v.length === 0 ? Number.NaN : v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};

/**
 * One exact endpoint per DNS name: a wildcard would meet the per-endpoint mapping share and the new-name limit
 * (docs/dns.md#synthetic-pools, #rate-limits), which exist to stop one workload from doing what this bench does.
 */
function dnsEndpoints() {
  return Array.from({ length: DNS_COUNT }, (_, i) => `      - host: n${i}.${DNS_SUFFIX}\n        port: 443`).join('\n');
}

// ------------------------------------------------------------------------------------------------ setup
rmSync(WORK, { recursive: true, force: true });
mkdirSync(WORK, { recursive: true });
makeCerts(join(WORK, 'pki'));
const origin = await spawnWithLine([join(HERE, 'origin.mjs'), '--cert', join(WORK, 'pki', 'origin.pem'), '--key', join(WORK, 'pki', 'origin.key')], { cwd: ROOT });
const ports = origin.line;
writeFileSync(join(WORK, 'hosts'), `127.0.0.1 ${ORIGIN_HOST}\n`);
writeFileSync(join(WORK, 'policy.yaml'), `version: 1
network_policies:
  bench:
    name: bench
    endpoints:
      - host: ${ORIGIN_HOST}
        port: ${ports.tcp}
      - host: ${ORIGIN_HOST}
        port: ${ports.https}
        protocol: rest
        enforcement: enforce
        access: full
${dnsEndpoints()}
    binaries:
      - path: "/**"
`);

const results = { floors: {}, peers: {}, runs: [] };
log(`work dir ${WORK}; ${RUNS} run(s) of ${PHASES.join(', ')}; ${COUNT} connections, ${DNS_COUNT} names; node flags '${NODE_FLAGS.join(' ')}'`);
try {
  const peers = PEERS.map(([name, command, ...args]) => idleProcess(command, args, PEER_NEIGHBOURS.get(name)).then((r) => {
    results.peers[name] = r;
  }, (err) => log(`peer ${name}: ${err.message}`)));
  [results.floors.node, results.floors.nodeNetTlsHttp] = await Promise.all([
    floor('setInterval(() => {}, 1000)'),
    floor("require('node:net'); require('node:tls'); require('node:http'); require('node:crypto'); setInterval(() => {}, 1000)"),
  ]);
  await Promise.all(peers);
  log(`floor: node ${results.floors.node.rssKb} KB, + net/tls/http ${results.floors.nodeNetTlsHttp.rssKb} KB`);
  for (let run = 1; run <= RUNS; run++) {
    for (const phase of PHASES) {
      const neighbour = phase === 'idle' ? await startBoundary(ports, `${run}-neighbour`) : undefined;
      const cgroup = phase === 'idle' ? makeMemoryCgroup(run) : undefined;
      const b = await startBoundary(ports, `${run}-${phase}`, cgroup).catch(async (err) => {
        if (neighbour !== undefined) await stop(neighbour.child);
        removeMemoryCgroup(cgroup);
        throw err;
      });
      try {
        // Two readings: the first 1-s agreement after start (what a quick look sees), then after the memory reducer.
        const early = await settle(b.child.pid, 0);
        const settled = await settle(b.child.pid);
        // Its own pages as it settled, before the scrape below allocates; only beside a live neighbour, as idleProcess.
        const own = neighbour?.child.exitCode === null ? { ...ownPages(b.child.pid), ...(cgroup && cgroupCharge(cgroup)) } : {};
        const idle = { ...settled, ...own, ...(await metrics(b.admin)) };
        if (phase === 'idle') Object.assign(idle, await idleCpu(b.child.pid));
        const rec = { run, phase, early, idle };
        if (phase !== 'idle') {
          const n = phase === 'dns' ? DNS_COUNT : COUNT;
          const target = phase === 'tunnel' || phase === 'closed' ? `${ORIGIN_HOST}:${ports.tcp}` : `${ORIGIN_HOST}:${ports.https}`;
          const clients = await spawnWithLine([join(HERE, 'clients.mjs'), '--mode', phase, '--count', String(n), '--proxy', String(b.proxy),
            '--target', target, '--ca', join(b.dir, 'state', 'ca.pem'), '--dns', String(b.dns), '--suffix', DNS_SUFFIX], { cwd: ROOT });
          try {
            const loaded = { ...(await settle(b.child.pid)), ...(await metrics(b.admin)) };
            rec.clients = clients.line;
            rec.loaded = loaded;
            rec.perItemKb = (loaded.rssKb - idle.rssKb) / Math.max(1, clients.line.ok);
            rec.perItemHeapKb = (loaded.heapUsedKb - idle.heapUsedKb) / Math.max(1, clients.line.ok);
          } finally {
            await stop(clients.child);
          }
        }
        results.runs.push(rec);
        log(`run ${run} ${phase}: idle ${idle.rssKb} KB (anon ${idle.anonKb}, file ${idle.fileKb}, heap used ${idle.heapUsedKb})` +
          (rec.loaded ? `; ${rec.clients.ok} ok/${rec.clients.failed} failed${rec.clients.firstError ? ` (${rec.clients.firstError})` : ''} -> ${rec.loaded.rssKb} KB = ${rec.perItemKb.toFixed(2)} KB each (heap ${rec.perItemHeapKb.toFixed(2)})` : ''));
      } finally {
        await Promise.all([stop(b.child), neighbour && stop(neighbour.child)]);
        removeMemoryCgroup(cgroup);
      }
    }
  }
} finally {
  await stop(origin.child);
}

const idleRuns = results.runs.map((r) => r.idle);
const summary = {
  nodeFloorKb: results.floors.node.rssKb,
  nodeNetTlsHttpFloorKb: results.floors.nodeNetTlsHttp.rssKb,
  earlyRssKb: median(results.runs.map((r) => r.early.rssKb)),
  idleRssKb: median(idleRuns.map((i) => i.rssKb)),
  idleAnonKb: median(idleRuns.map((i) => i.anonKb)),
  idleFileKb: median(idleRuns.map((i) => i.fileKb)),
  idleHeapUsedKb: median(idleRuns.map((i) => i.heapUsedKb)),
  idleHeapTotalKb: median(idleRuns.map((i) => i.heapTotalKb)),
  idlePrivateKb: median(idleRuns.map((i) => i.privateKb)),
  idlePssKb: median(idleRuns.map((i) => i.pssKb)),
  idleCgroupKb: median(idleRuns.map((i) => i.cgroupKb)),
  idleWorkingSetKb: median(idleRuns.map((i) => i.workingSetKb)),
  idleSettled: idleRuns.every((i) => i.settled),
  idleCpuMsPerS: median(idleRuns.map((i) => i.idleCpuMsPerS)),
  idleWakeupsPerS: median(idleRuns.map((i) => i.idleWakeupsPerS)),
  idleMainWakeupsPerS: median(idleRuns.map((i) => i.idleMainWakeupsPerS)),
};
for (const phase of ['tunnel', 'inspected', 'dns', 'closed']) {
  const rs = results.runs.filter((r) => r.phase === phase && r.loaded);
  if (rs.length === 0) continue;
  summary[`${phase}KbEach`] = Number(median(rs.map((r) => r.perItemKb)).toFixed(2));
  summary[`${phase}HeapKbEach`] = Number(median(rs.map((r) => r.perItemHeapKb)).toFixed(2));
  summary[`${phase}Count`] = median(rs.map((r) => r.clients.ok));
}
const out = { meta: { runs: RUNS, count: COUNT, dnsCount: DNS_COUNT, node: process.version, nodeFlags: NODE_FLAGS.join(' '), dist: DIST, phases: PHASES }, summary, ...results };
mkdirSync(join(OUT_FILE, '..'), { recursive: true });
writeFileSync(OUT_FILE, `${JSON.stringify(out, null, 2)}\n`);
const row = (k, v) => process.stdout.write(`${k.padEnd(44)} ${v}\n`);
/** What a process held on its own beside its neighbour, where smaps_rollup could be read. */
const ownText = (r) => (Number.isFinite(r.privateKb) ? ` (own ${(r.privateKb / 1024).toFixed(1)}, PSS ${(r.pssKb / 1024).toFixed(1)})` : '');
/** VmRSS, its own pages and, when it was watched, idle CPU of one process's readings. */
const idleText = (r) => `${(r.rssKb / 1024).toFixed(1)} MiB` + ownText(r) +
  (Number.isFinite(r.idleCpuMsPerS) ? `; idle ${r.idleCpuMsPerS.toFixed(2)} ms CPU/s, ${r.idleWakeupsPerS.toFixed(1)} wakeups/s (main thread ${r.idleMainWakeupsPerS.toFixed(1)})` : '');
row('node floor (setInterval), VmRSS', idleText(results.floors.node));
row('node + net/tls/http/crypto, VmRSS', idleText(results.floors.nodeNetTlsHttp));
for (const [name, r] of Object.entries(results.peers)) row(`${name}, VmRSS`, idleText(r));
row(`boundary first settled after start (median/${idleRuns.length})`, `${(summary.earlyRssKb / 1024).toFixed(1)} MiB`);
row(`boundary idle after start, VmRSS (median/${idleRuns.length})`, `${(summary.idleRssKb / 1024).toFixed(1)} MiB (anon ${(summary.idleAnonKb / 1024).toFixed(1)}, file ${(summary.idleFileKb / 1024).toFixed(1)}, heap used ${(summary.idleHeapUsedKb / 1024).toFixed(1)} of ${(summary.idleHeapTotalKb / 1024).toFixed(1)})`);
if (Number.isFinite(summary.idlePrivateKb)) {
  row(`boundary idle, its own pages (median/${idleRuns.length})`, `${(summary.idlePrivateKb / 1024).toFixed(1)} MiB beside a second boundary (PSS ${(summary.idlePssKb / 1024).toFixed(1)})`);
}
if (Number.isFinite(summary.idleCgroupKb)) {
  row(`boundary idle, charged to its cgroup (median/${idleRuns.length})`, `${(summary.idleCgroupKb / 1024).toFixed(1)} MiB, working set ${(summary.idleWorkingSetKb / 1024).toFixed(1)} (node's pages already cached by its neighbour)`);
}
if (Number.isFinite(summary.idleCpuMsPerS)) {
  row(`boundary idle CPU (median/${idleRuns.length}, ${IDLE_CPU_MS / 1000} s each)`, `${summary.idleCpuMsPerS.toFixed(2)} ms CPU/s, ${summary.idleWakeupsPerS.toFixed(1)} wakeups/s (main thread ${summary.idleMainWakeupsPerS.toFixed(1)})`);
}
for (const phase of ['tunnel', 'inspected', 'dns', 'closed']) {
  if (summary[`${phase}KbEach`] === undefined) continue;
  const what = phase === 'closed' ? `per tunnel opened and closed (${summary[`${phase}Count`]}), left after` : `per ${phase} (${summary[`${phase}Count`]} held)`;
  row(what, `${summary[`${phase}KbEach`]} KB RSS, ${summary[`${phase}HeapKbEach`]} KB heap`);
}
row('raw results', OUT_FILE);
