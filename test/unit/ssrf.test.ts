// Validation plans and per-answer filtering (docs/destinations.md#validation-plans, docs/destinations.md#resolution-and-rebinding): peer-tests NM-04..NM-16, HA-19 and the
// --unsafe-allow-loopback-upstream relaxation. Pure: no resolver, no sockets.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CONTROL_PLANE_PORTS,
  type DestinationCheck,
  type DestinationInput,
  MAX_ANSWERS_CHECKED,
  SSRF_CHECKS,
  selectPlan,
  VALIDATION_PLANS,
  isSelfAddress,
  prepareSelfAddresses,
  validateDestination,
} from '../../src/net/ssrf.js';
import { makeEndpoint } from '../harness/endpoint.js';

const WILDCARD = makeEndpoint({ host: '*.example.test' });
const EXACT = makeEndpoint({ host: 'kubernetes.default.svc' });
const PRIVATE_LIST = makeEndpoint({ host: 'db.example.test', allowedIps: ['10.0.0.0/8'] });

function check(input: Partial<DestinationInput> & { addresses: readonly string[] }): DestinationCheck {
  return validateDestination({ endpoint: undefined, host: 'dest.example.test', port: 443, ...input });
}

function allowed(result: DestinationCheck): readonly string[] {
  assert.ok(result.ok, `expected allowed, got ${result.ok ? '' : result.message}`);
  return result.addresses;
}

function refused(result: DestinationCheck): { check: string; message: string; dropped: readonly { ip: string; why: string }[] } {
  assert.equal(result.ok, false, 'expected a refusal');
  if (result.ok) throw new Error('unreachable');
  return result;
}

describe('selectPlan', () => {
  it('picks allowed_ips first, then an IP-literal host, then an exact host, else public-only', () => {
    assert.equal(selectPlan(makeEndpoint({ host: '*.example.test', allowedIps: ['10.0.0.0/8'] })), 'allowed-ips');
    assert.equal(selectPlan(makeEndpoint({ host: undefined, allowedIps: ['10.0.0.0/8'] })), 'allowed-ips');
    assert.equal(selectPlan(makeEndpoint({ host: '10.0.0.7' })), 'ip-literal');
    assert.equal(selectPlan(makeEndpoint({ host: 'api.example.test' })), 'exact-host');
    assert.equal(selectPlan(WILDCARD), 'public-only');
    assert.equal(selectPlan(makeEndpoint({ host: undefined })), 'public-only');
    assert.equal(selectPlan(undefined), 'public-only');
  });

  it('names plans and checks from closed as-const lists', () => {
    assert.deepEqual([...VALIDATION_PLANS].sort(), ['allowed-ips', 'exact-host', 'ip-literal', 'public-only']);
    assert.ok(SSRF_CHECKS.includes('internal-address') && SSRF_CHECKS.includes('self-address'));
  });
});

