// bench/canary-cost.mjs — what boundary/reverse-canary and boundary/secret-scan add per request
// (docs/credentials.md#reverse-canary, docs/policy.md#secret-scanner): five boundary processes, each sent the same
// sequential keep-alive POSTs (a 4 KiB chat-style JSON body carrying no secret) through its forward proxy to a loopback
// origin: BOUNDARY_REF's build without middleware (`ref`), this build without middleware (`this`), this build with one
// reverse-canary stage watching CREDENTIALS values bound elsewhere (`canary`), with one secret-scan stage (`scan`), and
// with one ryno/regex stage (`regex`: what holding the body for any built-in costs). Each round runs them in a rotated
// order and keeps each one's median; the table shows the medians of those. Bounded; everything started here is
// killed on exit; nothing leaves 127.0.0.1.
//
// Usage: npm run build && BOUNDARY_REF=main node bench/canary-cost.mjs
//        ROUNDS=9 REQUESTS=1500 CREDENTIALS=16 BOUNDARY_REF=main node bench/canary-cost.mjs

import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

const ROUNDS = Number(process.env.ROUNDS ?? 7);
const REQUESTS = Number(process.env.REQUESTS ?? 1000);
const WARMUP = Number(process.env.WARMUP ?? 300);
const CREDENTIALS = Number(process.env.CREDENTIALS ?? 8);
const HERE = new URL('.', import.meta.url).pathname;
const DIST = resolve(process.env.BOUNDARY_DIST ?? new URL('../dist', import.meta.url).pathname);
const REF = process.env.BOUNDARY_REF ?? 'main';
const REF_DIST = execFileSync('bash', [join(HERE, 'build-ref.sh'), REF], { encoding: 'utf8' }).trim();
const HOST = 'origin.bench.test';

const content = 'Summarise the attached incident notes and list follow-ups with owners. '.repeat(50);
const BODY = JSON.stringify({ model: 'm', stream: false, messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content }] }).slice(0, 4096);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const origin = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
});
origin.listen(0, '127.0.0.1');
await once(origin, 'listening');
const originPort = origin.address().port;

const work = await mkdtemp(join(tmpdir(), 'boundary-canary-bench-'));
await writeFile(join(work, 'hosts'), `127.0.0.1 ${HOST}\n`);
// Random values (no shared prefix, the matcher's worst case), bound to another host: the canary looks for each one.
const env = Object.fromEntries(Array.from({ length: CREDENTIALS }, (_, i) => [`TOKEN_${i}`, randomBytes(24).toString('base64url')]));
await writeFile(join(work, 'credentials.yaml'), `providers:\n  bench:\n    env: ${JSON.stringify(env)}\n    endpoints: [{ host: elsewhere.bench.test, port: 443 }]\n`);

const MIDDLEWARES = { regex: 'ryno/regex', canary: 'boundary/reverse-canary', scan: 'boundary/secret-scan' };
const policyText = (middleware) => `version: 1
network_policies:
  bench:
    endpoints: [{ host: ${HOST}, port: ${originPort} }]
    binaries: [{ path: "/**" }]
${middleware ? `network_middlewares:\n  stage:\n    middleware: ${middleware}\n    endpoints: { include: [${HOST}] }\n` : ''}`;

const children = [];
async function startBoundary(name, dist, middleware, index) {
  const dir = join(work, name);
  await writeFile(`${dir}.yaml`, policyText(middleware));
  const base = 43000 + index * 10 + (process.pid % 400) * 40;
  const [proxy, admin, dns] = [base, base + 1, base + 2];
  const args = [join(dist, 'app/main.js'), 'run', '--policy', `${dir}.yaml`, '--credentials', join(work, 'credentials.yaml')];
  args.push('--proxy-listen', `127.0.0.1:${proxy}`, '--admin-listen', `127.0.0.1:${admin}`, '--dns-listen', `127.0.0.1:${dns}`);
  args.push('--hosts', join(work, 'hosts'), '--upstream-dns', '127.0.0.1:9', '--unsafe-allow-loopback-upstream', '--state-dir', `${dir}-state`, '--capture', 'off');
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${admin}/healthz`);
      if (r.ok) return { name, proxy };
    } catch {}
    await sleep(50);
  }
  throw new Error(`${name} did not start`);
}

/** Sequential POSTs through the forward proxy on one kept-alive connection: median µs per request. */
async function measure(target, count) {
  const pool = new Pool(`http://127.0.0.1:${target.proxy}`, { connections: 1, pipelining: 1 });
  const times = [];
  try {
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      const r = await pool.request({ method: 'POST', path: `http://${HOST}:${originPort}/v1/chat`, headers: { host: `${HOST}:${originPort}`, 'content-type': 'application/json' }, body: BODY });
      await r.body.text();
      if (r.statusCode !== 200) throw new Error(`${target.name}: status ${r.statusCode}`);
      times.push((performance.now() - t0) * 1000);
    }
  } finally {
    await pool.close();
  }
  return median(times);
}

try {
  const targets = [
    await startBoundary('ref', REF_DIST, undefined, 0),
    await startBoundary('this', DIST, undefined, 1),
    await startBoundary('canary', DIST, MIDDLEWARES.canary, 2),
    await startBoundary('scan', DIST, MIDDLEWARES.scan, 3),
    await startBoundary('regex', DIST, MIDDLEWARES.regex, 4),
  ];
  console.log(`rounds ${ROUNDS} x ${REQUESTS} sequential keep-alive POSTs of ${Buffer.byteLength(BODY)} bytes per boundary (warm-up ${WARMUP}); ${CREDENTIALS} credentials; ref ${REF} (${REF_DIST}), this ${DIST}`);
  for (const t of targets) await measure(t, WARMUP);
  const rounds = new Map(targets.map((t) => [t.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Rotate who goes first, so drift in the host's load falls on all.
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(round + k) % targets.length];
      rounds.get(t.name).push(await measure(t, REQUESTS));
    }
  }
  const base = median(rounds.get('this'));
  console.log('| boundary | median of round medians (µs) | vs this without middleware | round medians |');
  console.log('|---|---|---|---|');
  for (const t of targets) {
    const m = median(rounds.get(t.name));
    console.log(`| ${t.name} | ${m.toFixed(1)} | ${(m - base >= 0 ? '+' : '') + (m - base).toFixed(1)} µs (x${(m / base).toFixed(3)}) | ${rounds.get(t.name).map((x) => x.toFixed(0)).join(' ')} |`);
  }
} finally {
  for (const child of children) child.kill('SIGTERM');
  origin.close();
  await Promise.all(children.map((c) => (c.exitCode === null ? once(c, 'exit') : undefined)));
  await rm(work, { recursive: true, force: true });
}
