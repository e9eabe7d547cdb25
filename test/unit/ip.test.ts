import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cidrContains, cidrOverlaps, formatCidr, formatIp, hasCleanHostBits, parseCidr, parseIp } from '../../src/net/ip.js';

describe('parseIp and formatIp', () => {
  const roundTrips: [string, string][] = [
    ['1.2.3.4', '1.2.3.4'],
    ['::1', '::1'],
    ['::', '::'],
    ['FE80::1', 'fe80::1'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['64:ff9b::169.254.169.254', '64:ff9b::a9fe:a9fe'], // parsed only: the NAT64 form of a blocked address
  ];
  for (const [input, canonical] of roundTrips) {
    it(`formats ${input} as ${canonical}`, () => {
      const ip = parseIp(input);
      assert.ok(ip);
      assert.equal(formatIp(ip), canonical);
    });
  }

  for (const input of ['127.1', '0x7f.0.0.1', '2852039166', '1.2.3.4.', 'fe80::1%eth0', '[::1]', '', 'example.com']) {
    it(`does not take ${JSON.stringify(input)} as a canonical IP literal`, () => {
      assert.equal(parseIp(input), undefined);
    });
  }
});

describe('CIDR helpers', () => {
  const cidr = (text: string) => {
    const value = parseCidr(text);
    assert.ok(value, text);
    return value;
  };
  const ip = (text: string) => {
    const value = parseIp(text);
    assert.ok(value, text);
    return value;
  };

  it('rejects prefixes past the family length and malformed prefixes', () => {
    for (const bad of ['10.1.2.3/33', '300.1.1.1', '10.0.0.0/', '10.0.0.0/08', '::/129', '10.0.0.0/-1']) {
      assert.equal(parseCidr(bad), undefined, bad);
    }
  });

  it('reads a bare address as a full-length prefix', () => {
    assert.equal(formatCidr(cidr('10.1.2.3')), '10.1.2.3/32');
    assert.equal(formatCidr(cidr('::1')), '::1/128');
  });

  it('contains addresses at both edges and nothing outside', () => {
    const net = cidr('172.16.0.0/12');
    assert.ok(cidrContains(net, ip('172.16.0.0')));
    assert.ok(cidrContains(net, ip('172.31.255.255')));
    assert.ok(!cidrContains(net, ip('172.15.255.255')));
    assert.ok(!cidrContains(net, ip('172.32.0.0')));
    assert.ok(!cidrContains(net, ip('::ffff:172.16.0.1')), 'families never mix');
    assert.ok(cidrContains(cidr('fe80::/10'), ip('febf::1')));
    assert.ok(!cidrContains(cidr('fe80::/10'), ip('fec0::1')));
  });

  it('detects overlap in either direction', () => {
    assert.ok(cidrOverlaps(cidr('0.0.0.0/0'), cidr('127.0.0.1')));
    assert.ok(cidrOverlaps(cidr('127.0.0.1'), cidr('127.0.0.0/8')));
    assert.ok(!cidrOverlaps(cidr('10.0.0.0/8'), cidr('11.0.0.0/8')));
  });

  it('tells clean host bits from set ones', () => {
    assert.ok(hasCleanHostBits(cidr('10.0.0.0/8')));
    assert.ok(!hasCleanHostBits(cidr('10.1.0.0/8')));
    assert.ok(hasCleanHostBits(cidr('10.1.2.3/32')));
    assert.ok(!hasCleanHostBits(cidr('fd00::1/8')));
  });
});
