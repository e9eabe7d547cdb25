// bench/middleware-cost.mjs — what one regex network middleware stage adds per request (docs/policy.md#network-
// middlewares): two boundary processes from the same build, one whose policy selects the origin's host with
// ryno/regex and one without, each sent the same sequential keep-alive POSTs through its forward proxy to a loopback
// origin. Rounds alternate which boundary goes first; each round's median latency is kept, and the table shows the
// median of those medians per body. Bounded; everything started here is killed on exit; nothing leaves 127.0.0.1.
//
// Usage: npm run build && node bench/middleware-cost.mjs
//        ROUNDS=9 REQUESTS=2000 node bench/middleware-cost.mjs
//        BOUNDARY_DIST=bench/out/build-<sha> node bench/middleware-cost.mjs   (another compiled tree)

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

const ROUNDS = Number(process.env.ROUNDS ?? 7);
const REQUESTS = Number(process.env.REQUESTS ?? 1500);
const WARMUP = Number(process.env.WARMUP ?? 500);
const DIST = resolve(process.env.BOUNDARY_DIST ?? new URL('../dist', import.meta.url).pathname);
const HOST = 'origin.bench.test';

const padding = 'lorem ipsum dolor sit amet '.repeat(36);
const BODIES = {
  'no key (1 KiB JSON)': JSON.stringify({ model: 'm', messages: [{ role: 'user', content: padding }] }),
  'one key (1 KiB JSON)': JSON.stringify({ model: 'm', key: 'sk-ABCDEFGHIJKLMNOPQRST', messages: [{ role: 'user', content: padding }] }),
};

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

const work = await mkdtemp(join(tmpdir(), 'boundary-mw-bench-'));
await writeFile(join(work, 'hosts'), `127.0.0.1 ${HOST}\n`);
const policyText = (middleware) => `version: 1
network_policies:
  bench:
    endpoints: [{ host: ${HOST}, port: ${originPort} }]
    binaries: [{ path: "/**" }]
${middleware ? `network_middlewares:\n  redact:\n    middleware: ryno/regex\n    endpoints: { include: [${HOST}] }\n` : ''}`;

const children = [];
async function startBoundary(name, middleware, index) {
  const dir = join(work, name);
  await writeFile(`${dir}.yaml`, policyText(middleware));
  const base = 41000 + index * 10 + (process.pid % 500) * 20;
  const [proxy, admin, dns] = [base, base + 1, base + 2];
  const child = spawn(
    process.execPath,
    [
      join(DIST, 'app/main.js'),
      'run',
      '--policy',
      `${dir}.yaml`,
      '--proxy-listen',
      `127.0.0.1:${proxy}`,
      '--admin-listen',
      `127.0.0.1:${admin}`,
      '--dns-listen',
      `127.0.0.1:${dns}`,
      '--hosts',
      join(work, 'hosts'),
      '--upstream-dns',
      '127.0.0.1:9',
      '--unsafe-allow-loopback-upstream',
      '--state-dir',
      `${dir}-state`,
      '--capture',
      'off',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
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
async function measure(target, body, count) {
  const pool = new Pool(`http://127.0.0.1:${target.proxy}`, { connections: 1, pipelining: 1 });
  const times = [];
  try {
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      const r = await pool.request({ method: 'POST', path: `http://${HOST}:${originPort}/v1/chat`, headers: { host: `${HOST}:${originPort}`, 'content-type': 'application/json' }, body });
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
  const plain = await startBoundary('without', false, 0);
  const regex = await startBoundary('with-regex', true, 1);
  console.log(`rounds ${ROUNDS} x ${REQUESTS} sequential keep-alive POSTs per boundary per body (warm-up ${WARMUP}); dist ${DIST}`);
  console.log('| body | without middleware (µs, median) | with one ryno/regex stage (µs, median) | added per request (µs) | round medians without / with |');
  console.log('|---|---|---|---|---|');
  for (const [label, body] of Object.entries(BODIES)) {
    await measure(plain, body, WARMUP);
    await measure(regex, body, WARMUP);
    const a = [];
    const b = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate who goes first, so drift in the host's load falls on both.
      if (round % 2 === 0) {
        a.push(await measure(plain, body, REQUESTS));
        b.push(await measure(regex, body, REQUESTS));
      } else {
        b.push(await measure(regex, body, REQUESTS));
        a.push(await measure(plain, body, REQUESTS));
      }
    }
    const ma = median(a);
    const mb = median(b);
    const fmt = (xs) => xs.map((x) => x.toFixed(0)).join(' ');
    console.log(`| ${label} | ${ma.toFixed(1)} | ${mb.toFixed(1)} | ${(mb - ma).toFixed(1)} | ${fmt(a)} / ${fmt(b)} |`);
  }
} finally {
  for (const child of children) child.kill('SIGTERM');
  origin.close();
  await Promise.all(children.map((c) => (c.exitCode === null ? once(c, 'exit') : undefined)));
  await rm(work, { recursive: true, force: true });
}
