// Per-query CPU of the policy DNS handler alone, without sockets: the handler's cached path (what every repeated
// query of bench/dns.sh takes) called in a loop, with events on the production path (bench/dns-stack.ts).
// Usage: node --import tsx bench/dns-handler.ts [log-mode] [queries] [rounds]. Prints the median ns of CPU per
// query (process.cpuUsage: every thread, the log writer's included) for cached allowed names and for refusals.

import { setImmediate } from 'node:timers/promises';
import type { DnsRequestInfo } from '../src/dns/server.js';
import { buildQuery } from '../test/harness/dns-client.js';
import { LOG_MODES, type LogMode, startBenchDns } from './dns-stack.js';

const logMode = (process.argv[2] ?? 'ocsf') as LogMode;
const queries = Number(process.argv[3] ?? '500000');
const rounds = Number(process.argv[4] ?? '5');
if (!LOG_MODES.includes(logMode)) throw new Error(`log mode one of ${LOG_MODES.join('|')}`);
/** Queries between yields to the event loop, so the log destination can write what the loop produced. */
const QUERIES_PER_YIELD = 10_000;
const NAMES = 100;

const bench = await startBenchDns({ names: NAMES, logMode, logFile: '/dev/null', guard: 'unlimited' });
const info: DnsRequestInfo = { transport: 'udp', remote: { ip: '127.0.0.1', port: 40_000 } };
const sets = {
  allowed: Array.from({ length: NAMES }, (_, i) => buildQuery(`allowed-${i}.bench.test`, 'A', { id: i })),
  refused: Array.from({ length: NAMES }, (_, i) => buildQuery(`refused-${i}.other.test`, 'A', { id: i })),
};
// Warm the wire cache: each allowed name resolved and mapped once.
for (const message of [...sets.allowed, ...sets.refused]) await bench.handler.answer(message, info);

async function round(messages: readonly Buffer[]): Promise<number> {
  const before = process.cpuUsage();
  for (let done = 0; done < queries; ) {
    const end = Math.min(queries, done + QUERIES_PER_YIELD);
    for (; done < end; done++) {
      const message = messages[done % messages.length] as Buffer;
      // A mapping that expired (30 s TTL) is resolved again, as the server would.
      const out = bench.handler.answer(message, info);
      if (out instanceof Promise) await out;
    }
    await setImmediate();
  }
  const used = process.cpuUsage(before);
  return ((used.user + used.system) * 1000) / queries;
}

const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const out: string[] = [];
for (const [name, messages] of Object.entries(sets)) {
  await round(messages);
  const ns: number[] = [];
  for (let r = 0; r < rounds; r++) ns.push(await round(messages));
  out.push(`${name} ${median(ns).toFixed(0)} ns/query (rounds: ${ns.map((n) => n.toFixed(0)).join(' ')})`);
}
await bench.close();
process.stdout.write(`${logMode}: ${out.join('; ')}; events written ${bench.events()}\n`);
process.exit(0);
