// A policy DNS with two replay workers on a test clock, as a child process on the image's Node (22: dgram reusePort),
// for test/integration/dns-workers.test.ts and test/regressions/issue-33-dns-loop-replay-workers.test.ts. Prints
// {"port":N} once it and its workers listen, then obeys one command per stdin line and answers each with one JSON
// line: `stats` (the workers' counts, the refusals over the refused-name bucket, and the policy refusals' and rate
// limit's events), `tick` (the clock passes a limit report's interval and policy DNS reports), `kill` (ends the newest
// worker thread; answers once boundary has seen it die and, if it restarts it, once the new one listens), `expire`
// (the upstream now says NXDOMAIN, the clock passes the mapping's expiry, the pool is swept), `loop N` (N lookups of
// the allowed name by an upstream resolver whose nameserver is this policy DNS, as behind a DNS redirect that does not
// exempt boundary: their failures, and how many datagrams the workers passed on meanwhile) and `close`. Every name but
// the one allowed is refused, on a refused-name bucket of WORKERS_CHILD_REFUSAL_BURST that does not refill within a
// test.
// Run: node --import tsx test/harness/dns-workers-child.ts

import { createInterface } from 'node:readline';
import { createPolicyDns } from '../../src/dns/policy-dns.js';
import { createOwnQueries } from '../../src/dns/own-queries.js';
import { createDnsServer } from '../../src/dns/server.js';
import { createUpstreamResolver } from '../../src/dns/upstream.js';
import type { Worker } from 'node:worker_threads';
import { createReplayWorkers, spawnReplayWorker } from '../../src/dns/workers.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import { LIMIT_REPORT_INTERVAL_MS } from '../../src/net/lookup-tally.js';
import { MAX_MAPPING_TTL_SECONDS } from '../../src/net/synthetic-budget.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { testClock } from './clock.js';
import { stubPolicy } from './dns-policy.js';
import { fakeResolver } from './fake-resolver.js';
import { testLookupGate } from './lookup-gate.js';

/** The one name the policy allows (test/integration/dns-workers.test.ts asks it). */
const WORKERS_CHILD_NAME = 'api.example.test';
/** Refusals answered in full before REFUSED (the test repeats it: importing this file would start the child). */
const WORKERS_CHILD_REFUSAL_BURST = 40;

const clock = testClock();
const resolver = fakeResolver({ [WORKERS_CHILD_NAME]: { addresses: ['93.184.216.34'], ttlSeconds: MAX_MAPPING_TTL_SECONDS } });
const policy = stubPolicy([{ host: WORKERS_CHILD_NAME, ports: [443] }]);
const pool = createSyntheticPool({ epoch: 0, now: clock.now });
/** NET:REFUSE events of policy refusals, and the queries the rate limit's reports count. */
let refuseEvents = 0;
let limitedQueries = 0;
const sink = {
  emit(event: AuditEvent): void {
    if (event.activity !== 'REFUSE') return;
    if (event.statusDetail === 'policy_dns_rate_limited') {
      if (event.unmapped?.limit === 'refused') limitedQueries += Number(event.unmapped.queries);
    } else refuseEvents++;
  },
};
const ownQueries = createOwnQueries();
const threads: Worker[] = [];
const exits: boolean[] = [];
const workers = createReplayWorkers({
  count: 2,
  sink,
  now: clock.now,
  pool,
  maxEntries: 64,
  ownPorts: ownQueries.sharedPorts(),
  onExit: (_worker, _code, restarted) => exits.push(restarted),
  spawn(setup) {
    const thread = spawnReplayWorker(setup);
    threads.push(thread);
    return thread;
  },
  onError: (err) => process.stderr.write(`replay worker error: ${String(err)}\n`),
});
const dns = createPolicyDns({
  policy: () => policy,
  lookups: testLookupGate(resolver, { now: clock.now, sink, policy: () => policy }),
  pool,
  sink,
  now: clock.now,
  replicas: workers.replicas,
  refusalLimits: { perSecond: 0.001, burst: WORKERS_CHILD_REFUSAL_BURST },
  ownQueries,
});
const server = createDnsServer({ host: '127.0.0.1', port: 0, handler: dns.handler, reusePort: true });
await server.start();
await workers.start(server);
const looping = createUpstreamResolver({ servers: [{ host: '127.0.0.1', port: server.address().port }], ownQueries });
process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);

for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'stats') {
    process.stdout.write(`${JSON.stringify({ ...workers.stats(), refusalsOverLimit: dns.stats().refusalsOverLimit, refuseEvents, limitedQueries })}\n`);
  } else if (line === 'tick') {
    clock.advance(LIMIT_REPORT_INTERVAL_MS);
    dns.tick();
    process.stdout.write(`${JSON.stringify({ ticked: true })}\n`);
  } else if (line === 'kill') {
    const seen = exits.length;
    await threads.at(-1)?.terminate();
    // The exit is reported on a later turn; a restarted worker counts as running once it listens.
    while (exits.length === seen || (exits.at(-1) === true && workers.running() < 2)) await new Promise((resolve) => setTimeout(resolve, 10));
    process.stdout.write(`${JSON.stringify({ restarted: exits.at(-1), running: workers.running() })}\n`);
  } else if (line.startsWith('loop ')) {
    const before = workers.stats().passed;
    const failures: string[] = [];
    for (let i = 0; i < Number(line.slice('loop '.length)); i++) {
      const result = await looping.resolve(WORKERS_CHILD_NAME, 4);
      failures.push(result.ok ? `answered ${result.addresses.join(',')}` : result.failure);
    }
    process.stdout.write(`${JSON.stringify({ failures, passed: workers.stats().passed - before })}\n`);
  } else if (line === 'expire') {
    resolver.set(WORKERS_CHILD_NAME, 'nxdomain');
    clock.advance(MAX_MAPPING_TTL_SECONDS * 1_000 + 1);
    const expired = pool.sweep().length;
    process.stdout.write(`${JSON.stringify({ expired })}\n`);
  } else if (line === 'close') {
    await workers.close();
    await server.close();
    process.stdout.write(`${JSON.stringify({ closed: true })}\n`);
    // stdin, still open on the test's side, would keep this process alive.
    process.exit(0);
  }
}
