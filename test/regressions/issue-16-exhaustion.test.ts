// Regression of issue 16, "Exhaustion" (`issues show 16`): a workload holding a wildcard endpoint sent unique names
// until the epoch's synthetic window (512 addresses, never rewound) was gone; from then on every new name, the
// workload's real API among them, got SERVFAIL until restart, and each refused query wrote a finding and a
// NET:REFUSE. Now new mappings are limited per second and per endpoint contract, addresses come back after a
// quarantine, and a refusal writes one finding per interval with its count.

import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { decode } from 'dns-packet';
import { MAPPING_REFUSAL_REPORT_INTERVAL_MS } from '../../src/dns/mapping-refusals.js';
import { createPolicyDns } from '../../src/dns/policy-dns.js';
import { createDnsServer } from '../../src/dns/server.js';
import type { Resolver } from '../../src/net/resolver.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import { SYNTHETIC_QUARANTINE_MS } from '../../src/net/synthetic-budget.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { testClock } from '../harness/clock.js';
import { buildQuery, rcodeOf, udpQuery } from '../harness/dns-client.js';
import { dnsClient } from '../harness/dns-mux-client.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';
import { echoRoundTrip, metric } from '../harness/liveness.js';
import { testLookupGate, UNLIMITED_NEW_NAMES } from '../harness/lookup-gate.js';
import { type EchoServer, echoServer } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

/** The flood stops at whichever comes first. */
const FLOOD_MS = 3_000;
const FLOOD_NAMES = 20_000;
/** Queries of the flood outstanding at once: below the server's MAX_UDP_IN_FLIGHT, so none is dropped. */
const FLOOD_WINDOW = 32;
/** The allowed name is asked (and connected to) on every tick of this period. */
const TICK_MS = 100;
/** After the flood, ticks within which a new name under the flooded wildcard must be answered again. */
const RECOVERY_TICKS = 30;
const EXCHANGE_TIMEOUT_MS = 2_000;

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

/** Unique names under the wildcard, as fast as the server answers them, until FLOOD_MS or FLOOD_NAMES. */
function flood(dnsPort: number): Promise<{ sent: number; rcodes: Map<string, number> }> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    const rcodes = new Map<string, number>();
    const started = Date.now();
    let sent = 0;
    let outstanding = 0;
    let answered = 0;
    let finished = false;
    const send = (): void => {
      while (outstanding < FLOOD_WINDOW && sent < FLOOD_NAMES && Date.now() - started < FLOOD_MS) {
        socket.send(buildQuery(`f${sent}.flood.example.test`, 'A', { id: sent & 0xffff }), dnsPort, '127.0.0.1');
        sent++;
        outstanding++;
      }
      if (outstanding === 0) finish();
    };
    // A datagram lost on the way would stall the window: a period with no answer at all frees it.
    let seen = 0;
    const watchdog = setInterval(() => {
      if (answered === seen) outstanding = 0;
      seen = answered;
      send();
    }, TICK_MS);
    function finish(): void {
      if (finished) return;
      finished = true;
      clearInterval(watchdog);
      socket.close();
      resolve({ sent, rcodes });
    }
    socket.on('message', (reply) => {
      const rcode = rcodeOf(decode(reply));
      rcodes.set(rcode, (rcodes.get(rcode) ?? 0) + 1);
      outstanding--;
      answered++;
      send();
    });
    send();
  });
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
    const api = await client.ask('api.example.test');
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
        const again = await client.ask('api.example.test');
        if (again.rcode !== 'NOERROR' || again.ip !== api.ip) problems.push(`api.example.test at ${clock.now()}: ${again.rcode} ${again.ip}`);
      }
      if (!askedLate && i >= FLOOD_NAMES / 2) {
        askedLate = true;
        const late = await client.ask('late.example.test');
        if (late.rcode !== 'NOERROR') problems.push(`late.example.test, first asked during the flood: ${late.rcode}`);
        record('late.example.test', late);
      }
    }
    releaseApi();
    // After the flood the wildcard's budget refills: a new name under it is answered again.
    clock.advance(1_000);
    const after = await client.ask('after.flood.example.test');
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

