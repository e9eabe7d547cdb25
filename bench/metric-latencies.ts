// Measures, on this machine and on loopback only, what the boundary's latency and size histograms record, so their
// buckets can be chosen from figures (docs/metrics.md#buckets). Prints per-histogram count, mean and the bucket
// quantiles the boundary itself reports after a mixed run, plus direct timings of the primitives behind them.
// Usage: node --import tsx bench/metric-latencies.ts [ROUNDS]   (default 400; bounded; nothing leaves 127.0.0.1)

import { createServer as createNetServer, connect as netConnect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { connect as tlsConnect, createServer as createTlsServer } from 'node:tls';
import { METRICS } from '../src/app/metric-catalogue.js';
import { decide } from '../src/policy/decide.js';
import { parsePolicy } from '../src/policy/parse.js';
import { startBoundary } from '../test/harness/boundary.js';
import { makeTestPki } from '../test/harness/certs.js';
import { buildQuery, udpQuery } from '../test/harness/dns-client.js';
import { openTunnel, sendRequest } from '../test/harness/proxy-client.js';
import { httpOrigin } from '../test/harness/servers.js';

const ROUNDS = Math.min(Number(process.argv[2] ?? 400) || 400, 5_000);

function quantiles(ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number): string => (s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? 0).toFixed(4);
  return `n=${s.length} p50=${q(0.5)} p90=${q(0.9)} p99=${q(0.99)} max=${q(1)} ms`;
}

async function timed(n: number, f: () => Promise<unknown> | unknown): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await f();
    out.push(performance.now() - t);
  }
  return out;
}

async function primitives(): Promise<void> {
  const policy = parsePolicy(
    `version: 1\nnetwork_policies:\n${Array.from({ length: 20 }, (_, i) => `  p${i}:\n    name: p${i}\n    endpoints:\n      - host: "*.svc${i}.example.test"\n        port: 443\n      - host: api${i}.example.test\n        port: 443\n        protocol: rest\n        enforcement: enforce\n        access: read-only\n`).join('')}`,
  );
  const intents = [
    { adapter: 'connect' as const, host: 'api7.example.test', port: 443 },
    { adapter: 'forward' as const, host: 'x.svc3.example.test', port: 443 },
    { adapter: 'connect' as const, host: 'nowhere.example.test', port: 443 },
    { adapter: 'l7' as const, host: 'api7.example.test', port: 443, method: 'GET', path: '/v1/items', query: '' },
  ];
  for (let i = 0; i < 2_000; i++) decide(policy, intents[i % intents.length]!);
  console.log(`decide() (20-entry policy, 4 intents):  ${quantiles(await timed(ROUNDS * 10, () => decide(policy, intents[Math.floor(Math.random() * 4)]!)))}`);

  const server = createNetServer((s) => s.destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const connects = await timed(ROUNDS, () => new Promise<void>((resolve, reject) => {
    const s = netConnect(port, '127.0.0.1', () => {
      s.destroy();
      resolve();
    });
    s.on('error', reject);
  }));
  console.log(`TCP connect, loopback:                  ${quantiles(connects)}`);
  server.close();

  const pki = await makeTestPki();
  const tlsServer = createTlsServer({ key: pki.server.keyPem, cert: pki.server.certPem }, (s) => s.end());
  await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r));
  const tlsPort = (tlsServer.address() as { port: number }).port;
  const handshakes = await timed(Math.min(ROUNDS, 300), () => new Promise<void>((resolve, reject) => {
    const s = tlsConnect({ port: tlsPort, host: '127.0.0.1', ca: pki.ca.certPem, servername: 'localhost' }, () => {
      s.destroy();
      resolve();
    });
    s.on('error', reject);
  }));
  console.log(`TLS full handshake (P-256), loopback:    ${quantiles(handshakes)}`);
  tlsServer.close();
}

async function throughBoundary(): Promise<void> {
  const origin = await httpOrigin();
  const b = await startBoundary({
    policy: `version: 1\nnetwork_policies:\n  api:\n    name: api\n    endpoints:\n      - host: api.example.test\n        port: ${origin.port}\n`,
  });
  try {
    const forward = await timed(ROUNDS, () => sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/items` }));
    console.log(`forward GET through boundary (client):  ${quantiles(forward)}`);
    const tunnels = await timed(Math.min(ROUNDS, 300), async () => (await openTunnel(b.proxyPort, `api.example.test:${origin.port}`)).socket.destroy());
    console.log(`CONNECT established (client):           ${quantiles(tunnels)}`);
    const dns = await timed(ROUNDS, () => udpQuery(b.dnsPort ?? 0, buildQuery(Math.random() < 0.5 ? 'api.example.test' : 'nowhere.example.test', 'A')));
    console.log(`policy DNS query, UDP (client):         ${quantiles(dns)}`);
    const text = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
    for (const spec of Object.values(METRICS)) {
      if (spec.type !== 'histogram') continue;
      const sum = Number(/_sum(?:\{[^}]*\})? (\S+)/.exec(text.split('\n').filter((l) => l.startsWith(`${spec.name}_sum`)).join('\n'))?.[1] ?? 0);
      const count = Number(/_count(?:\{[^}]*\})? (\S+)/.exec(text.split('\n').filter((l) => l.startsWith(`${spec.name}_count`)).join('\n'))?.[1] ?? 0);
      const mean = count === 0 ? '-' : spec.unit === 'seconds' ? `${((sum / count) * 1000).toFixed(4)} ms` : `${(sum / count).toFixed(0)} B`;
      console.log(`boundary ${spec.name}: count=${count} mean=${mean}`);
    }
  } finally {
    await b.close();
    await origin.close();
  }
}

await primitives();
await throughBoundary();
