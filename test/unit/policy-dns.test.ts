import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type DecodedPacket, decode, type RecordClass, type RecordType } from 'dns-packet';
import { createPolicyDns, type PolicyDns } from '../../src/dns/policy-dns.js';
import { type DnsRequestInfo, NO_RESPONSE } from '../../src/dns/server.js';
import type { ResolveResult, Resolver } from '../../src/net/resolver.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import type { Policy } from '../../src/policy/types.js';
import { testClock } from '../harness/clock.js';
import { buildQuery, rcodeOf } from '../harness/dns-client.js';
import { type EndpointSpec, stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';
import { type FakeAnswer, fakeResolver } from '../harness/fake-resolver.js';
import { logSink } from '../harness/log-sink.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore } from '../../src/policy/store.js';

const UDP: DnsRequestInfo = { transport: 'udp', remote: { ip: '127.0.0.1', port: 5353 } };
const PUBLIC = '93.184.216.34';

/** As server.ts asks: the cached path first, then the async one on a miss; undefined when nothing is sent. */
async function answer(dns: PolicyDns, message: Buffer, info: DnsRequestInfo = UDP): Promise<Buffer | undefined> {
  const out = dns.handler.cached(message, info) ?? (await dns.handler.resolve(message, info));
  return out === NO_RESPONSE ? undefined : out;
}

function setup(
  options: { endpoints?: readonly EndpointSpec[]; answers?: Record<string, FakeAnswer>; resolver?: Resolver; cidr?: string; searchDomains?: readonly string[] } = {},
) {
  const clock = testClock();
  const resolver = fakeResolver(options.answers ?? { 'api.example.test': { addresses: [PUBLIC], ttlSeconds: 30 } });
  let policy: Policy = stubPolicy(options.endpoints ?? [{ host: 'api.example.test', ports: [443] }]);
  const pool = createSyntheticPool({ epoch: 0, now: clock.now, ...(options.cidr === undefined ? {} : { cidr: options.cidr }) });
  const sink = collectingSink();
  const dns = createPolicyDns({
    policy: () => policy,
    resolver: options.resolver ?? resolver,
    pool,
    sink,
    now: clock.now,
    ...(options.searchDomains === undefined ? {} : { searchDomains: options.searchDomains }),
  });
  async function ask(name: string, type: RecordType = 'A', extra: { qclass?: RecordClass; id?: number } = {}): Promise<DecodedPacket> {
    const out = await answer(dns, buildQuery(name, type, extra), UDP);
    assert.ok(out !== undefined, 'a response');
    return decode(out);
  }
  return {
    clock,
    resolver,
    pool,
    sink,
    dns,
    ask,
    swap(specs: readonly EndpointSpec[]) {
      policy = stubPolicy(specs, policy.generation + 1);
    },
    details: () => sink.events.filter((e) => e.class === 'NET').map((e) => e.statusDetail),
    published: () => sink.events.filter((e) => e.class === 'CONFIG' && e.activity === 'PUBLISHED'),
  };
}

function ttlOf(packet: DecodedPacket): number | undefined {
  return (packet.answers?.[0] as { ttl?: number } | undefined)?.ttl;
}

function aOf(packet: DecodedPacket): string[] {
  return (packet.answers ?? []).map((a) => String((a as { data: unknown }).data));
}

describe('policy DNS eligibility', () => {
  it('refuses a name no endpoint covers, without any upstream query (DN-01)', async () => {
    const s = setup();
    const reply = await s.ask('other.example.test');
    assert.equal(rcodeOf(reply), 'REFUSED');
    assert.equal(s.resolver.calls.length, 0);
    const refuse = s.sink.events.find((e) => e.class === 'NET');
    assert.equal(refuse?.activity, 'REFUSE');
    assert.equal(refuse?.severity, 'MED');
    assert.equal(refuse?.action, 'DENIED');
    assert.equal(refuse?.statusDetail, 'policy_dns_ineligible');
  });

  it('answers NXDOMAIN, not REFUSED, for an uncovered name under a search domain, so a stub walks on to the real name', async () => {
    const s = setup({ searchDomains: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'] });
    for (const candidate of ['api.example.test.default.svc.cluster.local', 'api.example.test.svc.cluster.local', 'api.example.test.cluster.local']) {
      assert.equal(rcodeOf(await s.ask(candidate)), 'NXDOMAIN', candidate);
      assert.equal(rcodeOf(await s.ask(candidate, 'AAAA')), 'NXDOMAIN', candidate);
    }
    assert.equal(s.resolver.calls.length, 0, 'search-list candidates are never asked upstream');
    assert.equal(s.sink.events.filter((e) => e.class === 'NET' && e.activity === 'REFUSE').length, 0, 'no refusal finding for routine candidates');
    assert.ok(s.sink.events.filter((e) => e.class === 'DNS').every((e) => e.statusDetail === 'policy_dns_search_suffix'));
    // The real name then resolves; a name outside the search domains is still refused, the domain itself too.
    assert.equal(rcodeOf(await s.ask('api.example.test')), 'NOERROR');
    assert.equal(rcodeOf(await s.ask('other.example.test')), 'REFUSED');
    assert.equal(rcodeOf(await s.ask('cluster.local')), 'REFUSED');
  });

  it('resolves a name under a search domain when policy covers it', async () => {
    const s = setup({
      searchDomains: ['svc.cluster.local'],
      endpoints: [{ host: 'db.data.svc.cluster.local', ports: [5432] }],
      answers: { 'db.data.svc.cluster.local': { addresses: [PUBLIC], ttlSeconds: 30 } },
    });
    assert.equal(rcodeOf(await s.ask('db.data.svc.cluster.local')), 'NOERROR');
    assert.equal(rcodeOf(await s.ask('other.data.svc.cluster.local')), 'NXDOMAIN');
  });

  it('answers an eligible name with one synthetic A record in the window, TTL in [1, 30] (DN-02)', async () => {
    const s = setup();
    const reply = await s.ask('api.example.test');
    assert.equal(rcodeOf(reply), 'NOERROR');
    assert.equal(reply.answers?.length, 1);
    assert.match(aOf(reply)[0] ?? '', /^198\.18\.[01]\.\d+$/);
    const ttl = ttlOf(reply) ?? 0;
    assert.ok(ttl >= 1 && ttl <= 30);
    assert.deepEqual(s.resolver.calls, [{ name: 'api.example.test', family: 4 }]);
  });

  it('treats any protocol as eligible, and wildcards only for the labels they cover', async () => {
    const s = setup({
      endpoints: [{ host: 'api.example.test', ports: [443], protocol: 'rest' }, { host: '*.svc.test', ports: [5432] }],
      answers: { 'api.example.test': [PUBLIC], 'db.svc.test': [PUBLIC] },
    });
    assert.equal(rcodeOf(await s.ask('api.example.test')), 'NOERROR');
    assert.equal(rcodeOf(await s.ask('db.svc.test')), 'NOERROR');
    assert.equal(rcodeOf(await s.ask('svc.test')), 'REFUSED');
    assert.equal(rcodeOf(await s.ask('a.b.svc.test')), 'REFUSED');
  });

  it('clamps the upstream TTL: 0 -> 1 and 86400 -> 30 (DN-03)', async () => {
    const s = setup({
      endpoints: [{ host: 'zero.test', ports: [443] }, { host: 'day.test', ports: [443] }],
      answers: { 'zero.test': { addresses: [PUBLIC], ttlSeconds: 0 }, 'day.test': { addresses: [PUBLIC], ttlSeconds: 86_400 } },
    });
    assert.equal(ttlOf(await s.ask('zero.test')), 1);
    assert.equal(ttlOf(await s.ask('day.test')), 30);
  });

  it('answers AAAA for an eligible name with an empty NOERROR and no upstream query (DN-04)', async () => {
    const s = setup();
    const reply = await s.ask('api.example.test', 'AAAA');
    assert.equal(rcodeOf(reply), 'NOERROR');
    assert.equal(reply.answers?.length, 0);
    assert.equal(s.resolver.calls.length, 0);
  });

  it('answers NOTIMP to MX, TXT, ANY, AXFR and class CH (DN-05)', async () => {
    const s = setup();
    for (const type of ['MX', 'TXT', 'ANY', 'AXFR'] as RecordType[]) assert.equal(rcodeOf(await s.ask('api.example.test', type)), 'NOTIMP', type);
    assert.equal(rcodeOf(await s.ask('api.example.test', 'A', { qclass: 'CH' })), 'NOTIMP');
    assert.equal(s.resolver.calls.length, 0);
  });

  it('maps 0x20 casing to the lower-case mapping and asks upstream in lower case only (DN-10)', async () => {
    const s = setup();
    const lower = await s.ask('api.example.test');
    s.dns.clearCache();
    const mixed = await s.ask('ApI.ExAmPlE.TeSt');
    assert.deepEqual(aOf(mixed), aOf(lower));
    assert.equal(mixed.questions?.[0]?.name, 'ApI.ExAmPlE.TeSt', 'the question is echoed as asked');
    assert.deepEqual(s.resolver.calls.map((c) => c.name), ['api.example.test', 'api.example.test']);
  });

  it('refuses IP literals in every spelling without an upstream query (DN-11)', async () => {
    const s = setup({ endpoints: [{ host: '*.example.test', ports: [443] }] });
    for (const name of ['2852039166', '169.254.169.254', '0x7f.1', '127.1']) assert.equal(rcodeOf(await s.ask(name)), 'REFUSED', name);
    assert.equal(s.resolver.calls.length, 0);
  });

  it('refuses local and metadata names even when a policy lists them', async () => {
    const s = setup({ endpoints: [{ host: 'metadata.google.internal', ports: [80] }, { host: 'localhost', ports: [80] }] });
    assert.equal(rcodeOf(await s.ask('metadata.google.internal')), 'REFUSED');
    assert.equal(rcodeOf(await s.ask('localhost')), 'REFUSED');
    assert.equal(s.resolver.calls.length, 0);
  });

  it('answers FORMERR to a malformed query and drops a runt (DN-06, DN-07)', async () => {
    const s = setup();
    assert.equal(s.dns.handler.cached(Buffer.alloc(5), UDP), NO_RESPONSE);
    const wire = buildQuery('api.example.test');
    wire.writeUInt16BE(2, 4);
    const out = await answer(s.dns, wire, UDP);
    assert.equal(rcodeOf(decode(out!)), 'FORMERR');
  });
});

describe('policy DNS upstream outcomes', () => {
  it('passes NXDOMAIN through and answers NODATA with an empty NOERROR; nothing is published (DN-12)', async () => {
    const s = setup({ endpoints: [{ host: 'gone.test', ports: [443] }, { host: 'v6only.test', ports: [443] }], answers: { 'v6only.test': ['2001:db8::1'] } });
    assert.equal(rcodeOf(await s.ask('gone.test')), 'NXDOMAIN');
    const nodata = await s.ask('v6only.test');
    assert.equal(rcodeOf(nodata), 'NOERROR');
    assert.equal(nodata.answers?.length, 0);
    assert.equal(s.published().length, 0);
    assert.deepEqual(s.details(), ['policy_dns_upstream_nxdomain', 'policy_dns_upstream_no_data']);
    assert.ok(s.sink.events.filter((e) => e.class === 'NET').every((e) => e.severity === 'LOW'));
  });

  it('answers SERVFAIL with the failure in status_detail on timeout, malformed and oversized replies (DN-13)', async () => {
    const s = setup({
      endpoints: [{ host: 'slow.test', ports: [443] }, { host: 'bad.test', ports: [443] }, { host: 'big.test', ports: [443] }, { host: 'deep.test', ports: [443] }],
      answers: { 'slow.test': 'timeout', 'bad.test': 'malformed-response', 'big.test': 'oversized-response', 'deep.test': 'cname-limit' },
    });
    for (const name of ['slow.test', 'bad.test', 'big.test', 'deep.test']) assert.equal(rcodeOf(await s.ask(name)), 'SERVFAIL', name);
    assert.deepEqual(s.details(), [
      'policy_dns_upstream_timeout',
      'policy_dns_upstream_malformed_response',
      'policy_dns_upstream_oversized_response',
      'policy_dns_upstream_cname_limit',
    ]);
  });

  it('answers SERVFAIL when a wildcard endpoint gets only private answers (DN-14)', async () => {
    const s = setup({ endpoints: [{ host: '*.example.test', ports: [443] }], answers: { 'db.example.test': ['10.0.0.5', '192.168.1.1'] } });
    assert.equal(rcodeOf(await s.ask('db.example.test')), 'SERVFAIL');
    const refuse = s.sink.events.find((e) => e.class === 'NET');
    assert.equal(refuse?.statusDetail, 'policy_dns_no_valid_address');
    assert.deepEqual(((refuse?.unmapped?.dropped ?? []) as { ip: string }[]).map((d) => d.ip), ['10.0.0.5', '192.168.1.1']);
    assert.equal(s.published().length, 0);
  });

  it('maps an exact host with a private answer, and drops always-blocked answers from the mapping', async () => {
    const s = setup({ answers: { 'api.example.test': ['169.254.169.254', '10.0.0.5', '127.0.0.1'] } }); // a fake resolver's answers: the blocked ones are filtered, nothing is dialled
    assert.equal(rcodeOf(await s.ask('api.example.test')), 'NOERROR');
    assert.deepEqual(s.published()[0]?.unmapped?.approved_real_ip_candidates, ['10.0.0.5']);
  });

  it('validates every resolution on its own: a rebind to metadata after expiry is refused (DN-21)', async () => {
    const s = setup({ answers: { 'api.example.test': { addresses: [PUBLIC], ttlSeconds: 0 } } });
    assert.equal(rcodeOf(await s.ask('api.example.test')), 'NOERROR');
    s.resolver.set('api.example.test', { addresses: ['169.254.169.254'], ttlSeconds: 0 });
    s.clock.advance(1_000);
    assert.equal(rcodeOf(await s.ask('api.example.test')), 'SERVFAIL');
    assert.equal(s.resolver.calls.length, 2);
    assert.deepEqual(s.published().map((e) => e.unmapped?.approved_real_ip_candidates), [[PUBLIC]]);
  });
});

describe('policy DNS mappings and events', () => {
  it('carries the closed reason code of the decision on its events, and the covering policy on allow', async () => {
    const s = setup({ searchDomains: ['svc.cluster.local'] });
    const cases: [string, 'A' | 'AAAA', string, string][] = [
      ['api.example.test', 'A', 'NOERROR', 'endpoint-allowed'],
      ['api.example.test', 'AAAA', 'NOERROR', 'endpoint-allowed'],
      ['other.example.test', 'A', 'REFUSED', 'no-endpoint-matched'],
      ['api.example.test.svc.cluster.local', 'A', 'NXDOMAIN', 'no-endpoint-matched'],
      ['localhost', 'A', 'REFUSED', 'local-name'],
      ['metadata.google.internal', 'A', 'REFUSED', 'metadata-name'],
      ['2852039166', 'A', 'REFUSED', 'ip-literal-name'],
      ['xn--a.example.test', 'A', 'REFUSED', 'invalid-name'],
    ];
    for (const [name, type, rcode, reason] of cases) {
      const before = s.sink.events.length;
      assert.equal(rcodeOf(await s.ask(name, type)), rcode, name);
      const events = s.sink.events.slice(before);
      const query = events.find((e) => e.class === 'DNS');
      assert.equal(query?.unmapped?.reason_code, reason, name);
      assert.equal(query?.policy, rcode === 'NOERROR' ? 'test' : undefined, name);
      const refuse = events.find((e) => e.class === 'NET');
      assert.equal(refuse?.unmapped?.reason_code, rcode === 'REFUSED' ? reason : undefined, name);
    }
  });

  it('publishes CONFIG:PUBLISHED with the correlation fields of docs/dns.md#correlation-fields', async () => {
    const s = setup({ endpoints: [{ host: 'api.example.test', ports: [443, 8443] }] });
    const reply = await s.ask('api.example.test');
    const [event] = s.published();
    const synthetic = aOf(reply)[0];
    assert.equal(event?.message, `Policy DNS mapped api.example.test resolved=${PUBLIC} synthetic=${synthetic} ports=443,8443`);
    assert.equal(event?.severity, 'INFO');
    const u = event?.unmapped ?? {};
    assert.equal(u.normalized_domain, 'api.example.test');
    assert.equal(u.address_family, 'ipv4');
    assert.deepEqual(u.approved_real_ip_candidates, [PUBLIC]);
    assert.equal(u.synthetic_ip, synthetic);
    assert.deepEqual(u.allowed_ports, [443, 8443]);
    assert.equal(u.policy_generation, 1);
    assert.equal(u.mapping_generation, 1);
    assert.match(String(u.mapping_id), /^[0-9a-f-]{36}$/);
  });

  it('emits one DNS Activity event per query with query type, rcode and answer', async () => {
    const s = setup();
    await s.ask('api.example.test');
    await s.ask('api.example.test');
    await s.ask('nope.test');
    const queries = s.sink.events.filter((e) => e.class === 'DNS');
    assert.equal(queries.length, 3);
    assert.deepEqual(queries.map((e) => [e.dst?.host, e.unmapped?.qtype, e.unmapped?.rcode, e.action]), [
      ['api.example.test', 'A', 'NOERROR', 'ALLOWED'],
      ['api.example.test', 'A', 'NOERROR', 'ALLOWED'],
      ['nope.test', 'A', 'REFUSED', 'DENIED'],
    ]);
    assert.equal(queries[0]?.unmapped?.mapping_id, queries[1]?.unmapped?.mapping_id);
  });

  it('serves repeats from the wire cache with the remaining TTL, and refreshes near expiry (DN-23)', async () => {
    const s = setup({ answers: { 'api.example.test': { addresses: [PUBLIC], ttlSeconds: 30 } } });
    const first = await s.ask('api.example.test', 'A', { id: 1 });
    s.clock.advance(10_400);
    const cached = await s.ask('api.example.test', 'A', { id: 2 });
    assert.equal(cached.id, 2);
    assert.equal(ttlOf(cached), 19);
    assert.equal(s.resolver.calls.length, 1);
    s.clock.advance(19_000);
    const refreshed = await s.ask('api.example.test');
    assert.equal(s.resolver.calls.length, 2);
    assert.deepEqual(aOf(refreshed), aOf(first));
    const [one, two] = s.published();
    assert.equal(two?.unmapped?.mapping_generation, 2);
    assert.notEqual(two?.unmapped?.mapping_id, one?.unmapped?.mapping_id);
  });

  it('gives a new address when the endpoint contract changes, and drops cached answers on a policy swap (DN-24)', async () => {
    const s = setup();
    const before = aOf(await s.ask('api.example.test'));
    assert.equal(rcodeOf(await s.ask('new.example.test')), 'REFUSED');
    s.swap([{ host: 'api.example.test', ports: [443, 8443] }, { host: 'new.example.test', ports: [443] }]);
    s.resolver.set('new.example.test', [PUBLIC]);
    const after = aOf(await s.ask('api.example.test'));
    assert.notDeepEqual(after, before);
    assert.equal(rcodeOf(await s.ask('new.example.test')), 'NOERROR');
  });

  it('keeps the address for the same contract across a policy swap', async () => {
    const s = setup();
    const before = aOf(await s.ask('api.example.test'));
    s.swap([{ host: 'api.example.test', ports: [443] }]);
    assert.deepEqual(aOf(await s.ask('api.example.test')), before);
    assert.equal(s.resolver.calls.length, 2);
  });

  it('answers SERVFAIL and publishes nothing when the policy changes during resolution', async () => {
    let release: (r: ResolveResult) => void = () => {};
    const resolver: Resolver = { resolve: () => new Promise((resolve) => (release = resolve)) };
    const s = setup({ resolver });
    const pending = answer(s.dns, buildQuery('api.example.test'), UDP);
    s.swap([{ host: 'api.example.test', ports: [443] }]);
    release({ ok: true, addresses: [PUBLIC], ttlSeconds: 30 });
    assert.equal(rcodeOf(decode((await pending)!)), 'SERVFAIL');
    assert.deepEqual(s.details(), ['policy_dns_stale_generation']);
    assert.equal(s.published().length, 0);
    assert.equal(s.pool.stats().reserved[4], 0);
  });

  it('shares one upstream resolution among concurrent queries for one name', async () => {
    const s = setup();
    const replies = await Promise.all([1, 2, 3].map((id) => answer(s.dns, buildQuery('api.example.test', 'A', { id }), UDP)));
    assert.deepEqual(replies.map((r) => decode(r!).id), [1, 2, 3]);
    assert.equal(s.resolver.calls.length, 1);
    assert.equal(s.published().length, 1);
  });

  it('answers SERVFAIL with a finding when the pool is exhausted, after one high-water event (DN-27)', async () => {
    const s = setup({ endpoints: [{ host: '*.example.test', ports: [443] }], answers: { 'a.example.test': [PUBLIC], 'b.example.test': [PUBLIC] }, cidr: '198.18.0.0/24' });
    assert.equal(rcodeOf(await s.ask('a.example.test')), 'NOERROR');
    assert.equal(rcodeOf(await s.ask('b.example.test')), 'SERVFAIL');
    assert.equal(s.sink.events.filter((e) => e.activity === 'HIGH_WATER').length, 1);
    const finding = s.sink.events.find((e) => e.class === 'FINDING');
    assert.equal(finding?.statusDetail, 'policy_dns_pool_exhausted');
    assert.equal(rcodeOf(await s.ask('b.example.test')), 'SERVFAIL');
    assert.equal(s.sink.events.filter((e) => e.activity === 'HIGH_WATER').length, 1);
  });

  it('renders its events through the real audit sink as OCSF DNS Activity, NET:REFUSE and CONFIG', async () => {
    const clock = testClock();
    const log = logSink({ now: clock.now });
    const dns = createPolicyDns({
      policy: () => stubPolicy([{ host: 'api.example.test', ports: [443] }]),
      resolver: fakeResolver({ 'api.example.test': [PUBLIC] }),
      pool: createSyntheticPool({ epoch: 0, now: clock.now }),
      sink: log.sink,
      now: clock.now,
    });
    await answer(dns, buildQuery('api.example.test'), UDP);
    await answer(dns, buildQuery('nope.test'), UDP);
    const events = log.events();
    const dnsEvents = events.filter((e) => e.class_uid === 4003);
    assert.equal(dnsEvents.length, 2);
    assert.equal(dnsEvents[0]?.query?.hostname, 'api.example.test');
    assert.equal(dnsEvents[0]?.rcode, 'NoError');
    assert.equal(dnsEvents[1]?.rcode, 'Refused');
    const refuse = events.find((e) => e.class_uid === 4001);
    assert.equal(refuse?.status_detail, 'policy_dns_ineligible');
    assert.equal(refuse?.activity_name, 'Refuse');
    assert.ok(log.lines().some((l) => l.includes('Policy DNS mapped api.example.test')));
  });

  it('takes eligibility from a parsed OpenShell policy through the store, and follows swaps', async () => {
    const clock = testClock();
    const store = createPolicyStore();
    const resolver = fakeResolver({ 'api.example.test': [PUBLIC], 'pg.db.example.test': [PUBLIC] });
    const dns = createPolicyDns({ policy: () => store.current(), resolver, pool: createSyntheticPool({ epoch: 0, now: clock.now }), sink: collectingSink(), now: clock.now });
    const ask = async (name: string) => rcodeOf(decode((await answer(dns, buildQuery(name), UDP))!));
    assert.equal(await ask('api.example.test'), 'REFUSED', 'before any policy: fail closed');
    store.swap(
      parsePolicy(
        [
          'version: 1',
          'network_policies:',
          '  api:',
          '    endpoints:',
          '      - { host: api.example.test, port: 443, protocol: rest, access: read-only, enforcement: enforce }',
          '      - { host: "*.db.example.test", port: 5432, protocol: tcp }',
          '    binaries: [{ path: "/**" }]',
        ].join('\n'),
      ),
    );
    assert.equal(await ask('api.example.test'), 'NOERROR');
    assert.equal(await ask('pg.db.example.test'), 'NOERROR');
    assert.equal(await ask('db.example.test'), 'REFUSED', 'a wildcard never matches its apex');
    assert.equal(await ask('other.example.test'), 'REFUSED');
    store.swap(parsePolicy('version: 1\nnetwork_policies: {}\n'));
    assert.equal(await ask('api.example.test'), 'REFUSED', 'a swap drops cached answers at once');
    assert.deepEqual(resolver.calls.map((c) => c.name), ['api.example.test', 'pg.db.example.test']);
  });
});
