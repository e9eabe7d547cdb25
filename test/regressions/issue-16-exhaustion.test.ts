// Regression of issue 16, "Exhaustion" (`issues show 16`): a workload holding a wildcard endpoint sent unique names
// until the epoch's synthetic window (512 addresses, never rewound) was gone; from then on every new name, the
// workload's real API among them, got SERVFAIL until restart, and each refused query wrote a finding and a
// NET:REFUSE. Now new mappings are limited per second and per endpoint contract, addresses come back after a
// quarantine, and a refusal writes one finding per interval with its count. Both floods run on an injected clock
// and count their ticks in it (issue 28: the wall-clock flood failed on a loaded machine).

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { MAPPING_REFUSAL_REPORT_INTERVAL_MS } from '../../src/dns/mapping-refusals.js';
import { createPolicyDns } from '../../src/dns/policy-dns.js';
import { createDnsServer } from '../../src/dns/server.js';
import type { Resolver } from '../../src/net/resolver.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import { SYNTHETIC_QUARANTINE_MS } from '../../src/net/synthetic-budget.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { testClock } from '../harness/clock.js';
import { dnsClient } from '../harness/dns-mux-client.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';
import { echoRoundTrip, metric } from '../harness/liveness.js';
import { testLookupGate, UNLIMITED_NEW_NAMES } from '../harness/lookup-gate.js';
import { type EchoServer, echoServer } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

const FLOOD_NAMES = 20_000;
/** The flood through the whole boundary: past one refusal report interval, with a connection on every tick. */
const BOUNDARY_FLOOD_NAMES = 8_000;
/** Queries of the flood outstanding at once: below the server's MAX_UDP_IN_FLIGHT, so none is dropped. */
const FLOOD_WINDOW = 32;
/** The allowed name is asked (and connected to) on every tick of this period of the injected clock. */
const TICK_MS = 100;
/** The tick of the flood on which a name under another endpoint is first asked. */
const LATE_TICK = 10;
/** After the flood, ticks within which a new name under the flooded wildcard must be answered again. */
const RECOVERY_TICKS = 30;
/** Bounds a hang only (a lost datagram, a stuck connection): every exchange is on loopback. */
const EXCHANGE_TIMEOUT_MS = 30_000;

const POOL_DETAILS = ['policy_dns_pool_exhausted', 'policy_dns_mapping_rate', 'policy_dns_mapping_limit'];
/** Simulated time per flood query on the injected clock: 1,000 new names a second, the red team's order of magnitude. */
const SIMULATED_MS_PER_NAME = 1;
const PUBLIC = '93.184.216.34';

/** Connects through capture to `ip:port`, echoes `text` and closes; rejects on error or after EXCHANGE_TIMEOUT_MS. */
async function echoOnce(ip: string, port: number, text: string): Promise<string> {
  const socket = connect({ host: ip, port });
  socket.on('error', () => undefined);
  try {
    await withinDeadline(once(socket, 'connect'), `connect to ${ip}:${port}`, EXCHANGE_TIMEOUT_MS);
    return await withinDeadline(echoRoundTrip(socket, text), `echo through ${ip}:${port}`, EXCHANGE_TIMEOUT_MS);
  } finally {
    socket.destroy();
  }
}

