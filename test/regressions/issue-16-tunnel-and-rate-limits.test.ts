// Regression of issue 16, "Tunnelling and rate limits": any single label under an allowed wildcard was resolved upstream
// at once, so ~63 bytes per query could be tunnelled to the zone's authoritative server with no limit, and a flood of
// refused names cost a full answer and two events each. Now new names and refusals go through token buckets on the
// injected clock (dns/rate-limit.ts), and tunnelling-shaped names raise a Detection Finding or, enforced, are refused
// (dns/guard.ts, dns/tunnel-detect.ts). Real policy DNS on loopback, real dig, a counting upstream.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { createDnsMetrics, meteredDnsSink } from '../../src/dns/metrics.js';
import { createPolicyDns } from '../../src/dns/policy-dns.js';
import { REFUSED_NAMES_BURST } from '../../src/dns/rate-limit.js';
import { createDnsServer } from '../../src/dns/server.js';
import { MAX_NEW_NAMES_PER_PARENT, NEW_NAMES_BURST as UNIQUE_NAMES_BURST, NEW_NAMES_PER_SECOND as UNIQUE_NAMES_PER_SECOND } from '../../src/net/lookup-gate.js';
import { LIMIT_REPORT_INTERVAL_MS } from '../../src/net/lookup-tally.js';
import type { TunnelDetectionMode } from '../../src/net/tunnel-detect.js';
import { createUpstreamResolver } from '../../src/dns/upstream.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import { Registry } from '../../src/telemetry/prom.js';
import { testClock } from '../harness/clock.js';
import { type EndpointSpec, stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';
import { startDnsFixture } from '../harness/dns-upstream.js';
import { testLookupGate } from '../harness/lookup-gate.js';

const run = promisify(execFile);
const ENDPOINTS: readonly EndpointSpec[] = [
  { host: 'api.example.test', ports: [443] },
  { host: '*.t.example.test', ports: [443] },
];

/** Policy DNS on 127.0.0.1:0 over a counting loopback upstream, with a test clock and metrics on a fresh registry. */
async function start(t: TestContext, tunnelDetection?: TunnelDetectionMode) {
  const fixture = await startDnsFixture({ 'api.example.test': { a: ['127.0.0.2'], ttl: 30 } });
  const clock = testClock();
  const policy = stubPolicy(ENDPOINTS);
  const pool = createSyntheticPool({ epoch: 0, now: clock.now });
  const sink = collectingSink();
  const registry = new Registry();
  const metrics = createDnsMetrics(registry, { pool: () => pool, listeners: () => 0, connections: () => 0 });
  const resolver = createUpstreamResolver({ servers: [{ host: fixture.host, port: fixture.port }], timeoutMs: 500 });
  const lookups = testLookupGate(resolver, { now: clock.now, sink: meteredDnsSink(sink, metrics), policy: () => policy, ...(tunnelDetection === undefined ? {} : { tunnelDetection }) });
  const dns = createPolicyDns({
    policy: () => policy,
    lookups,
    pool,
    sink: meteredDnsSink(sink, metrics),
    now: clock.now,
    allowLoopback: true,
  });
  const server = createDnsServer({ host: '127.0.0.1', port: 0, handler: dns.handler });
  await server.start();
  const dir = await mkdtemp(join(tmpdir(), 'issue-16-'));
  t.after(async () => {
    await server.close();
    await fixture.close();
    await rm(dir, { recursive: true, force: true });
  });
  let batches = 0;
  /** Asks every name with one dig in batch mode (`-f`), in order; the status of each answer. */
  async function dig(names: readonly string[]): Promise<string[]> {
    const file = join(dir, `batch-${batches++}.txt`);
    await writeFile(file, names.map((n) => `${n} A\n`).join(''));
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(server.address().port), '+tries=1', '+time=3', '+noall', '+comments', '-f', file], { maxBuffer: 16 * 1_048_576 });
    return [...stdout.matchAll(/status: ([A-Z]+)/g)].map((m) => m[1] ?? '');
  }
  const counted = async (name: string): Promise<number> => ((await registry.getSingleMetric(name)?.get())?.values ?? []).reduce((n, v) => n + v.value, 0);
  /** The server's tick: policy DNS's held-back counts and the lookup gate's. */
  const tick = (): void => {
    dns.tick();
    lookups.tick();
  };
  return { fixture, clock, sink, dns, lookups, tick, dig, counted };
}

