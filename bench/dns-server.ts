// Benchmark entry: a policy DNS server on 127.0.0.1 (bench/dns-stack.ts: fixed policy, loopback fixture upstream,
// production event path). Usage: node bench/dns-server.mjs <port> <allowed-count> [log-mode] [log-file] [guard] [workers]
// (log modes and guard modes: bench/dns-stack.ts; workers: --dns-workers' replay workers, Node 22, dns-replay.mjs and
// replay-worker.js built beside this file). Prints "ready <port>" once all listen; stops on SIGTERM/SIGINT.
// Started by bench/dns-cluster.ts as a node:cluster worker, it shares the primary's sockets (DNS_BENCH_SHARED=1).

import { createDnsServer } from '../src/dns/server.js';
import { GUARD_MODES, type GuardMode, LOG_MODES, type LogMode, startBenchDns } from './dns-stack.js';

const port = Number(process.argv[2] ?? '15353');
const names = Number(process.argv[3] ?? '100');
const logMode = (process.argv[4] ?? 'ocsf') as LogMode;
const logFile = process.argv[5] ?? '/dev/null';
const guard = (process.argv[6] ?? 'unlimited') as GuardMode;
const workers = Number(process.argv[7] ?? '0');
if (!LOG_MODES.includes(logMode) || !GUARD_MODES.includes(guard)) throw new Error(`log mode one of ${LOG_MODES.join('|')}, guard one of ${GUARD_MODES.join('|')}`);

// A computed specifier: esbuild leaves it alone, so this file bundles against a src/ without workers (BOUNDARY_REF).
const replay =
  workers > 0 ? ((await import(new URL('./dns-replay.mjs', import.meta.url).href)) as typeof import('./dns-replay.js')).replayFactory(workers) : undefined;
const bench = await startBenchDns({ names, logMode, logFile, guard, ...(replay === undefined ? {} : { replay }) });
const server = createDnsServer({
  host: '127.0.0.1',
  port,
  handler: bench.handler,
  exclusive: process.env.DNS_BENCH_SHARED !== '1',
  reusePort: bench.workers !== undefined,
  onTick: () => {
    bench.pool.sweep();
    bench.dns.tick();
  },
});
await server.start();
await bench.workers?.start(server);
process.stdout.write(`ready ${server.address().port}\n`);

async function stop(): Promise<void> {
  await server.close();
  await bench.close();
  process.stderr.write(`events=${bench.events()} upstream=${bench.upstreamQueries()} ${JSON.stringify({ ...bench.dns.stats(), ...server.stats(), ...(bench.workers === undefined ? {} : { workers: bench.workers.stats() }) })}\n`);
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