describe('issue 16: policy DNS under a flood of unique names, on an injected clock', () => {
  it('never hands out an address twice too early, keeps allowed names answering, and reports once per interval', async (t) => {
    const clock = testClock();
    // Every name resolves; api.example.test with a short TTL so it is refreshed many times during the flood.
    const resolver: Resolver = {
      resolve: async (name) => ({ ok: true, addresses: [PUBLIC], ttlSeconds: name === 'api.example.test' ? 5 : 1 }),
    };
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const sink = collectingSink();
    const policy = stubPolicy([
      { host: 'api.example.test', ports: [443] },
      { host: 'late.example.test', ports: [443] },
      { host: '*.flood.example.test', ports: [443] },
    ]);
    const dns = createPolicyDns({
      policy: () => policy,
      // The name-rate limit in front of the pool (issue 16, part B) raised out of the way: the pool holds on its own.
      lookups: testLookupGate(resolver, { now: clock.now, sink, policy: () => policy, newNames: UNLIMITED_NEW_NAMES, tunnelDetection: 'off' }),
      pool,
      sink,
      now: clock.now,
      refusalLimits: { perSecond: 1e9, burst: 1e9 },
    });
    const server = createDnsServer({ host: '127.0.0.1', port: 0, handler: dns.handler });
    await server.start();
    const client = dnsClient(server.address().port);
    t.after(async () => {
      client.close();
      await server.close();
    });

    // Who each address was given to, and until when an answer or a connection could still lead there.
    const owners = new Map<string, { name: string; until: number }>();
    const problems: string[] = [];
    const record = (name: string, reply: { rcode: string; ip: string; ttl: number }): void => {
      if (reply.rcode !== 'NOERROR') return;
      const before = owners.get(reply.ip);
      if (before !== undefined && before.name !== name && clock.now() < before.until + SYNTHETIC_QUARANTINE_MS) {
        problems.push(`${reply.ip} went to ${name} at ${clock.now()}, before ${before.name}'s quarantine was over`);
      }
      const until = Math.max(clock.now() + reply.ttl * 1_000, before?.name === name ? before.until : 0);
      owners.set(reply.ip, { name, until });
    };
    const api = await client.ask('api.example.test', EXCHANGE_TIMEOUT_MS);
    assert.equal(api.rcode, 'NOERROR');
    record('api.example.test', api);
    // The workload's own connection to its API stays open through the flood, as capture would hold it.
    const releaseApi = pool.hold(api.ip);
    owners.set(api.ip, { name: 'api.example.test', until: Number.POSITIVE_INFINITY });

    const rcodes = new Map<string, number>();
    let lastTick = clock.now();
    let lastSweep = clock.now();
    let askedLate = false;
    for (let i = 0; i < FLOOD_NAMES; i += FLOOD_WINDOW) {
      const names = Array.from({ length: FLOOD_WINDOW }, (_, j) => `f${i + j}.flood.example.test`);
      const replies = await Promise.all(names.map((name) => client.ask(name, EXCHANGE_TIMEOUT_MS)));
      replies.forEach((reply, j) => {
        rcodes.set(reply.rcode, (rcodes.get(reply.rcode) ?? 0) + 1);
        record(names[j]!, reply);
      });
      clock.advance(FLOOD_WINDOW * SIMULATED_MS_PER_NAME);
      // The load loop's clock drives the rest: the server's one-second sweep, and the allowed name every 100 ms.
      if (clock.now() - lastSweep >= 1_000) {
        lastSweep = clock.now();
        pool.sweep();
      }
      if (clock.now() - lastTick >= TICK_MS) {
        lastTick = clock.now();
        const again = await client.ask('api.example.test', EXCHANGE_TIMEOUT_MS);
        if (again.rcode !== 'NOERROR' || again.ip !== api.ip) problems.push(`api.example.test at ${clock.now()}: ${again.rcode} ${again.ip}`);
      }
      if (!askedLate && i >= FLOOD_NAMES / 2) {
        askedLate = true;
        const late = await client.ask('late.example.test', EXCHANGE_TIMEOUT_MS);
        if (late.rcode !== 'NOERROR') problems.push(`late.example.test, first asked during the flood: ${late.rcode}`);
        record('late.example.test', late);
      }
    }
    releaseApi();
    // After the flood the wildcard's budget refills: a new name under it is answered again.
    clock.advance(1_000);
    const after = await client.ask('after.flood.example.test', EXCHANGE_TIMEOUT_MS);
    if (after.rcode !== 'NOERROR') problems.push(`after the flood: ${after.rcode}`);

    assert.deepEqual(problems, []);
    assert.ok(askedLate);
    assert.equal(rcodes.get('TIMEOUT'), undefined);
    assert.ok((rcodes.get('SERVFAIL') ?? 0) > FLOOD_NAMES / 2, `the flood was held to the limit: ${JSON.stringify([...rcodes])}`);
    const stats = pool.stats();
    assert.ok(stats.reserved[4] < stats.capacity[4], `${stats.reserved[4]}/${stats.capacity[4]}`);
    const simulatedMs = FLOOD_NAMES * SIMULATED_MS_PER_NAME + 1_000;
    const findings = sink.events.filter((e) => e.class !== 'DNS' && POOL_DETAILS.includes(e.statusDetail ?? ''));
    for (const detail of POOL_DETAILS) {
      const n = findings.filter((e) => e.statusDetail === detail).length;
      assert.ok(n <= Math.ceil(simulatedMs / MAPPING_REFUSAL_REPORT_INTERVAL_MS) + 1, `${n} ${detail} events in ${simulatedMs} ms`);
    }
    assert.equal(findings.filter((e) => e.class === 'FINDING').length > 0, true, 'the refusals were reported');
    t.diagnostic(`${FLOOD_NAMES} names, answers ${JSON.stringify([...rcodes])}; pool ${JSON.stringify(stats)}; ${findings.length} findings`);
  });
});