describe('peer-tests NM rows (validation)', () => {
  it('NM-04 refuses a wildcard-DNS name that resolves to 169.254.169.254 on every plan', () => {
    for (const endpoint of [WILDCARD, EXACT, PRIVATE_LIST, undefined]) {
      assert.equal(refused(check({ endpoint, addresses: ['169.254.169.254'] })).check, 'always-blocked');
    }
  });

  it('NM-05 refuses a cluster-internal answer on the public-only plan', () => {
    const result = refused(check({ endpoint: WILDCARD, host: 'kubernetes.default.svc', addresses: ['10.96.0.1'] }));
    assert.equal(result.check, 'internal-address');
    assert.deepEqual(result.dropped, [{ ip: '10.96.0.1', class: 'private', why: 'internal-address' }]);
  });

  it('NM-06 allows the same name as an exact declared host on 443 but not on 6443', () => {
    assert.deepEqual(allowed(check({ endpoint: EXACT, addresses: ['10.96.0.1'] })), ['10.96.0.1']);
    assert.equal(refused(check({ endpoint: EXACT, port: 6443, addresses: ['10.96.0.1'] })).check, 'control-plane-port');
  });

  it('NM-07 dials only the public answer and lists the dropped one', () => {
    const result = check({ endpoint: WILDCARD, addresses: ['93.184.216.34', '10.0.0.5'] });
    assert.ok(result.ok);
    assert.deepEqual(result.addresses, ['93.184.216.34']);
    assert.deepEqual(result.dropped, [{ ip: '10.0.0.5', class: 'private', why: 'internal-address' }]);
  });

  it('NM-08 refuses when every answer is private, with a message naming the check', () => {
    const result = refused(check({ endpoint: WILDCARD, addresses: ['10.0.0.5', '192.168.1.1', '172.16.0.9'] }));
    assert.equal(result.check, 'internal-address');
    assert.match(result.message, /internal-address/);
    assert.equal(result.dropped.length, 3);
  });

  it('NM-09 keeps the second answer when the first is blocked', () => {
    assert.deepEqual(allowed(check({ endpoint: WILDCARD, addresses: ['127.0.0.1', '93.184.216.34'] })), ['93.184.216.34']);
    assert.deepEqual(allowed(check({ endpoint: EXACT, addresses: ['169.254.169.254', '10.1.2.3'] })), ['10.1.2.3']);
  });

  it('NM-10 allows an exact declared host that resolves to a private address', () => {
    assert.deepEqual(allowed(check({ endpoint: EXACT, port: 5432, addresses: ['10.1.2.3'] })), ['10.1.2.3']);
  });

  it('NM-11 refuses an exact declared host that resolves to loopback', () => {
    assert.equal(refused(check({ endpoint: EXACT, addresses: ['127.0.0.1'] })).check, 'always-blocked');
    assert.equal(refused(check({ endpoint: EXACT, addresses: ['::1'] })).check, 'always-blocked');
  });

  it('NM-12 refuses every control-plane port on the exact-host plan', () => {
    for (const port of [2379, 2380, 6443, 10250, 10255]) {
      const result = refused(check({ endpoint: EXACT, port, addresses: ['10.1.2.3'] }));
      assert.equal(result.check, 'control-plane-port', String(port));
    }
    assert.deepEqual([...CONTROL_PLANE_PORTS].sort((a, b) => a - b), [2379, 2380, 6443, 10250, 10255]);
  });

  it('NM-13 allows a public address on 6443 on the public-only plan (pin)', () => {
    for (const port of CONTROL_PLANE_PORTS) assert.deepEqual(allowed(check({ endpoint: WILDCARD, port, addresses: ['8.8.8.8'] })), ['8.8.8.8']);
  });

  it('NM-14 allows an answer inside allowed_ips and refuses one outside', () => {
    assert.deepEqual(allowed(check({ endpoint: PRIVATE_LIST, addresses: ['10.1.1.1'] })), ['10.1.1.1']);
    const outside = refused(check({ endpoint: PRIVATE_LIST, addresses: ['11.0.0.1'] }));
    assert.equal(outside.check, 'allowed-ips');
    // allowed_ips replaces the public-only rule: a public address outside the list is refused too.
    assert.equal(refused(check({ endpoint: PRIVATE_LIST, addresses: ['8.8.8.8'] })).check, 'allowed-ips');
  });

  it('NM-15 refuses allowed_ips destinations on a control-plane port', () => {
    assert.equal(refused(check({ endpoint: PRIVATE_LIST, port: 2379, addresses: ['10.1.1.1'] })).check, 'control-plane-port');
  });

  it('NM-16 allows an IP-literal endpoint only for that exact IP', () => {
    const literal = makeEndpoint({ host: '10.0.0.7' });
    assert.deepEqual(allowed(check({ endpoint: literal, host: '10.0.0.7', addresses: ['10.0.0.7'] })), ['10.0.0.7']);
    assert.equal(refused(check({ endpoint: literal, host: '10.0.0.8', addresses: ['10.0.0.8'] })).check, 'declared-endpoint');
    assert.equal(refused(check({ endpoint: literal, host: '10.0.0.7', port: 6443, addresses: ['10.0.0.7'] })).check, 'control-plane-port');
    const v6 = makeEndpoint({ host: 'fd12::1' });
    assert.deepEqual(allowed(check({ endpoint: v6, host: 'fd12::1', addresses: ['fd12:0:0::1'] })), ['fd12::1']);
  });

  it('refuses an always-blocked IP-literal endpoint even for its own IP', () => {
    const endpoint = makeEndpoint({ host: '169.254.169.254' });
    assert.equal(refused(check({ endpoint, addresses: ['169.254.169.254'] })).check, 'always-blocked');
  });
});