describe('issue 16: a flood of unique names under a wildcard', () => {
  let b: RunningBoundary;
  let echo: EchoServer;

  before(async () => {
    echo = await echoServer();
    b = await startBoundary({
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
    for (let i = 0; i < FLOOD_NAMES; i++) b.resolver.set(`f${i}.flood.example.test`, { addresses: ['127.0.0.1'], ttlSeconds: 1 });
  });

  after(async () => {
    await b?.close();
    await echo?.close();
  });

  it('keeps the allowed names answering and connecting, refuses the excess, and reports it once per interval', async (t) => {
    const dnsPort = b.dnsPort!;
    const ask = async (name: string) => {
      const reply = await udpQuery(dnsPort, buildQuery(name));
      return { rcode: rcodeOf(reply), ip: String((reply.answers?.[0] as { data?: unknown } | undefined)?.data ?? '') };
    };
    const first = await ask('api.example.test');
    assert.equal(first.rcode, 'NOERROR');
    // One connection held open through the flood, besides the new one opened on every tick.
    const held: Socket = connect({ host: first.ip, port: echo.port });
    held.on('error', () => undefined);
    const problems: string[] = [];
    const checks: Promise<void>[] = [];
    let ticks = 0;
    let flooding = true;
    let afterFlood = 0;
    let recovered!: (value: boolean) => void;
    const recovery = new Promise<boolean>((resolve) => {
      recovered = resolve;
    });
    // The load loop's clock: every tick asks for the allowed name and connects through its answer, during the
    // flood and after it, and after it also asks a new name under the flooded wildcard until that is answered.
    const ticker = setInterval(() => {
      const tick = ++ticks;
      const probe = !flooding && ++afterFlood <= RECOVERY_TICKS;
      if (!flooding && afterFlood > RECOVERY_TICKS) recovered(false);
      checks.push(
        (async () => {
          const answer = await ask('api.example.test');
          if (answer.rcode !== 'NOERROR' || answer.ip === '') problems.push(`tick ${tick}: api.example.test ${answer.rcode}`);
          else if ((await echoOnce(answer.ip, echo.port, `tick ${tick}`)) !== `tick ${tick}`) problems.push(`tick ${tick}: echo through ${answer.ip} failed`);
          // A name first asked in the middle of the flood, under another endpoint: its contract has its own share.
          if (tick === 10) {
            const late = await ask('late.example.test');
            if (late.rcode !== 'NOERROR') problems.push(`late.example.test ${late.rcode} during the flood`);
          }
          // Once the flood stops, the wildcard's budget refills: a new name under it is answered within a few ticks.
          if (probe && (await ask('after.flood.example.test')).rcode === 'NOERROR') recovered(true);
        })().catch((err: Error) => void problems.push(`tick ${tick}: ${err.message}`)),
      );
    }, TICK_MS);
    const result = await flood(dnsPort);
    const floodTicks = ticks;
    flooding = false;
    const wasRecovered = await withinDeadline(recovery, 'the recovery probe', (RECOVERY_TICKS + 10) * TICK_MS);
    clearInterval(ticker);
    await withinDeadline(Promise.all(checks), 'the last allowed-name checks');
    held.destroy();
    assert.deepEqual(problems, []);
    assert.ok(floodTicks >= 10, `${floodTicks} ticks of allowed-name checks ran during the flood`);
    assert.ok(wasRecovered, 'a new name under the flooded wildcard is answered again after the flood');
    const refused = result.rcodes.get('SERVFAIL') ?? 0;
    assert.ok(refused > 0, `the flood was held to the limit (${JSON.stringify([...result.rcodes])} of ${result.sent})`);
    const stats = b.boundary.transparent.pool()!.stats();
    assert.ok(stats.reserved[4] < stats.capacity[4], `the window never ran out: ${stats.reserved[4]}/${stats.capacity[4]}`);

    // Findings and refusals about the pool: at most one per kind per interval, never one per query.
    const poolEvents = b.log.events().filter((e) => e.class_uid !== 4003 && POOL_DETAILS.includes(String(e.status_detail)));
    const intervals = Math.ceil((FLOOD_MS + RECOVERY_TICKS * TICK_MS) / MAPPING_REFUSAL_REPORT_INTERVAL_MS) + 1;
    for (const detail of POOL_DETAILS) {
      const n = poolEvents.filter((e) => e.status_detail === detail).length;
      assert.ok(n <= intervals, `${n} ${detail} events for ${refused} refused queries`);
    }
    assert.ok(poolEvents.length > 0, 'the refusals were reported');
    t.diagnostic(`flood: ${result.sent} names, answers ${JSON.stringify([...result.rcodes])}; ${floodTicks} ticks; pool ${JSON.stringify(stats)}; ${poolEvents.length} pool events`);
    assert.ok((await metric(b, 'boundary_dns_queries_total{rcode="SERVFAIL",outcome="mapping-rate-limited"}')) + (await metric(b, 'boundary_dns_queries_total{rcode="SERVFAIL",outcome="mapping-limit"}')) > 0);
  });
});
