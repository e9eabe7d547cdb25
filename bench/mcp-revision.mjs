// bench/mcp-revision.mjs — what the MCP protocol revision checks add per request (docs/policy.md#mcp-protocol-revisions):
// two compiled builds, one without the checks (BASE) and one with them (NEW), measured in alternating rounds so a
// neighbour's load falls on both alike. (a) In process: reading one MCP request (its revision headers and body) and
// deciding it, in CPU time. (b) End to end: sequential keep-alive POSTs of one tools/call through each build's
// forward proxy to a loopback origin: boundary's CPU per request (/proc: the process, and its main thread where the
// chain runs) and the client's latency.
// Loopback only, bounded.
//
// Usage: node bench/mcp-revision.mjs BASE_DIST NEW_DIST
//        (dist directories, e.g. `bench/build-ref.sh base-chain` and `bench/build-ref.sh HEAD`)
// Environment: ROUNDS (default 9), ITERATIONS per in-process round (20000), REQUESTS per end-to-end round (1500),
// CASE (a part of a case's name: only those), BOUNDARY_NODE_FLAGS (node flags for both boundaries).

import { spawn } from 'node:child_process';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { Agent, createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [BASE_DIST, NEW_DIST] = process.argv.slice(2).map((d) => resolve(d));
if (BASE_DIST === undefined || NEW_DIST === undefined) {
  console.error('usage: node bench/mcp-revision.mjs BASE_DIST NEW_DIST');
  process.exit(2);
}
const ROUNDS = Math.min(Number(process.env.ROUNDS ?? 9), 50);
const ITERATIONS = Math.min(Number(process.env.ITERATIONS ?? 20_000), 500_000);
const REQUESTS = Math.min(Number(process.env.REQUESTS ?? 1_500), 20_000);
/** Unmeasured requests per build and case first, until the JIT has settled (the first rounds ran 2-3x slower). */
const WARMUP_REQUESTS = 3 * REQUESTS;
/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;
const STARTUP_TIMEOUT_MS = 60_000;
const HOST = 'mcp.bench.test';

const RULES = `        rules:
          - allow: { method: initialize }
          - allow: { method: tools/list }
          - allow: { method: tools/call, tool: { any: [read_status, "search_*"] } }
        deny_rules:
          - { method: tools/call, tool: delete_resource }`;
/** The base build refuses `mcp.versions`; the new one reads /mcp26 under 2026-07-28 only. Same rules. */
const policyText = (port, withVersions) => `version: 1
network_policies:
  tools:
    endpoints:
      - host: ${HOST}
        port: ${port}
        path: /mcp
        protocol: mcp
        enforcement: enforce
${RULES}
      - host: ${HOST}
        port: ${port}
        path: /mcp26
        protocol: mcp
        enforcement: enforce
${withVersions ? '        mcp: { versions: ["2026-07-28"] }\n' : ''}${RULES}
    binaries: [{ path: "/**" }]
`;

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const legacyBody = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'search_web', arguments: { query: 'boundary', limit: 10 } } }));
const sessionlessBody = Buffer.from(
  JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'search_web', arguments: { query: 'boundary', limit: 10 }, _meta: META } }),
);
const baseHead = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': 'b5a8f3e2' };
const CASES = [
  { name: '2025-11-25 tools/call', path: '/mcp', body: legacyBody, revision: '2025-11-25', headers: { ...baseHead, 'mcp-protocol-version': '2025-11-25' } },
  {
    name: '2026-07-28 tools/call',
    path: '/mcp26',
    body: sessionlessBody,
    revision: '2026-07-28',
    headers: { ...baseHead, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'search_web' },
  },
];
const rawOf = (headers) => Object.entries(headers).flat();

const exists = (path) => access(path).then(
  () => true,
  () => false,
);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const load = (dist, file) => import(pathToFileURL(join(dist, file)).href);

