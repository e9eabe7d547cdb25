// decide() on DNS intents (docs/dns.md#query-handling): eligibility is coverage by any endpoint's host pattern,
// whatever its port, protocol, binaries or enforcement; local, metadata and IP-literal names are never eligible.
// Intents carry normaliseHost() output, as policy-dns.ts hands them over.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normaliseHost } from '../../src/net/host.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { emptyPolicy } from '../../src/policy/store.js';
import { DECISION_REASONS, DNS_DECISION_REASONS, type DnsIntent, type DnsQtype, type Policy } from '../../src/policy/types.js';

function ask(name: string, qtype: DnsQtype = 'A'): DnsIntent {
  const host = normaliseHost(name);
  assert.ok(host.ok, name);
  return { adapter: 'dns', host: host.host, form: host.kind, qtype };
}

const POLICY: Policy = parsePolicy(
  [
    'version: 1',
    'network_policies:',
    '  zeta:',
    '    endpoints:',
    '      - { host: api.example.test, port: 443, protocol: rest, access: read-only, enforcement: audit }',
    '      - { host: "*.svc.example.test", port: 5432, protocol: tcp }',
    '    binaries: [{ path: /usr/bin/psql }]',
    '  alpha:',
    '    endpoints:',
    '      - { host: "**.deep.example.test", port: 8443 }',
    '      - { host: api.example.test, port: 8080 }',
    '      - { host: localhost, port: 80 }',
    '      - { host: metadata.google.internal, port: 80 }',
    '    binaries: [{ path: "/**" }]',
  ].join('\n'),
);

describe('decide() for DNS intents', () => {
  it('allows a name an exact endpoint covers, naming the smallest covering policy key and every covering endpoint', () => {
    const decision = decide(POLICY, ask('api.example.test'));
    assert.equal(decision.verdict, 'allow');
    assert.equal(decision.reason, 'endpoint-allowed');
    assert.equal(decision.policy, 'alpha');
    assert.equal(decision.endpointIndex, 1);
    assert.equal(decision.endpoint?.id, 'alpha#1');
    // Every port and policy counts: their validation plans all see the upstream answers.
    assert.deepEqual(decision.endpoints.map((e) => e.id).sort(), ['alpha#1', 'zeta#0']);
    assert.equal(decision.generation, POLICY.generation);
    assert.equal(decision.policyHash, POLICY.hash);
    assert.ok(Object.isFrozen(decision));
  });

  it('ignores port, protocol, binaries and enforcement: audit and binary-restricted endpoints still cover the name', () => {
    const decision = decide(POLICY, ask('db.svc.example.test'));
    assert.deepEqual([decision.verdict, decision.reason, decision.policy], ['allow', 'endpoint-allowed', 'zeta']);
  });

  it('refuses a name no endpoint covers with no-endpoint-matched and no policy', () => {
    for (const name of ['other.example.test', 'example.test', 'api.example.test.evil.test']) {
      const decision = decide(POLICY, ask(name));
      assert.deepEqual([decision.verdict, decision.reason, decision.policy, decision.endpoint], ['deny', 'no-endpoint-matched', undefined, undefined], name);
      assert.deepEqual(decision.endpoints, []);
    }
  });

  it('covers wildcards only for the labels they match, never the apex', () => {
    const cases: [string, 'allow' | 'deny'][] = [
      ['db.svc.example.test', 'allow'],
      ['a.b.svc.example.test', 'deny'],
      ['svc.example.test', 'deny'],
      ['a.deep.example.test', 'allow'],
      ['a.b.c.deep.example.test', 'allow'],
      ['deep.example.test', 'deny'],
    ];
    for (const [name, verdict] of cases) assert.equal(decide(POLICY, ask(name)).verdict, verdict, name);
  });

  it('gives A and AAAA questions the same verdict', () => {
    for (const name of ['api.example.test', 'other.example.test']) {
      const a = decide(POLICY, ask(name, 'A'));
      const aaaa = decide(POLICY, ask(name, 'AAAA'));
      assert.deepEqual([aaaa.verdict, aaaa.reason, aaaa.policy], [a.verdict, a.reason, a.policy], name);
    }
  });

  it('refuses local and metadata names even when a policy lists them', () => {
    assert.equal(decide(POLICY, ask('localhost')).reason, 'local-name');
    assert.equal(decide(POLICY, ask('a.localhost')).reason, 'local-name');
    assert.equal(decide(POLICY, ask('metadata.google.internal')).reason, 'metadata-name');
    assert.equal(decide(POLICY, ask('instance-data')).reason, 'metadata-name');
    for (const name of ['localhost', 'metadata.google.internal']) assert.equal(decide(POLICY, ask(name)).verdict, 'deny');
  });

  it('refuses IP literals in every spelling, whatever the policy lists', () => {
    const literal = parsePolicy('version: 1\nnetwork_policies:\n  p:\n    endpoints:\n      - { host: 10.0.0.7, port: 5432 }\n    binaries: [{ path: "/**" }]\n');
    for (const name of ['10.0.0.7', '167772167', '0x0a.0.0.7', '::1']) {
      const decision = decide(literal, ask(name));
      assert.deepEqual([decision.verdict, decision.reason], ['deny', 'ip-literal-name'], name);
    }
  });

  it('refuses every name with no-policy under emptyPolicy()', () => {
    const decision = decide(emptyPolicy(), ask('api.example.test'));
    assert.deepEqual([decision.verdict, decision.reason, decision.policy], ['deny', 'no-policy', undefined]);
  });

  it('draws its reasons from the closed decision reason set', () => {
    for (const reason of DNS_DECISION_REASONS) assert.ok((DECISION_REASONS as readonly string[]).includes(reason), reason);
    const seen = new Set(
      ['api.example.test', 'other.example.test', 'localhost', 'metadata', '10.0.0.7'].map((n) => decide(POLICY, ask(n)).reason),
    );
    seen.add(decide(emptyPolicy(), ask('api.example.test')).reason);
    assert.deepEqual([...seen].sort(), [...DNS_DECISION_REASONS].sort());
  });
});
