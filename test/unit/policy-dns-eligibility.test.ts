// Policy DNS eligibility and upstream outcomes: which names are refused, answered or sent upstream (DN-01 to
// DN-11), and how upstream NXDOMAIN, NODATA, failures and rebinds turn into answers (DN-12 to DN-21).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decode, type RecordType } from 'dns-packet';
import { NEGATIVE_CACHE_TTL_SECONDS } from '../../src/dns/policy-dns.js';
import { NO_RESPONSE } from '../../src/dns/server.js';
import { buildQuery, rcodeOf } from '../harness/dns-client.js';
import { aOf, answer, PUBLIC, setup, ttlOf, UDP } from '../harness/policy-dns-setup.js';

describe('policy DNS eligibility', () => {
  it('refuses a name no endpoint covers with NXDOMAIN and a synthetic SOA, without any upstream query (DN-01)', async () => {
    const s = setup();
    const reply = await s.ask('other.example.test');
    assert.equal(rcodeOf(reply), 'NXDOMAIN');
    // RFC 2308: the SOA makes the negative answer final and cacheable, for NEGATIVE_CACHE_TTL_SECONDS.
    const [soa] = reply.authorities ?? [];
    assert.equal(soa?.type, 'SOA');
    assert.equal(soa?.name, 'example.test');
    assert.equal((soa as { ttl?: number }).ttl, NEGATIVE_CACHE_TTL_SECONDS);
    assert.equal((soa as { data: { minimum: number } }).data.minimum, NEGATIVE_CACHE_TTL_SECONDS);
    assert.equal(reply.answers?.length, 0);
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
    // The real name then resolves; a name outside the search domains is still refused (NXDOMAIN with a NET:REFUSE), the domain itself too.
    assert.equal(rcodeOf(await s.ask('api.example.test')), 'NOERROR');
    assert.equal(rcodeOf(await s.ask('other.example.test')), 'NXDOMAIN');
    assert.equal(rcodeOf(await s.ask('cluster.local')), 'NXDOMAIN');
    assert.equal(s.sink.events.filter((e) => e.class === 'NET' && e.activity === 'REFUSE').length, 2, 'those two are policy refusals');
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
    assert.equal(rcodeOf(await s.ask('svc.test')), 'NXDOMAIN');
    assert.equal(rcodeOf(await s.ask('a.b.svc.test')), 'NXDOMAIN');
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
    for (const name of ['2852039166', '169.254.169.254', '0x7f.1', '127.1']) assert.equal(rcodeOf(await s.ask(name)), 'NXDOMAIN', name);
    assert.equal(s.resolver.calls.length, 0);
  });

  it('refuses local and metadata names even when a policy lists them', async () => {
    const s = setup({ endpoints: [{ host: 'metadata.google.internal', ports: [80] }, { host: 'localhost', ports: [80] }] });
    assert.equal(rcodeOf(await s.ask('metadata.google.internal')), 'NXDOMAIN');
    assert.equal(rcodeOf(await s.ask('localhost')), 'NXDOMAIN');
    assert.equal(s.resolver.calls.length, 0);
  });

  it('answers FORMERR to a malformed query and drops a runt (DN-06, DN-07)', async () => {
    const s = setup();
    assert.equal(s.dns.handler.answer(Buffer.alloc(5), UDP), NO_RESPONSE);
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