/** One request's reading and decision as each build's chain does it. */
async function inProcessReader(dist) {
  const { parsePolicy } = await load(dist, 'policy/parse.js');
  const { decide } = await load(dist, 'policy/decide.js');
  let revisions = true;
  try {
    await load(dist, 'jsonrpc/mcp-message.js');
  } catch {
    revisions = false;
  }
  const policy = parsePolicy(policyText(443, false));
  const intent = (path, jsonRpc) => ({ adapter: 'l7', host: HOST, port: 443, method: 'POST', path, jsonRpc });
  if (!revisions) {
    const { parseJsonRpcBody } = await load(dist, 'jsonrpc/message.js');
    return (c) => decide(policy, intent(c.path, parseJsonRpcBody(c.body, { mcp: true, strictToolNames: true })));
  }
  const { readMcpBody } = await load(dist, 'jsonrpc/mcp-message.js');
  const { readMirroredHeaders, readProtocolVersionHeader } = await load(dist, 'jsonrpc/mcp-headers.js');
  return (c) => {
    const raw = c.raw;
    const header = readProtocolVersionHeader(raw);
    const read = readMcpBody(c.body, { revision: header.revision, strictToolNames: true });
    if (!read.ok) throw new Error(read.problem);
    if (c.revision === '2026-07-28') {
      const mirrored = readMirroredHeaders(raw);
      if (!mirrored.ok || mirrored.method !== read.single.method || mirrored.name !== read.single.name) throw new Error('mirrored headers');
    }
    return decide(policy, intent(c.path, read.request));
  };
}

/** CPU microseconds (user + system) per call: time spent waiting for a core on a shared host is not counted. */
function perCallUs(run, c, calls) {
  const started = process.cpuUsage();
  for (let i = 0; i < calls; i++) run(c);
  const used = process.cpuUsage(started);
  return (used.user + used.system) / calls;
}

async function startOrigin() {
  const answer = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'ok' }] } }));
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer));
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return server;
}

/** A free loopback port (closed again before boundary binds it). */
async function freePort() {
  const s = createServer();
  await new Promise((ok) => s.listen(0, '127.0.0.1', ok));
  const { port } = s.address();
  await new Promise((ok) => s.close(ok));
  return port;
}

async function startBoundary(dist, work, name, originPort, withVersions) {
  const dir = join(work, name);
  const policy = join(work, `${name}.yaml`);
  await writeFile(policy, policyText(originPort, withVersions));
  const [proxyPort, adminPort, dnsPort] = [await freePort(), await freePort(), await freePort()];
  const entry = join(dist, 'app/main.js');
  const args = [entry, 'run', '--policy', policy, '--proxy-listen', `127.0.0.1:${proxyPort}`, '--admin-listen', `127.0.0.1:${adminPort}`];
  args.push('--dns-listen', `127.0.0.1:${dnsPort}`, '--hosts', join(work, 'hosts'), '--upstream-dns', '127.0.0.1:9', '--state-dir', dir);
  args.push('--unsafe-allow-loopback-upstream', '--binary-identity', 'endpoint-only', '--capture', 'off', '--log-format', 'json');
  // BOUNDARY_NODE_FLAGS: extra node flags for both boundaries, e.g. "--cpu-prof --cpu-prof-dir /tmp/prof".
  const flags = (process.env.BOUNDARY_NODE_FLAGS ?? '').split(' ').filter((f) => f !== '');
  const child = spawn(process.execPath, [...flags, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr = (stderr + d).slice(-2_000);
  });
  const deadline = performance.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    const up = await new Promise((ok) => {
      const r = request({ host: '127.0.0.1', port: adminPort, path: '/healthz' }, (res) => {
        res.resume();
        ok(res.statusCode === 200);
      });
      r.on('error', () => ok(false));
      r.end();
    });
    if (up) break;
    if (child.exitCode !== null || performance.now() > deadline) throw new Error(`${name} did not start: ${stderr}`);
    await new Promise((ok) => setTimeout(ok, 100));
  }
  return { name, child, proxyPort, agent: new Agent({ keepAlive: true, maxSockets: 1 }) };
}

function send(b, originPort, c) {
  return new Promise((ok, fail) => {
    const r = request(
      { host: '127.0.0.1', port: b.proxyPort, method: 'POST', path: `http://${HOST}:${originPort}${c.path}`, agent: b.agent, headers: { ...c.headers, host: `${HOST}:${originPort}`, 'content-length': c.body.length } },
      (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? ok() : fail(new Error(`${b.name} ${c.name}: HTTP ${res.statusCode}`))));
      },
    );
    r.on('error', fail);
    r.end(c.body);
  });
}

async function cpuTicks(pid) {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  // Fields 14 and 15 of the file (utime, stime), counted after the command name.
  return Number(fields[11]) + Number(fields[12]);
}

/** Nanoseconds the main thread (where the chain runs) has spent on a core: finer than the process's 10 ms ticks. */
async function mainThreadNs(pid) {
  return Number((await readFile(`/proc/${pid}/task/${pid}/schedstat`, 'utf8')).split(' ')[0]);
}

