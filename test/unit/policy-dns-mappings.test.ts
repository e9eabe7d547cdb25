// Policy DNS mappings and events: reason codes and CONFIG:PUBLISHED correlation fields, DNS Activity events,
// the wire cache and refresh (DN-23), policy swaps (DN-24), pool exhaustion (DN-27), the real audit sink and the
// policy store.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decode } from 'dns-packet';
import { createPolicyDns } from '../../src/dns/policy-dns.js';
import type { ResolveResult, Resolver } from '../../src/net/resolver.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore } from '../../src/policy/store.js';
import { testClock } from '../harness/clock.js';
import { buildQuery, rcodeOf } from '../harness/dns-client.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { logSink } from '../harness/log-sink.js';
import { testLookupGate } from '../harness/lookup-gate.js';
import { aOf, answer, PUBLIC, setup, ttlOf, UDP } from '../harness/policy-dns-setup.js';

describe('policy DNS mappings and events', () => {
  it('carries the closed reason code of the decision on its events, and the covering policy on allow', async () => {
    const s = setup({ searchDomains: ['svc.cluster.local'] });
    // [name, type, rcode, reason, a policy refusal (NET:REFUSE) or not]
    const cases: [string, 'A' | 'AAAA', string, string, boolean][] = [
      ['api.example.test', 'A', 'NOERROR', 'endpoint-allowed', false],
      ['api.example.test', 'AAAA', 'NOERROR', 'endpoint-allowed', false],
      ['other.example.test', 'A', 'NXDOMAIN', 'no-endpoint-matched', true],
      ['other.example.test', 'AAAA', 'NXDOMAIN', 'no-endpoint-matched', true],
      ['api.example.test.svc.cluster.local', 'A', 'NXDOMAIN', 'no-endpoint-matched', false],
      ['localhost', 'A', 'NXDOMAIN', 'local-name', true],
      ['metadata.google.internal', 'A', 'NXDOMAIN', 'metadata-name', true],
      ['2852039166', 'A', 'NXDOMAIN', 'ip-literal-name', true],
      ['xn--a.example.test', 'A', 'NXDOMAIN', 'invalid-name', true],
    ];
    for (const [name, type, rcode, reason, refused] of cases) {
      const before = s.sink.events.length;
      assert.equal(rcodeOf(await s.ask(name, type)), rcode, name);
      const events = s.sink.events.slice(before);
      const query = events.find((e) => e.class === 'DNS');
      assert.equal(query?.unmapped?.reason_code, reason, name);
      assert.equal(query?.unmapped?.qtype, type, name);
      assert.equal(query?.action, type === 'A' && rcode === 'NOERROR' ? 'ALLOWED' : refused ? 'DENIED' : undefined, name);
      assert.equal(query?.policy, rcode === 'NOERROR' ? 'test' : undefined, name);
      const refuses = events.filter((e) => e.class === 'NET');
      assert.equal(refuses.length, refused ? 1 : 0, name);
      // The refusal itself says what was asked and why.
      if (refused) assert.deepEqual([refuses[0]?.unmapped?.qtype, refuses[0]?.unmapped?.reason_code, refuses[0]?.unmapped?.rcode], [type, reason, rcode], name);
    }
  });

  it('emits exactly one refusal and one DNS Activity event per refused query, cache hits included', async () => {
    const s = setup();
    const asks = 5;
    for (let i = 0; i < asks; i++) await s.ask('nope.example.test', i % 2 === 0 ? 'A' : 'AAAA', { id: i + 1 });
    const refuses = s.sink.events.filter((e) => e.class === 'NET' && e.activity === 'REFUSE');
    const queries = s.sink.events.filter((e) => e.class === 'DNS');
    assert.equal(refuses.length, asks);
    assert.equal(queries.length, asks);
    assert.deepEqual(refuses.map((e) => e.unmapped?.qtype), ['A', 'AAAA', 'A', 'AAAA', 'A']);
    assert.ok(refuses.every((e) => e.unmapped?.reason_code === 'no-endpoint-matched' && e.statusDetail === 'policy_dns_ineligible'));
    assert.ok(s.dns.stats().hits >= asks - 2, 'repeats came from the prepared-event cache');
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
      ['nope.test', 'A', 'NXDOMAIN', 'DENIED'],
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
    assert.equal(rcodeOf(await s.ask('new.example.test')), 'NXDOMAIN');
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

  it('answers SERVFAIL with one finding per interval when the pool declines a new name (DN-27)', async () => {
    // The smallest window (16 addresses) lets one endpoint contract have one live mapping.
    const s = setup({ endpoints: [{ host: '*.example.test', ports: [443] }], answers: { 'a.example.test': [PUBLIC], 'b.example.test': [PUBLIC], 'c.example.test': [PUBLIC] }, cidr: '198.18.0.0/24' });
    assert.equal(rcodeOf(await s.ask('a.example.test')), 'NOERROR');
    assert.equal(rcodeOf(await s.ask('b.example.test')), 'SERVFAIL');
    assert.equal(rcodeOf(await s.ask('c.example.test')), 'SERVFAIL');
    const findings = s.sink.events.filter((e) => e.class === 'FINDING');
    assert.deepEqual(findings.map((e) => [e.statusDetail, e.unmapped?.count]), [['policy_dns_mapping_limit', 1]]);
    assert.deepEqual(s.details(), [], 'no NET:REFUSE per refused query');
    const answers = s.sink.events.filter((e) => e.class === 'DNS').map((e) => e.statusDetail);
    assert.deepEqual(answers, [undefined, 'policy_dns_mapping_limit', 'policy_dns_mapping_limit']);
    assert.equal(rcodeOf(await s.ask('a.example.test')), 'NOERROR', 'the mapped name still answers');
  });

  it('renders its events through the real audit sink as OCSF DNS Activity, NET:REFUSE and CONFIG', async () => {
    const clock = testClock();
    const log = logSink({ now: clock.now });
    const dns = createPolicyDns({
      policy: () => stubPolicy([{ host: 'api.example.test', ports: [443] }]),
      lookups: testLookupGate(fakeResolver({ 'api.example.test': [PUBLIC] }), { now: clock.now }),
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
    assert.equal(dnsEvents[1]?.rcode, 'NXDomain');
    assert.equal(dnsEvents[1]?.action_id, 2, 'a policy refusal is Denied whatever its RCODE');
    const refuse = events.find((e) => e.class_uid === 4001);
    assert.equal(refuse?.status_detail, 'policy_dns_ineligible');
    assert.equal(refuse?.activity_name, 'Refuse');
    assert.ok(log.lines().some((l) => l.includes('Policy DNS mapped api.example.test')));
  });

  it('takes eligibility from a parsed OpenShell policy through the store, and follows swaps', async () => {
    const clock = testClock();
    const store = createPolicyStore();
    const resolver = fakeResolver({ 'api.example.test': [PUBLIC], 'pg.db.example.test': [PUBLIC] });
    const dns = createPolicyDns({ policy: () => store.current(), lookups: testLookupGate(resolver, { now: clock.now }), pool: createSyntheticPool({ epoch: 0, now: clock.now }), sink: collectingSink(), now: clock.now });
    const ask = async (name: string) => rcodeOf(decode((await answer(dns, buildQuery(name), UDP))!));
    assert.equal(await ask('api.example.test'), 'NXDOMAIN', 'before any policy: fail closed');
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
    assert.equal(await ask('db.example.test'), 'NXDOMAIN', 'a wildcard never matches its apex');
    assert.equal(await ask('other.example.test'), 'NXDOMAIN');
    store.swap(parsePolicy('version: 1\nnetwork_policies: {}\n'));
    assert.equal(await ask('api.example.test'), 'NXDOMAIN', 'a swap drops cached answers at once');
    assert.deepEqual(resolver.calls.map((c) => c.name), ['api.example.test', 'pg.db.example.test']);
  });
});
