// The SSRF address table: peer-tests §2 IP-01..IP-45 against classifyAddress and every validation plan.
// ALWAYS = blocked on every plan; INTERNAL = blocked on public-only only; PUBLIC = allowed everywhere.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ADDRESS_CLASSES, type AddressClass, classifyAddress } from '../../src/net/address.js';
import { normaliseHost } from '../../src/net/host.js';
import { validateDestination } from '../../src/net/ssrf.js';
import { makeEndpoint } from '../harness/endpoint.js';

type Expect = 'ALWAYS' | 'INTERNAL' | 'PUBLIC';
const TIER: Readonly<Record<Expect, string>> = { ALWAYS: 'blocked', INTERNAL: 'internal', PUBLIC: 'public' };

interface Row {
  readonly id: string;
  readonly inputs: readonly string[];
  readonly expect: Expect;
  readonly class: AddressClass;
  readonly metadata?: boolean;
  readonly embedded?: string;
}

const IP_ROWS: readonly Row[] = [
  { id: 'IP-01', inputs: ['169.254.169.254'], expect: 'ALWAYS', class: 'metadata', metadata: true },
  { id: 'IP-02', inputs: ['2852039166'], expect: 'ALWAYS', class: 'metadata', metadata: true },
  { id: 'IP-03', inputs: ['0251.0376.0251.0376'], expect: 'ALWAYS', class: 'metadata', metadata: true },
  { id: 'IP-04', inputs: ['0xa9.0xfe.0xa9.0xfe'], expect: 'ALWAYS', class: 'metadata', metadata: true },
  { id: 'IP-05', inputs: ['0xA9FEA9FE'], expect: 'ALWAYS', class: 'metadata', metadata: true },
  { id: 'IP-06', inputs: ['169.254.43518'], expect: 'ALWAYS', class: 'metadata', metadata: true },
  { id: 'IP-07', inputs: ['127.1'], expect: 'ALWAYS', class: 'loopback' },
  { id: 'IP-08', inputs: ['0177.0.0.1'], expect: 'ALWAYS', class: 'loopback' },
  { id: 'IP-09', inputs: ['017700000001'], expect: 'ALWAYS', class: 'loopback' },
  { id: 'IP-10', inputs: ['0x7f.1'], expect: 'ALWAYS', class: 'loopback' },
  { id: 'IP-11', inputs: ['127.0.0.1.'], expect: 'ALWAYS', class: 'loopback' },
  { id: 'IP-12', inputs: ['0'], expect: 'ALWAYS', class: 'unspecified' },
  { id: 'IP-13', inputs: ['0.0.0.0'], expect: 'ALWAYS', class: 'unspecified' },
  { id: 'IP-14', inputs: ['0.1.2.3'], expect: 'ALWAYS', class: 'unspecified' },
  { id: 'IP-15', inputs: ['[::1]'], expect: 'ALWAYS', class: 'loopback' },
  { id: 'IP-16', inputs: ['[::]'], expect: 'ALWAYS', class: 'unspecified' },
  { id: 'IP-17', inputs: ['[::ffff:127.0.0.1]'], expect: 'ALWAYS', class: 'loopback', embedded: '127.0.0.1' },
  { id: 'IP-18', inputs: ['[::ffff:a9fe:a9fe]'], expect: 'ALWAYS', class: 'metadata', metadata: true, embedded: '169.254.169.254' },
  { id: 'IP-19', inputs: ['[::169.254.169.254]'], expect: 'ALWAYS', class: 'metadata', metadata: true, embedded: '169.254.169.254' },
  { id: 'IP-20', inputs: ['[64:ff9b::a9fe:a9fe]'], expect: 'ALWAYS', class: 'metadata', metadata: true, embedded: '169.254.169.254' },
  { id: 'IP-21', inputs: ['[64:ff9b:1::a9fe:a9fe]', '[64:ff9b:1:ffff::1]'], expect: 'INTERNAL', class: 'nat64' },
  { id: 'IP-22', inputs: ['[2002:a9fe:a9fe::1]'], expect: 'ALWAYS', class: 'metadata', metadata: true, embedded: '169.254.169.254' },
  { id: 'IP-23', inputs: ['[2001:0:4136:e378:8000:63bf:3fff:fdd2]'], expect: 'INTERNAL', class: 'teredo' },
  { id: 'IP-24', inputs: ['[::5efe:10.0.0.1]'], expect: 'INTERNAL', class: 'reserved' },
  { id: 'IP-25', inputs: ['[fd00:ec2::254]'], expect: 'ALWAYS', class: 'metadata', metadata: true },
  { id: 'IP-26', inputs: ['[fd12:3456::1]'], expect: 'INTERNAL', class: 'ula' },
  { id: 'IP-27', inputs: ['[fe80::1]'], expect: 'ALWAYS', class: 'link-local' },
  { id: 'IP-28', inputs: ['[fec0::1]'], expect: 'INTERNAL', class: 'site-local' },
  { id: 'IP-29', inputs: ['[ff02::2]'], expect: 'ALWAYS', class: 'multicast' },
  { id: 'IP-30', inputs: ['10.0.0.1', '10.255.255.255'], expect: 'INTERNAL', class: 'private' },
  { id: 'IP-31', inputs: ['172.16.0.0', '172.31.255.255'], expect: 'INTERNAL', class: 'private' },
  { id: 'IP-32', inputs: ['172.15.255.255', '172.32.0.0'], expect: 'PUBLIC', class: 'public' },
  { id: 'IP-33', inputs: ['192.168.0.1'], expect: 'INTERNAL', class: 'private' },
  { id: 'IP-34', inputs: ['100.64.0.1', '100.127.255.254'], expect: 'INTERNAL', class: 'cgnat' },
  { id: 'IP-35', inputs: ['100.63.255.254', '100.128.0.1'], expect: 'PUBLIC', class: 'public' },
  { id: 'IP-36', inputs: ['100.100.100.200'], expect: 'INTERNAL', class: 'cgnat', metadata: true },
  { id: 'IP-37', inputs: ['192.0.0.192'], expect: 'INTERNAL', class: 'ietf-protocol', metadata: true },
  { id: 'IP-38', inputs: ['192.0.2.1', '198.51.100.1', '203.0.113.1'], expect: 'INTERNAL', class: 'documentation' },
  { id: 'IP-39', inputs: ['198.18.0.1', '198.19.255.255'], expect: 'ALWAYS', class: 'benchmarking' },
  { id: 'IP-40', inputs: ['198.17.255.255', '198.20.0.0'], expect: 'PUBLIC', class: 'public' },
  { id: 'IP-41', inputs: ['224.0.0.1', '239.255.255.250'], expect: 'ALWAYS', class: 'multicast' },
  { id: 'IP-42', inputs: ['240.0.0.1'], expect: 'ALWAYS', class: 'reserved' },
  { id: 'IP-43', inputs: ['255.255.255.255'], expect: 'ALWAYS', class: 'broadcast' },
  { id: 'IP-44', inputs: ['8.8.8.8', '[2606:4700:4700::1111]'], expect: 'PUBLIC', class: 'public' },
  { id: 'IP-45', inputs: ['[::ffff:8.8.8.8]'], expect: 'PUBLIC', class: 'public', embedded: '8.8.8.8' },
];

