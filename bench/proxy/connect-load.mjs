// CONNECT+TLS load client for bench/proxy.sh: HTTPS GETs to one origin, either direct or through an HTTP proxy's
// CONNECT, at a fixed concurrency for a fixed time; prints one JSON line with req/s and latency percentiles.
// Only ever dials the --proxy or --connect address given (the bench passes 127.0.0.1 only).
//
// Usage: node connect-load.mjs --target origin.bench.test:PORT [--proxy 127.0.0.1:P | --connect-to 127.0.0.1:PORT]
//          [--tunnel-host H] --ca PEM [--keepalive 0|1] [--concurrency 32] [--duration 10] [--warmup 0] [--path /]
//   --keepalive 0: every request opens a new tunnel (CONNECT) and does a full TLS handshake (no session resumption).
//   --tunnel-host H: CONNECT to H:PORT instead of the target name (SNI and Host stay the target's name).
//   --keepalive 1: up to --concurrency tunnels are opened once and reused for every request.

import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';

// One request never waits longer than this; a stuck proxy shows up as errors, not as a hung bench.
const REQUEST_TIMEOUT_MS = 10_000;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
}

function splitHostPort(text) {
  const i = text.lastIndexOf(':');
  return { host: text.slice(0, i), port: Number(text.slice(i + 1)) };
}

const target = splitHostPort(arg('--target'));
const proxyArg = arg('--proxy');
const proxy = proxyArg === undefined ? undefined : splitHostPort(proxyArg);
const connectTo = splitHostPort(arg('--connect-to', `127.0.0.1:${target.port}`));
const ca = readFileSync(arg('--ca'));
const keepAlive = arg('--keepalive', '1') === '1';
const concurrency = Number(arg('--concurrency', '32'));
const durationMs = Number(arg('--duration', '10')) * 1000;
const warmupMs = Number(arg('--warmup', '0')) * 1000;
const path = arg('--path', '/');
const authority = `${target.host}:${target.port}`;
const tunnelAuthority = `${arg('--tunnel-host', target.host)}:${target.port}`;

for (const a of [proxy, connectTo]) {
  if (a !== undefined && !a.host.startsWith('127.')) {
    process.stderr.write(`connect-load: refusing non-loopback address ${a.host}\n`);
    process.exit(2);
  }
}

function secure(socket) {
  // No `session`: every new tunnel pays a full handshake, which is what the d1 case measures.
  return tls.connect({ socket, servername: target.host, ca, ALPNProtocols: ['http/1.1'] });
}

class TunnelAgent extends https.Agent {
  createConnection(_options, callback) {
    if (proxy === undefined) {
      callback(null, secure(net.connect(connectTo.port, connectTo.host)));
      return undefined;
    }
    const req = http.request({ host: proxy.host, port: proxy.port, method: 'CONNECT', path: tunnelAuthority, headers: { host: tunnelAuthority }, agent: false });
    req.once('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        callback(new Error(`CONNECT answered ${res.statusCode}`));
        return;
      }
      callback(null, secure(socket));
    });
    req.once('error', (err) => callback(err));
    req.end();
    return undefined;
  }
}

const agent = new TunnelAgent({ keepAlive, maxSockets: concurrency, maxFreeSockets: concurrency, maxCachedSessions: 0 });

function once() {
  return new Promise((resolve) => {
    const req = https.request(
      { agent, host: target.host, port: target.port, path, method: 'GET', headers: { host: authority }, timeout: REQUEST_TIMEOUT_MS },
      (res) => {
        res.on('data', () => {});
        res.once('end', () => resolve(res.statusCode === 200 ? 'ok' : 'status'));
        res.once('error', () => resolve('error'));
      },
    );
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', () => resolve('error'));
    req.end();
  });
}

async function phase(ms, record) {
  const end = performance.now() + ms;
  const latencies = [];
  const counts = { ok: 0, status: 0, error: 0 };
  async function worker() {
    // Bounded by the deadline; errors back off briefly so a refusing proxy does not spin the CPU.
    while (performance.now() < end) {
      const t0 = performance.now();
      const outcome = await once();
      const dt = performance.now() - t0;
      counts[outcome]++;
      if (record && outcome === 'ok') latencies.push(dt);
      if (outcome === 'error') await new Promise((r) => setTimeout(r, 10));
    }
  }
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { latencies, counts, elapsedMs: performance.now() - started };
}

function pct(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

if (warmupMs > 0) await phase(warmupMs, false);
const cpu0 = process.cpuUsage();
const { latencies, counts, elapsedMs } = await phase(durationMs, true);
const cpu = process.cpuUsage(cpu0);
latencies.sort((a, b) => a - b);
const round = (x) => (x === null ? null : Math.round(x * 1000) / 1000);
process.stdout.write(
  `${JSON.stringify({
    requests: counts.ok,
    non2xx: counts.status,
    errors: counts.error,
    duration_s: round(elapsedMs / 1000),
    rps: round(counts.ok / (elapsedMs / 1000)),
    p50_ms: round(pct(latencies, 50)),
    p90_ms: round(pct(latencies, 90)),
    p99_ms: round(pct(latencies, 99)),
    max_ms: round(latencies.at(-1) ?? null),
    client_cpu_pct: round(((cpu.user + cpu.system) / 1000 / elapsedMs) * 100),
  })}\n`,
);
agent.destroy();
process.exit(0);