describe('validateDestination', () => {
  it('reports the most severe check when answers fail for different reasons', () => {
    const result = refused(check({ endpoint: WILDCARD, addresses: ['10.0.0.1', '169.254.169.254'] }));
    assert.equal(result.check, 'always-blocked');
    assert.deepEqual(result.dropped.map((d) => d.why), ['internal-address', 'always-blocked']);
  });

  it('refuses an empty answer list', () => {
    assert.equal(refused(check({ endpoint: WILDCARD, addresses: [] })).check, 'no-addresses');
  });

  it('drops answers that are not canonical IP literals', () => {
    const result = refused(check({ endpoint: EXACT, addresses: ['127.1', 'not-an-ip', '[::1]'] }));
    assert.deepEqual(result.dropped.map((d) => [d.ip, d.why]), [['127.1', 'always-blocked'], ['not-an-ip', 'always-blocked'], ['[::1]', 'always-blocked']]);
  });

  it('returns survivors in canonical form and in answer order', () => {
    assert.deepEqual(allowed(check({ endpoint: WILDCARD, addresses: ['2606:4700:0:0:0:0:0:1111', '8.8.4.4', '8.8.8.8'] })), [
      '2606:4700::1111',
      '8.8.4.4',
      '8.8.8.8',
    ]);
  });

  it('looks at no more than MAX_ANSWERS_CHECKED answers', () => {
    const many = Array.from({ length: MAX_ANSWERS_CHECKED + 5 }, (_, i) => `8.8.${i}.8`);
    assert.equal(allowed(check({ endpoint: WILDCARD, addresses: many })).length, MAX_ANSWERS_CHECKED);
  });

  it('reports allowed metadata addresses as a finding (IP-36)', () => {
    const result = check({ endpoint: EXACT, addresses: ['100.100.100.200', '10.0.0.1'] });
    assert.ok(result.ok);
    assert.deepEqual(result.metadataAddresses, ['100.100.100.200']);
  });

  it('lists nothing dropped and no metadata address when every answer passes, and each check its own drops', () => {
    const clean = check({ endpoint: EXACT, addresses: ['10.0.0.1', '8.8.8.8'] });
    assert.ok(clean.ok);
    assert.deepEqual(clean.dropped, []);
    assert.deepEqual(clean.metadataAddresses, []);
    const mixed = check({ endpoint: WILDCARD, addresses: ['10.0.0.1', '8.8.8.8', '169.254.169.254'] });
    assert.ok(mixed.ok);
    assert.deepEqual(
      mixed.dropped.map((d) => [d.ip, d.why]),
      [
        ['10.0.0.1', 'internal-address'],
        ['169.254.169.254', 'always-blocked'],
      ],
    );
    // A later clean check does not see the earlier one's drops.
    const again = check({ endpoint: EXACT, addresses: ['8.8.4.4'] });
    assert.ok(again.ok);
    assert.deepEqual(again.dropped, []);
    assert.deepEqual(again.metadataAddresses, []);
    assert.deepEqual(refused(check({ endpoint: PRIVATE_LIST, addresses: ['8.8.8.8'] })).dropped.map((d) => d.why), ['allowed-ips']);
  });

  it('judges each of several dotted quads by its own bytes', () => {
    const selfAddresses = prepareSelfAddresses([{ ip: '127.0.0.1', port: 443 }]);
    const result = check({ endpoint: PRIVATE_LIST, addresses: ['127.0.0.2', '10.1.2.3', '127.0.0.1', '8.8.8.8', '10.9.9.9'], allowLoopback: true, selfAddresses });
    assert.ok(result.ok);
    assert.deepEqual(result.addresses, ['127.0.0.2', '10.1.2.3', '10.9.9.9']);
    assert.deepEqual(
      result.dropped.map((d) => [d.ip, d.why]),
      [
        ['127.0.0.1', 'self-address'],
        ['8.8.8.8', 'allowed-ips'],
      ],
    );
  });

  it('does not let allowed_ips cover an always-blocked address, nor a mapped form of a listed one', () => {
    const broad = makeEndpoint({ host: 'x.example.test', allowedIps: ['0.0.0.0/0', '::/0'] });
    for (const ip of ['127.0.0.1', '169.254.169.254', '0.0.0.0', '198.18.0.1', '::1', 'fe80::1', '::ffff:7f00:1']) {
      assert.equal(refused(check({ endpoint: broad, addresses: [ip] })).check, 'always-blocked', ip);
    }
    assert.equal(refused(check({ endpoint: PRIVATE_LIST, addresses: ['::ffff:10.1.1.1'] })).check, 'allowed-ips');
  });

  it('never matches an allowed_ips entry that does not parse', () => {
    const endpoint = makeEndpoint({ host: 'x.example.test', allowedIps: ['10.0.0.0/33', 'garbage'] });
    assert.equal(refused(check({ endpoint, addresses: ['10.0.0.1'] })).check, 'allowed-ips');
  });
});