// Range edges around every table row (B): one address just inside, one just outside.
const EDGE_ROWS: readonly Row[] = [
  { id: 'edge 0/8', inputs: ['0.255.255.255'], expect: 'ALWAYS', class: 'unspecified' },
  { id: 'edge 127/8', inputs: ['127.255.255.255', '127.0.0.0'], expect: 'ALWAYS', class: 'loopback' },
  { id: 'edge 169.254/16', inputs: ['169.254.0.0', '169.254.255.255'], expect: 'ALWAYS', class: 'link-local' },
  { id: 'edge 224/4', inputs: ['224.0.0.0', '239.255.255.255'], expect: 'ALWAYS', class: 'multicast' },
  { id: 'edge 240/4', inputs: ['255.255.255.254'], expect: 'ALWAYS', class: 'reserved' },
  { id: 'edge 100.64/10', inputs: ['100.64.0.0', '100.127.255.255'], expect: 'INTERNAL', class: 'cgnat' },
  { id: 'edge 192.0.0/24', inputs: ['192.0.0.0', '192.0.0.255'], expect: 'INTERNAL', class: 'ietf-protocol' },
  { id: 'edge 192.168/16', inputs: ['192.168.255.255'], expect: 'INTERNAL', class: 'private' },
  { id: 'edge 6to4 relay', inputs: ['192.88.99.1'], expect: 'INTERNAL', class: 'reserved' },
  { id: 'edge fc00::/7', inputs: ['[fc00::]', '[fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]'], expect: 'INTERNAL', class: 'ula' },
  { id: 'edge fe80::/10', inputs: ['[febf:ffff::1]'], expect: 'ALWAYS', class: 'link-local' },
  { id: 'edge fec0::/10', inputs: ['[feff::1]'], expect: 'INTERNAL', class: 'site-local' },
  { id: 'edge ff00::/8', inputs: ['[ff00::]', '[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]'], expect: 'ALWAYS', class: 'multicast' },
  { id: 'edge ::/8', inputs: ['[::1:0:0:1]', '[ff:ffff::1]'], expect: 'INTERNAL', class: 'reserved' },
  { id: 'edge unassigned v6', inputs: ['[4000::1]', '[fe00::1]', '[1fff::1]'], expect: 'INTERNAL', class: 'reserved' },
  { id: 'edge documentation v6', inputs: ['[2001:db8::1]', '[3fff::1]'], expect: 'INTERNAL', class: 'documentation' },
  { id: 'edge compat public', inputs: ['[::8.8.8.8]'], expect: 'INTERNAL', class: 'reserved', embedded: '8.8.8.8' },
  { id: 'edge nat64 private', inputs: ['[64:ff9b::10.0.0.1]'], expect: 'INTERNAL', class: 'private', embedded: '10.0.0.1' },
  { id: 'edge 6to4 public', inputs: ['[2002:808:808::1]'], expect: 'PUBLIC', class: 'public', embedded: '8.8.8.8' },
  {
    id: 'just outside',
    inputs: ['1.0.0.0', '9.255.255.255', '11.0.0.0', '126.255.255.255', '128.0.0.0', '169.253.255.255', '169.255.0.0', '192.167.255.255',
      '192.169.0.0', '192.0.1.0', '223.255.255.255', '[2000::1]', '[2001:1::1]', '[2001:db9::1]', '[3fff:1000::1]', '[2003::1]'],
    expect: 'PUBLIC',
    class: 'public',
  },
];

