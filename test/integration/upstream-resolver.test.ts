import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createUpstreamResolver, UPSTREAM_UDP_RESEND_MS } from '../../src/dns/upstream.js';
import { parseHostsFile } from '../../src/net/hosts.js';
import { runResolverContract } from '../contracts/resolver.contract.js';
import { type FixtureEntry, startDnsFixture } from '../harness/dns-upstream.js';

runResolverContract('createUpstreamResolver against a loopback DNS fixture', async (records) => {
  const entries: Record<string, FixtureEntry> = {};
  for (const [name, r] of Object.entries(records)) {
    entries[name] = { a: r.addresses.filter((a) => !a.includes(':')), aaaa: r.addresses.filter((a) => a.includes(':')), ttl: r.ttlSeconds };
  }
  const fixture = await startDnsFixture(entries);
  return { resolver: createUpstreamResolver({ servers: [{ host: fixture.host, port: fixture.port }] }), close: () => fixture.close() };
});

async function withFixture(t: { after(fn: () => Promise<void>): void }, entries: Record<string, FixtureEntry>, timeoutMs?: number) {
  const fixture = await startDnsFixture(entries);
  t.after(() => fixture.close());
  const resolver = createUpstreamResolver({ servers: [{ host: fixture.host, port: fixture.port }], ...(timeoutMs === undefined ? {} : { timeoutMs }) });
  return { fixture, resolver };
}