describe('allowLoopback (--unsafe-allow-loopback-upstream)', () => {
  it('lets 127.0.0.0/8 and ::1 pass on every plan', () => {
    const literal = makeEndpoint({ host: '10.0.0.7' });
    for (const endpoint of [WILDCARD, EXACT, PRIVATE_LIST, literal, undefined]) {
      for (const ip of ['127.0.0.1', '127.9.8.7', '::1']) {
        assert.deepEqual(allowed(check({ endpoint, addresses: [ip], allowLoopback: true })), [ip]);
      }
    }
  });

  it('relaxes nothing else: mapped loopback, metadata, unspecified, private and control-plane ports stay refused', () => {
    assert.equal(refused(check({ endpoint: EXACT, addresses: ['::ffff:127.0.0.1'], allowLoopback: true })).check, 'always-blocked');
    assert.equal(refused(check({ endpoint: EXACT, addresses: ['169.254.169.254'], allowLoopback: true })).check, 'always-blocked');
    assert.equal(refused(check({ endpoint: EXACT, addresses: ['0.0.0.0'], allowLoopback: true })).check, 'always-blocked');
    assert.equal(refused(check({ endpoint: WILDCARD, addresses: ['10.0.0.1'], allowLoopback: true })).check, 'internal-address');
    assert.equal(refused(check({ endpoint: EXACT, port: 6443, addresses: ['127.0.0.1'], allowLoopback: true })).check, 'control-plane-port');
  });

  it('is off unless asked for', () => {
    assert.equal(refused(check({ endpoint: EXACT, addresses: ['127.0.0.1'] })).check, 'always-blocked');
    assert.equal(refused(check({ endpoint: EXACT, addresses: ['127.0.0.1'], allowLoopback: false })).check, 'always-blocked');
  });
});

describe('self addresses (HA-19)', () => {
  const self = prepareSelfAddresses([{ ip: '127.0.0.1', port: 3128 }, { ip: '0.0.0.0', port: 9901 }, { ip: '10.0.0.5', port: 15000 }]);

  it('refuses boundary’s own listener even when loopback upstreams are allowed', () => {
    const result = refused(check({ endpoint: EXACT, port: 3128, addresses: ['127.0.0.1'], allowLoopback: true, selfAddresses: self }));
    assert.equal(result.check, 'self-address');
  });

  it('treats an unspecified listener as every loopback address on its port', () => {
    for (const ip of ['127.0.0.1', '127.0.0.53', '::1']) {
      const result = check({ endpoint: EXACT, port: 9901, addresses: [ip], allowLoopback: true, selfAddresses: self });
      assert.equal(refused(result).check, 'self-address', ip);
    }
  });

  it('refuses a non-loopback self address and its mapped form on plans that allow private addresses', () => {
    assert.equal(refused(check({ endpoint: EXACT, port: 15000, addresses: ['10.0.0.5'], selfAddresses: self })).check, 'self-address');
    assert.equal(refused(check({ endpoint: EXACT, port: 15000, addresses: ['::ffff:10.0.0.5'], selfAddresses: self })).check, 'self-address');
  });

  it('treats an unspecified listener as every address of the host’s interfaces on its port, on plans that allow them', () => {
    const pod = prepareSelfAddresses([{ ip: '0.0.0.0', port: 9901 }, { ip: '::', port: 15053 }], () => ['127.0.0.1', '10.244.1.2', 'fd00:244::2']);
    const privateList = makeEndpoint({ host: 'db.example.test', allowedIps: ['10.0.0.0/8', 'fd00::/8'] });
    assert.equal(refused(check({ endpoint: privateList, port: 9901, addresses: ['10.244.1.2'], selfAddresses: pod })).check, 'self-address');
    assert.equal(refused(check({ endpoint: privateList, port: 15053, addresses: ['fd00:244::2'], selfAddresses: pod })).check, 'self-address');
    assert.equal(refused(check({ endpoint: privateList, port: 15053, addresses: ['::ffff:10.244.1.2'], selfAddresses: pod })).check, 'self-address');
    // Another pod's address, and the pod's own on a port nobody listens on, are not boundary.
    assert.deepEqual(allowed(check({ endpoint: privateList, port: 9901, addresses: ['10.244.1.3'], selfAddresses: pod })), ['10.244.1.3']);
    assert.deepEqual(allowed(check({ endpoint: privateList, port: 8080, addresses: ['10.244.1.2'], selfAddresses: pod })), ['10.244.1.2']);
    assert.equal(isSelfAddress(pod, '10.244.1.2', 9901), true);
    assert.equal(isSelfAddress(pod, '10.244.1.2', 9902), false);
  });

  it('allows the same address on another port', () => {
    assert.deepEqual(allowed(check({ endpoint: EXACT, port: 8080, addresses: ['127.0.0.1'], allowLoopback: true, selfAddresses: self })), [
      '127.0.0.1',
    ]);
    assert.deepEqual(allowed(check({ endpoint: EXACT, port: 15001, addresses: ['10.0.0.5'], selfAddresses: self })), ['10.0.0.5']);
  });
});