function canonical(input: string): string {
  const result = normaliseHost(input);
  assert.ok(result.ok, `${input} should normalise`);
  assert.notEqual(result.kind, 'name', `${input} must be an IP literal, never a name`);
  return result.host;
}

/** Outcome of one canonical IP on each plan, with the port fixed at 443. */
function outcomes(ip: string): Record<string, boolean> {
  const prefix = ip.includes(':') ? 128 : 32;
  const run = (endpoint: ReturnType<typeof makeEndpoint> | undefined) =>
    validateDestination({ endpoint, host: 'dest.example.test', port: 443, addresses: [ip] }).ok;
  return {
    'public-only (wildcard)': run(makeEndpoint({ host: '*.example.test' })),
    'public-only (no endpoint)': run(undefined),
    'covering allowed_ips': run(makeEndpoint({ host: 'dest.example.test', allowedIps: [`${ip}/${prefix}`] })),
    'exact host': run(makeEndpoint({ host: 'dest.example.test' })),
    'matching IP literal': run(makeEndpoint({ host: ip, hostKind: 'ip' })),
  };
}

function expectedOutcomes(expect: Expect): Record<string, boolean> {
  const notAlways = expect !== 'ALWAYS';
  return {
    'public-only (wildcard)': expect === 'PUBLIC',
    'public-only (no endpoint)': expect === 'PUBLIC',
    'covering allowed_ips': notAlways,
    'exact host': notAlways,
    'matching IP literal': notAlways,
  };
}

for (const [title, rows] of [['peer-tests §2 IP rows', IP_ROWS], ['range edges', EDGE_ROWS]] as const) {
  describe(title, () => {
    for (const row of rows) {
      for (const input of row.inputs) {
        it(`${row.id}: ${input} is ${row.expect} (${row.class}) and gets that outcome on every plan`, () => {
          const ip = canonical(input);
          const got = classifyAddress(ip);
          assert.equal(got.tier, TIER[row.expect]);
          assert.equal(got.class, row.class);
          assert.equal(got.metadata, row.metadata ?? false);
          assert.equal(got.embedded, row.embedded);
          assert.deepEqual(outcomes(ip), expectedOutcomes(row.expect));
        });
      }
    }
  });
}

describe('classifyAddress', () => {
  it('refuses anything that is not a canonical IP literal as invalid and blocked', () => {
    for (const text of ['127.1', '0x7f.0.0.1', '[::1]', 'fe80::1%eth0', 'localhost', '', '1.2.3.4.5', '01.2.3.4']) {
      assert.deepEqual(classifyAddress(text), { class: 'invalid', tier: 'blocked', metadata: false }, text);
    }
  });

  it('only ever returns classes from ADDRESS_CLASSES', () => {
    const seen = new Set<string>();
    for (const row of [...IP_ROWS, ...EDGE_ROWS]) for (const input of row.inputs) seen.add(classifyAddress(canonical(input)).class);
    for (const cls of seen) assert.ok((ADDRESS_CLASSES as readonly string[]).includes(cls), cls);
  });

  it('classifies every IPv4-mapped address exactly as its IPv4 address, with at least its strictness', () => {
    // A bounded sweep over first octets: ::ffff:a.b.c.d never comes out less strict than a.b.c.d.
    const rank = { public: 0, internal: 1, blocked: 2 } as const;
    for (let a = 0; a < 256; a++) {
      for (const rest of ['0.0.1', '254.169.254', '100.100.200', '255.255.255']) {
        const v4 = `${a}.${rest}`;
        const plain = classifyAddress(v4);
        // ::0.0.0.1 is ::1 itself, which is not an embedding.
        const wrappers = v4 === '0.0.0.1' ? [`::ffff:${v4}`, `64:ff9b::${v4}`] : [`::ffff:${v4}`, `64:ff9b::${v4}`, `::${v4}`];
        for (const wrapped of wrappers) {
          const inner = classifyAddress(canonical(wrapped));
          assert.ok(rank[inner.tier] >= rank[plain.tier], `${wrapped} is ${inner.tier} but ${v4} is ${plain.tier}`);
          assert.equal(inner.embedded, v4);
        }
      }
    }
  });

  it('returns the same frozen object for unembedded addresses (no allocation on the hot path)', () => {
    assert.equal(classifyAddress('8.8.8.8'), classifyAddress('1.1.1.1'));
    assert.equal(classifyAddress('10.0.0.1'), classifyAddress('10.9.9.9'));
    assert.ok(Object.isFrozen(classifyAddress('10.0.0.1')));
  });
});