function names(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}.t.example.test`);
}
function tally(statuses: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}

describe('issue 16: new names under an allowed wildcard are rate limited', () => {
  it('sends at most the burst of new names upstream, answers the rest REFUSED, and refills on the clock', async (t) => {
    const s = await start(t, 'off');
    const over = 50;
    const statuses = await s.dig(names('n', UNIQUE_NAMES_BURST + over));
    assert.equal(s.fixture.count(), UNIQUE_NAMES_BURST, 'only the burst reached the upstream');
    assert.deepEqual(tally(statuses), { NXDOMAIN: UNIQUE_NAMES_BURST, REFUSED: over });
    assert.ok(statuses.slice(UNIQUE_NAMES_BURST).every((st) => st === 'REFUSED'), 'the over-limit names are the last ones');
    // A name an endpoint lists exactly is not a channel: it is never charged, so the flood does not hold it up.
    assert.deepEqual(await s.dig(['api.example.test']), ['NOERROR']);
    s.clock.advance(1_000);
    const later = await s.dig([...names('m', UNIQUE_NAMES_PER_SECOND * 2)]);
    assert.deepEqual(tally(later), { NXDOMAIN: UNIQUE_NAMES_PER_SECOND, REFUSED: UNIQUE_NAMES_PER_SECOND });
    assert.equal(s.fixture.count(), UNIQUE_NAMES_BURST + 1 + UNIQUE_NAMES_PER_SECOND);
    // One report at onset; the rest arrive as one count once the interval has passed.
    const reports = () => s.sink.events.filter((e) => e.statusDetail === 'policy_dns_rate_limited');
    assert.equal(reports().length, 1);
    assert.equal(reports()[0]?.unmapped?.limit, 'unique');
    assert.equal(s.sink.events.filter((e) => e.class === 'DNS' && e.unmapped?.rcode === 'REFUSED').length, 0, 'no per-query event over the limit');
    s.clock.advance(LIMIT_REPORT_INTERVAL_MS);
    s.tick();
    assert.equal(reports().length, 2);
    assert.equal(reports().reduce((n, e) => n + Number(e.unmapped?.queries), 0), over + UNIQUE_NAMES_PER_SECOND);
    assert.equal(await s.counted('boundary_dns_rate_limited_total'), over + UNIQUE_NAMES_PER_SECOND);
    assert.equal(s.lookups.stats().rateLimited, over + UNIQUE_NAMES_PER_SECOND);
  });

  it('answers refusals over their rate REFUSED from the query, with no decision events and no cache churn', async (t) => {
    const s = await start(t, 'off');
    assert.deepEqual(await s.dig(['api.example.test']), ['NOERROR']);
    const over = 40;
    const denied = Array.from({ length: REFUSED_NAMES_BURST + over }, (_, i) => `denied${i}.example.test`);
    const statuses = await s.dig(denied);
    assert.deepEqual(tally(statuses), { NXDOMAIN: REFUSED_NAMES_BURST, REFUSED: over });
    assert.equal(s.sink.events.filter((e) => e.statusDetail === 'policy_dns_ineligible' && e.class === 'NET').length, REFUSED_NAMES_BURST);
    assert.equal(s.sink.events.filter((e) => e.class === 'DNS' && e.dst?.host?.startsWith('denied')).length, REFUSED_NAMES_BURST);
    // A repeat of a cached refusal is over the limit too; the allowed answer is still served from the cache.
    assert.deepEqual(await s.dig(['denied0.example.test', 'api.example.test']), ['REFUSED', 'NOERROR']);
    assert.equal(s.fixture.count(), 1, 'nothing but the allowed name ever went upstream');
    assert.equal(s.dns.stats().refusalsOverLimit, over + 1);
  });
});

describe('issue 16: tunnelling-shaped names under an allowed wildcard', () => {
  const exfil = Array.from({ length: 5 }, (_, i) => `${Buffer.alloc(30, i + 1).toString('hex')}${i}.t.example.test`);

  it('enforce: refuses them without asking upstream and raises one Detection Finding', async (t) => {
    const s = await start(t, 'enforce');
    assert.deepEqual(await s.dig(exfil), exfil.map(() => 'REFUSED'));
    assert.equal(s.fixture.count(), 0, 'no tunnelled name reached the upstream');
    const findings = s.sink.events.filter((e) => e.class === 'FINDING');
    assert.equal(findings.length, 1, 'one finding for the parent, the rest counted');
    assert.equal(findings[0]?.statusDetail, 'policy_dns_tunnel_suspected');
    assert.equal(findings[0]?.action, 'DENIED');
    assert.deepEqual(findings[0]?.unmapped?.signals, ['hex-encoded']);
    assert.equal(findings[0]?.unmapped?.parent, 't.example.test');
    // Ordinary names under the same wildcard still resolve.
    assert.deepEqual(await s.dig(['www.t.example.test']), ['NXDOMAIN']);
    assert.equal(s.fixture.count('www.t.example.test'), 1);
    s.clock.advance(LIMIT_REPORT_INTERVAL_MS);
    s.tick();
    assert.equal(s.sink.events.filter((e) => e.class === 'FINDING').at(-1)?.unmapped?.flagged_names, exfil.length - 1);
    assert.equal(await s.counted('boundary_dns_tunnel_names_total'), exfil.length);
  });

  it('audit (the default): answers them as before and raises the finding', async (t) => {
    const s = await start(t);
    assert.deepEqual(await s.dig(exfil), exfil.map(() => 'NXDOMAIN'));
    assert.equal(s.fixture.count(), exfil.length);
    const [finding] = s.sink.events.filter((e) => e.class === 'FINDING');
    assert.equal(finding?.action, 'ALLOWED');
    assert.equal(finding?.unmapped?.mode, 'audit');
  });

  it('enforce: counts new names per parent and refuses past the window limit, whatever they spell', async (t) => {
    const s = await start(t, 'enforce');
    const statuses = await s.dig(names('host', MAX_NEW_NAMES_PER_PARENT + 5));
    assert.deepEqual(tally(statuses), { NXDOMAIN: MAX_NEW_NAMES_PER_PARENT, REFUSED: 5 });
    assert.equal(s.fixture.count(), MAX_NEW_NAMES_PER_PARENT);
    assert.deepEqual(s.sink.events.find((e) => e.class === 'FINDING')?.unmapped?.signals, ['many-names']);
    assert.deepEqual(await s.dig(['api.example.test']), ['NOERROR'], 'a listed name is never counted as a tunnel');
  });
});