describe('createUpstreamResolver', () => {
  it('refuses servers that are not IP literals, bad ports and an empty list', () => {
    assert.throws(() => createUpstreamResolver({ servers: [{ host: 'dns.example.test', port: 53 }] }), { code: 'ADDRESS_INVALID' });
    assert.throws(() => createUpstreamResolver({ servers: [{ host: '127.0.0.1', port: 0 }] }), { code: 'ADDRESS_INVALID' });
    assert.throws(() => createUpstreamResolver({ servers: [] }), { code: 'ADDRESS_INVALID' });
  });

  it('answers from the hosts table first, without a DNS query', async (t) => {
    const fixture = await startDnsFixture({ 'api.example.test': { a: ['127.0.0.9'] } });
    t.after(() => fixture.close());
    const hosts = parseHostsFile('127.0.0.7 api.example.test\nfd00::7 v6.example.test\n');
    const resolver = createUpstreamResolver({ servers: [{ host: fixture.host, port: fixture.port }], hosts });
    const result = await resolver.resolve('api.example.test', 4);
    assert.deepEqual(result.ok && result.addresses, ['127.0.0.7']);
    assert.equal(fixture.count(), 0);
    // A hosts entry of the other family does not hide DNS.
    assert.equal((await resolver.resolve('v6.example.test', 4)).ok, false);
    assert.equal(fixture.count('v6.example.test'), 1);
  });

  it('retries over TCP when the UDP reply is truncated, and uses the TCP answer (DN-15)', async (t) => {
    const { fixture, resolver } = await withFixture(t, { 'big.example.test': { a: ['127.0.0.2'], truncate: true } });
    const result = await resolver.resolve('big.example.test', 4);
    assert.deepEqual(result.ok && result.addresses, ['127.0.0.2']);
    assert.deepEqual(fixture.queries.map((q) => q.transport), ['udp', 'tcp']);
  });

  it('follows a CNAME chain in one reply and takes the minimum TTL along it', async (t) => {
    const { fixture, resolver } = await withFixture(t, {
      'www.example.test': { cname: 'edge.example.test', ttl: 300 },
      'edge.example.test': { cname: 'host.cdn.test', ttl: 40 },
      'host.cdn.test': { a: ['127.0.0.3'], ttl: 120 },
    });
    const result = await resolver.resolve('www.example.test', 4);
    assert.deepEqual(result, { ok: true, addresses: ['127.0.0.3'], ttlSeconds: 40 });
    assert.equal(fixture.count(), 1);
  });

  it('asks for the CNAME target itself when the reply stops at the alias', async (t) => {
    const { fixture, resolver } = await withFixture(t, {
      'www.example.test': { cname: 'host.cdn.test', cnameOnly: true, ttl: 10 },
      'host.cdn.test': { a: ['127.0.0.3'], ttl: 60 },
    });
    assert.deepEqual(await resolver.resolve('www.example.test', 4), { ok: true, addresses: ['127.0.0.3'], ttlSeconds: 10 });
    assert.deepEqual(fixture.queries.map((q) => q.name), ['www.example.test', 'host.cdn.test']);
  });

  it('follows 8 CNAME hops, fails a 9-hop chain and a loop with cname-limit (DN-16)', async (t) => {
    const entries: Record<string, FixtureEntry> = {};
    for (let i = 0; i < 9; i++) entries[`h${i}.test`] = { cname: `h${i + 1}.test`, cnameOnly: i % 3 === 0 };
    entries['h9.test'] = { a: ['127.0.0.4'] };
    entries['loop-a.test'] = { cname: 'loop-b.test' };
    entries['loop-b.test'] = { cname: 'loop-a.test' };
    const { resolver } = await withFixture(t, entries);
    assert.deepEqual((await resolver.resolve('h1.test', 4)).ok, true);
    const nine = await resolver.resolve('h0.test', 4);
    assert.equal(!nine.ok && nine.failure, 'cname-limit');
    const loop = await resolver.resolve('loop-a.test', 4);
    assert.equal(!loop.ok && loop.failure, 'cname-limit');
  });

  it('keeps at most 16 addresses, deduplicated, in answer order (DN-17)', async (t) => {
    const a = Array.from({ length: 20 }, (_, i) => `127.0.1.${i % 2 === 0 ? i : i - 1}`);
    a.push(...Array.from({ length: 20 }, (_, i) => `127.0.2.${i}`));
    const { resolver } = await withFixture(t, { 'many.test': { a } });
    const result = await resolver.resolve('many.test', 4);
    assert.ok(result.ok);
    assert.equal(result.addresses.length, 16);
    assert.deepEqual(result.addresses.slice(0, 10), Array.from({ length: 10 }, (_, i) => `127.0.1.${i * 2}`));
    assert.equal(new Set(result.addresses).size, 16);
  });

  it('reports NXDOMAIN, error RCODEs, NODATA, malformed and oversized replies as failure values', async (t) => {
    const { resolver } = await withFixture(t, {
      'fail.test': { rcode: 'SERVFAIL' },
      'refused.test': { rcode: 'REFUSED' },
      'v6only.test': { aaaa: ['fd00::1'] },
      'garbage.test': { malformed: true },
      'huge.test': { oversized: true },
    });
    const failures = await Promise.all(['nope.test', 'fail.test', 'refused.test', 'v6only.test', 'garbage.test', 'huge.test'].map((n) => resolver.resolve(n, 4)));
    assert.deepEqual(failures.map((r) => (r.ok ? 'ok' : r.failure)), ['nxdomain', 'error-response', 'error-response', 'nodata', 'malformed-response', 'oversized-response']);
  });

  it('times out after the per-exchange timeout and then tries the next server (mocked timers)', async (t) => {
    const silent = await startDnsFixture({ 'api.example.test': { silent: true } });
    const good = await startDnsFixture({ 'api.example.test': { a: ['127.0.0.5'] } });
    t.after(() => Promise.all([silent.close(), good.close()]).then(() => {}));
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const alone = createUpstreamResolver({ servers: [{ host: silent.host, port: silent.port }] });
    const pending = alone.resolve('api.example.test', 4);
    t.mock.timers.tick(2_000);
    const result = await pending;
    assert.equal(!result.ok && result.failure, 'timeout');
    const both = createUpstreamResolver({ servers: [{ host: silent.host, port: silent.port }, { host: good.host, port: good.port }] });
    const fallback = both.resolve('api.example.test', 4);
    t.mock.timers.tick(2_000);
    assert.deepEqual((await fallback).ok, true);
    assert.equal(good.count(), 1);
  });

  it(`sends a UDP query once more after ${UPSTREAM_UDP_RESEND_MS} ms without a reply, so one lost datagram does not fail the name`, async (t) => {
    // The first datagram is lost (a cluster's conntrack race, a busy node): the copy is answered before the 2 s timeout.
    const { fixture, resolver } = await withFixture(t, { 'api.example.test': { a: ['127.0.0.6'], dropUdp: 1 } });
    const result = await resolver.resolve('api.example.test', 4);
    assert.deepEqual(result.ok && result.addresses, ['127.0.0.6']);
    assert.deepEqual(fixture.queries.map((q) => `${q.transport} ${q.name}`), ['udp api.example.test']);
    assert.equal(fixture.resent(), 1, 'the same query, sent again');
  });

  it('reports io-failed when nothing listens on the server port', async (t) => {
    const fixture = await startDnsFixture({});
    const port = fixture.port;
    await fixture.close();
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const resolver = createUpstreamResolver({ servers: [{ host: '127.0.0.1', port }] });
    const pending = resolver.resolve('api.example.test', 4);
    // ICMP port unreachable may surface as an error on the connected UDP socket; the timer is the backstop.
    t.mock.timers.tick(2_000);
    const final = await pending;
    assert.ok(!final.ok && ['io-failed', 'timeout'].includes(final.failure));
  });
});