/** One end-to-end round: boundary CPU µs per request (process, and its main thread) and the median latency in µs. */
async function endToEnd(b, originPort, c) {
  const latencies = [];
  const before = await cpuTicks(b.child.pid);
  const threadBefore = await mainThreadNs(b.child.pid);
  for (let i = 0; i < REQUESTS; i++) {
    const started = performance.now();
    await send(b, originPort, c);
    latencies.push((performance.now() - started) * 1_000);
  }
  const thread = ((await mainThreadNs(b.child.pid)) - threadBefore) / 1_000 / REQUESTS;
  const ticks = (await cpuTicks(b.child.pid)) - before;
  return { cpu: ((ticks / TICKS_PER_SECOND) * 1e6) / REQUESTS, thread, latency: median(latencies) };
}

const builds = [
  { name: 'base', dist: BASE_DIST },
  { name: 'new', dist: NEW_DIST },
];
// A build that knows revisions is given `mcp.versions` for /mcp26; one that does not would refuse the key.
for (const b of builds) b.withVersions = await exists(join(b.dist, 'jsonrpc/mcp-message.js'));
for (const b of builds) b.read = await inProcessReader(b.dist);
for (const c of CASES) c.raw = rawOf(c.headers);
// CASE=2026: only the cases whose name holds it.
const cases = CASES.filter((c) => c.name.includes(process.env.CASE ?? ''));

console.log(`in process: reading one MCP request (revision headers + body) and deciding it; ${ROUNDS} rounds of ${ITERATIONS}`);
for (const c of cases) {
  const us = { base: [], new: [] };
  for (const b of builds) perCallUs(b.read, c, ITERATIONS);
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? builds : [...builds].reverse();
    for (const b of order) us[b.name].push(perCallUs(b.read, c, ITERATIONS));
  }
  const [mb, mn] = [median(us.base), median(us.new)];
  console.log(`  ${c.name.padEnd(24)} base ${mb.toFixed(2)} us  new ${mn.toFixed(2)} us  added ${(mn - mb).toFixed(2)} us`);
  console.log(`    rounds base ${us.base.map((x) => x.toFixed(2)).join(' ')} | new ${us.new.map((x) => x.toFixed(2)).join(' ')}`);
}

const work = await mkdtemp(join(tmpdir(), 'boundary-mcp-revision-'));
const origin = await startOrigin();
const originPort = origin.address().port;
const running = [];
try {
  await writeFile(join(work, 'hosts'), `127.0.0.1 localhost\n127.0.0.1 ${HOST}\n`);
  for (const b of builds) running.push(await startBoundary(b.dist, work, b.name, originPort, b.withVersions));
  console.log(`end to end: ${REQUESTS} sequential keep-alive POSTs per round through the forward proxy, ${ROUNDS} rounds`);
  for (const c of cases) {
    const rounds = { base: [], new: [] };
    for (const b of running) for (let i = 0; i < WARMUP_REQUESTS; i++) await send(b, originPort, c);
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? running : [...running].reverse();
      for (const b of order) rounds[b.name].push(await endToEnd(b, originPort, c));
    }
    const cpu = (n) => median(rounds[n].map((x) => x.cpu));
    const lat = (n) => median(rounds[n].map((x) => x.latency));
    // Each round measures both builds back to back: the median of those paired differences drifts less with load.
    const paired = median(rounds.new.map((x, r) => x.cpu - rounds.base[r].cpu));
    const thread = (n) => median(rounds[n].map((x) => x.thread));
    const threadPaired = median(rounds.new.map((x, r) => x.thread - rounds.base[r].thread));
    console.log(
      `  ${c.name.padEnd(24)} boundary CPU/request base ${cpu('base').toFixed(0)} us  new ${cpu('new').toFixed(0)} us  added ${(cpu('new') - cpu('base')).toFixed(0)} us` +
        ` (paired ${paired.toFixed(0)} us); latency median base ${lat('base').toFixed(0)} us  new ${lat('new').toFixed(0)} us`,
    );
    console.log(
      `    main thread CPU/request base ${thread('base').toFixed(1)} us  new ${thread('new').toFixed(1)} us  added ${(thread('new') - thread('base')).toFixed(1)} us (paired ${threadPaired.toFixed(1)} us)`,
    );
    console.log(`    cpu rounds base ${rounds.base.map((x) => x.cpu.toFixed(0)).join(' ')} | new ${rounds.new.map((x) => x.cpu.toFixed(0)).join(' ')}`);
  }
} finally {
  for (const b of running) {
    b.agent.destroy();
    b.child.kill('SIGTERM');
  }
  origin.close();
  await rm(work, { recursive: true, force: true });
}
