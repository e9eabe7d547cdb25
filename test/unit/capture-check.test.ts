import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dnsQueryLabels } from '../../src/dns/metrics.js';
import { contractDigest, createSyntheticPool, type Mapping } from '../../src/net/synthetic.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { withGeneration } from '../../src/policy/store.js';
import type { Policy } from '../../src/policy/types.js';
import { allowedPorts, checkCapture } from '../../src/chain/stages/capture-check.js';
import { testClock } from '../harness/clock.js';

function policy(generation: number, ports: readonly number[], key = 'db'): Policy {
  return withGeneration(
    parsePolicy(`version: 1
network_policies:
  ${key}:
    endpoints:
      - host: db.example.test
        ports: [${ports.join(', ')}]
        protocol: tcp
    binaries: [{ path: "/**" }]
`),
    generation,
  );
}

function mapOnce(p: Policy) {
  const clock = testClock();
  const pool = createSyntheticPool({ epoch: 0, now: clock.now, cidr: '127.77.0.0/16' });
  const endpoints = p.endpointsForHost('db.example.test');
  const result = pool.allocate({
    name: 'db.example.test',
    family: 4,
    contract: contractDigest(endpoints),
    endpointIds: endpoints.map((e) => e.id),
    addresses: ['127.0.0.9'],
    routes: endpoints[0]!.ports.map((port) => ({ port, endpointIds: [endpoints[0]!.id], addresses: ['127.0.0.9'] })),
    ttlSeconds: 10,
    policyGeneration: p.generation,
  });
  assert.ok(result.ok);
  return { pool, clock, mapping: result.mapping as Mapping };
}

describe('checkCapture', () => {
  it('admits a live mapping on a port of its contract, with an endpoint that made the name eligible', () => {
    const p = policy(1, [5432]);
    const { pool, mapping } = mapOnce(p);
    const check = checkCapture(p, pool.lookup(mapping.syntheticIp), 5432);
    assert.equal(check.ok, true);
    assert.deepEqual(allowedPorts(p, mapping), [5432]);
  });

  it('names each refusal with its reason', () => {
    const p = policy(1, [5432]);
    const { pool, clock, mapping } = mapOnce(p);
    const missing = checkCapture(p, pool.lookup('127.77.0.200'), 5432);
    assert.equal(missing.ok ? 'ok' : missing.reason, 'mapping-missing');
    const mismatch = checkCapture(p, pool.lookup(mapping.syntheticIp), 6379);
    assert.equal(mismatch.ok ? 'ok' : mismatch.reason, 'port-mismatch');
    clock.advance(10_000);
    const expired = checkCapture(p, pool.lookup(mapping.syntheticIp), 5432);
    assert.equal(expired.ok ? 'ok' : expired.reason, 'mapping-expired');
  });

  it('keeps an older mapping usable while the new policy allows it, and calls it stale once it does not', () => {
    const { pool, mapping } = mapOnce(policy(1, [5432, 6543]));
    const same = checkCapture(policy(2, [5432, 6543]), pool.lookup(mapping.syntheticIp), 5432);
    assert.equal(same.ok, true);
    const narrowed = policy(3, [6543]);
    const stale = checkCapture(narrowed, pool.lookup(mapping.syntheticIp), 5432);
    assert.equal(stale.ok ? 'ok' : stale.reason, 'stale-policy');
    assert.deepEqual(allowedPorts(narrowed, mapping), [6543]);
    // Another endpoint now allows the name, but not one the DNS answer was correlated with.
    const renamed = checkCapture(policy(4, [5432, 6543], 'other'), pool.lookup(mapping.syntheticIp), 5432);
    assert.equal(renamed.ok ? 'ok' : renamed.reason, 'stale-policy');
  });
});

describe('dnsQueryLabels', () => {
  it('maps DNS query events onto the closed rcode and outcome sets', () => {
    const event = (rcode: string, extra: { action?: 'ALLOWED' | 'DENIED'; statusDetail?: string } = {}) =>
      dnsQueryLabels({ class: 'DNS', activity: 'QUERY', severity: 'INFO', message: '', unmapped: { rcode }, ...extra });
    assert.deepEqual(event('NOERROR', { action: 'ALLOWED' }), { rcode: 'NOERROR', outcome: 'mapped' });
    assert.deepEqual(event('NOERROR'), { rcode: 'NOERROR', outcome: 'empty' });
    assert.deepEqual(event('SERVFAIL', { statusDetail: 'policy_dns_pool_exhausted' }), { rcode: 'SERVFAIL', outcome: 'pool-exhausted' });
    assert.deepEqual(event('SERVFAIL', { statusDetail: 'policy_dns_upstream_timeout' }), { rcode: 'SERVFAIL', outcome: 'upstream-failed' });
    assert.deepEqual(event('SERVFAIL', { statusDetail: 'policy_dns_upstream_dns_loop' }), { rcode: 'SERVFAIL', outcome: 'dns-loop' });
    assert.deepEqual(event('api.example.test'), { rcode: 'other', outcome: 'upstream-failed' });
  });
});