describe('issue 16: a flood of unique names under a wildcard, through the whole boundary on an injected clock', () => {
  let b: RunningBoundary;
  let echo: EchoServer;
  const clock = testClock();

  before(async () => {
    echo = await echoServer();
    b = await startBoundary({
      now: clock.now,
      names: {
        'api.example.test': { addresses: ['127.0.0.1'], ttlSeconds: 2 },
        'late.example.test': ['127.0.0.1'],
        'after.flood.example.test': ['127.0.0.1'],
      },
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${echo.port}, protocol: tcp }
      - { host: late.example.test, port: ${echo.port}, protocol: tcp }
    binaries: [{ path: "/**" }]
  tools:
    endpoints:
      - { host: "*.flood.example.test", port: ${echo.port}, protocol: tcp }
    binaries: [{ path: "/**" }]
`,
    });
    for (let i = 0; i < BOUNDARY_FLOOD_NAMES; i++) b.resolver.set(`f${i}.flood.example.test`, { addresses: ['127.0.0.1'], ttlSeconds: 1 });
  });

  after(async () => {
    await b?.close();
    await echo?.close();
  });

  it('keeps the allowed names answering and connecting, refuses the excess, and reports it once per interval', async (t) => {
    // The load loop's clock drives everything: FLOOD_WINDOW names at a time, SIMULATED_MS_PER_NAME each, and with
    // the first window past each TICK_MS of it the allowed name is asked and connected to through its answer, its
    // queries among the flood's. How fast this machine runs changes nothing: the flood has the same ticks whatever
    // the wall clock does.
    const client = dnsClient(b.dnsPort!);
    t.after(() => client.close());
    const pool = b.boundary.transparent.pool()!;
    const first = await client.ask('api.example.test', EXCHANGE_TIMEOUT_MS);
    assert.equal(first.rcode, 'NOERROR');
    // One connection held open through the flood, besides the new one opened on every tick.
    const held: Socket = connect({ host: first.ip, port: echo.port });
    held.on('error', () => undefined);
    t.after(() => held.destroy());
    const problems: string[] = [];
    let ticks = 0;
    const tick = async (): Promise<void> => {
      const n = ++ticks;
      const answer = await client.ask('api.example.test', EXCHANGE_TIMEOUT_MS);
      if (answer.rcode !== 'NOERROR' || answer.ip === '') problems.push(`tick ${n}: api.example.test ${answer.rcode}`);
      else if ((await echoOnce(answer.ip, echo.port, `tick ${n}`)) !== `tick ${n}`) problems.push(`tick ${n}: echo through ${answer.ip} failed`);
      // A name first asked in the middle of the flood, under another endpoint: its contract has its own share.
      if (n === LATE_TICK) {
        const late = await client.ask('late.example.test', EXCHANGE_TIMEOUT_MS);
        if (late.rcode !== 'NOERROR') problems.push(`late.example.test ${late.rcode} during the flood`);
      }
    };

    const rcodes = new Map<string, number>();
    const startedAt = clock.now();
    let lastTick = startedAt;
    let lastSweep = startedAt;
    for (let i = 0; i < BOUNDARY_FLOOD_NAMES; i += FLOOD_WINDOW) {
      const names = Array.from({ length: FLOOD_WINDOW }, (_, j) => `f${i + j}.flood.example.test`);
      const due = clock.now() - lastTick >= TICK_MS;
      if (due) lastTick = clock.now();
      const [replies] = await Promise.all([Promise.all(names.map((name) => client.ask(name, EXCHANGE_TIMEOUT_MS))), due ? tick() : undefined]);
      for (const reply of replies) rcodes.set(reply.rcode, (rcodes.get(reply.rcode) ?? 0) + 1);
      clock.advance(FLOOD_WINDOW * SIMULATED_MS_PER_NAME);
      // The DNS server sweeps once a second of its own; on the injected clock the loop does it, at the same pace.
      if (clock.now() - lastSweep >= 1_000) {
        lastSweep = clock.now();
        pool.sweep();
      }
    }
    const floodTicks = ticks;
    const floodMs = clock.now() - startedAt;

    // After the flood the wildcard's budget refills: a new name under it is answered within a few ticks.
    let recovered = false;
    for (let n = 0; n < RECOVERY_TICKS && !recovered; n++) {
      clock.advance(TICK_MS);
      pool.sweep();
      await tick();
      recovered = (await client.ask('after.flood.example.test', EXCHANGE_TIMEOUT_MS)).rcode === 'NOERROR';
    }

    assert.deepEqual(problems, []);
    // A tick goes with each window that starts TICK_MS or more of the injected clock after the last one.
    const windowsPerTick = Math.ceil(TICK_MS / (FLOOD_WINDOW * SIMULATED_MS_PER_NAME));
    assert.equal(floodTicks, Math.floor((Math.ceil(BOUNDARY_FLOOD_NAMES / FLOOD_WINDOW) - 1) / windowsPerTick), 'every tick of the flood asked and connected');
    assert.ok(floodTicks >= LATE_TICK);
    assert.ok(recovered, 'a new name under the flooded wildcard is answered again after the flood');
    assert.equal(rcodes.get('TIMEOUT'), undefined);
    const refused = rcodes.get('SERVFAIL') ?? 0;
    assert.ok(refused > 0, `the flood was held to the limit (${JSON.stringify([...rcodes])})`);
    const stats = pool.stats();
    assert.ok(stats.reserved[4] < stats.capacity[4], `the window never ran out: ${stats.reserved[4]}/${stats.capacity[4]}`);

    // Findings and refusals about the pool: at most one per kind per interval of the injected clock, never one per query.
    const poolEvents = b.log.events().filter((e) => e.class_uid !== 4003 && POOL_DETAILS.includes(String(e.status_detail)));
    const intervals = Math.ceil((clock.now() - startedAt) / MAPPING_REFUSAL_REPORT_INTERVAL_MS) + 1;
    for (const detail of POOL_DETAILS) {
      const n = poolEvents.filter((e) => e.status_detail === detail).length;
      assert.ok(n <= intervals, `${n} ${detail} events for ${refused} refused queries`);
    }
    assert.ok(poolEvents.length > 0, 'the refusals were reported');
    t.diagnostic(`flood: ${BOUNDARY_FLOOD_NAMES} names in ${floodMs} simulated ms, answers ${JSON.stringify([...rcodes])}; ${floodTicks} ticks; pool ${JSON.stringify(stats)}; ${poolEvents.length} pool events`);
    assert.ok((await metric(b, 'boundary_dns_queries_total{rcode="SERVFAIL",outcome="mapping-rate-limited"}')) + (await metric(b, 'boundary_dns_queries_total{rcode="SERVFAIL",outcome="mapping-limit"}')) > 0);
  });
});
