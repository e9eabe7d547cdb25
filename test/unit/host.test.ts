// Host and authority parsing: peer-tests §1 (HA-01..HA-18) and the Node host-parsing trap (docs/destinations.md#the-host-parsing-trap).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyAddress } from '../../src/net/address.js';
import { formatAuthority, MAX_NAME_CHARS, normaliseHost, parseAuthority, parseWhatwgIpv4 } from '../../src/net/host.js';

function host(raw: string): { host: string; kind: string } {
  const result = normaliseHost(raw);
  assert.ok(result.ok, `${JSON.stringify(raw)} should normalise: ${result.ok ? '' : result.message}`);
  return { host: result.host, kind: result.kind };
}

function authority(text: string, defaultPort?: number): { host: string; port: number; kind: string } {
  const result = parseAuthority(text, defaultPort === undefined ? {} : { defaultPort });
  assert.ok(result.ok, `${JSON.stringify(text)} should parse: ${result.ok ? '' : result.message}`);
  return { host: result.host, port: result.port, kind: result.kind };
}

function rejectsAuthority(text: string): void {
  const result = parseAuthority(text);
  assert.equal(result.ok, false, `${JSON.stringify(text)} should be refused`);
}

describe('parseAuthority (peer-tests §1)', () => {
  it('HA-01 accepts a plain name and port', () => {
    assert.deepEqual(authority('api.example.com:443'), { host: 'api.example.com', port: 443, kind: 'name' });
  });

  it('HA-02 lower-cases and strips one trailing dot', () => {
    assert.deepEqual(authority('API.Example.COM.:443'), { host: 'api.example.com', port: 443, kind: 'name' });
  });

  it('HA-03 parses a bracketed IPv6 literal, which classifies as public', () => {
    const parsed = authority('[2606:4700::1111]:443');
    assert.deepEqual(parsed, { host: '2606:4700::1111', port: 443, kind: 'ipv6' });
    assert.equal(classifyAddress(parsed.host).tier, 'public');
  });

  it('HA-04 refuses an unbracketed IPv6 literal with a port', () => {
    rejectsAuthority('2606:4700::1111:443');
  });

  it('HA-05 refuses doubled or unterminated brackets', () => {
    for (const text of ['[[::1]]:443', '[::1:443', '[::1]]:443', '[::1]x:443', ']:443', '[]:443', '[1.2.3.4]:443']) {
      rejectsAuthority(text);
    }
  });

  it('HA-06 refuses a missing port or a missing host', () => {
    for (const text of ['api.example.com', 'api.example.com:', ':443', ':', '::', '[::1]', '[::1]:']) rejectsAuthority(text);
  });

  it('HA-07 refuses ports that are zero, too large, signed, named or padded', () => {
    for (const port of ['0', '65536', '91337', '-1', 'https', ' 443', '443 ', '+443', '4 43', '1e3', '0x1bb', '443.0']) {
      rejectsAuthority(`api.example.com:${port}`);
    }
  });

  it('HA-08 refuses a port with leading zeros (pin: 007 is 400)', () => {
    for (const port of ['007', '0443', '00']) rejectsAuthority(`api.example.com:${port}`);
  });

  it('HA-09 accepts port 65535 and port 1', () => {
    assert.equal(authority('api.example.com:65535').port, 65_535);
    assert.equal(authority('api.example.com:1').port, 1);
  });

  it('HA-10 refuses userinfo', () => {
    for (const text of ['user@api.example.com:443', 'user:pw@api.example.com:443', '@api.example.com:443']) rejectsAuthority(text);
  });

  it('HA-11 refuses a path, query or fragment', () => {
    for (const text of ['a.com:443/x', 'a.com:443?q', 'a.com:443#f', 'a.com/x:443', 'a.com\\x:443']) rejectsAuthority(text);
  });

  it('HA-12 refuses whitespace, percent-encoding and control bytes anywhere', () => {
    const bad = ['api.example.com :443', ' api.example.com:443', 'api.exa mple.com:443', 'api%2eexample.com:443', 'api.example.com\u0000:443',
      'api.example.com\t:443', 'api.example\r\n.com:443', 'api.example.com:44\u00003', 'api.\u007fexample.com:443', 'api.example.com:443\n'];
    for (const text of bad) rejectsAuthority(text);
  });

  it('HA-13 refuses empty labels, 64-character labels and names of 254+ characters', () => {
    rejectsAuthority('a..example.com:443');
    rejectsAuthority(`${'a'.repeat(64)}.example.com:443`);
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`;
    assert.equal(long.length, 254);
    rejectsAuthority(`${long}:443`);
    const longest = long.slice(1);
    assert.equal(longest.length, MAX_NAME_CHARS);
    assert.equal(authority(`${longest}:443`).host, longest);
    assert.equal(authority(`${longest}.:443`).host, longest, 'the trailing dot does not count');
    assert.equal(authority(`${'a'.repeat(63)}.example.com:443`).kind, 'name');
  });

  it('HA-14 accepts underscore labels like any other label (pin)', () => {
    assert.deepEqual(authority('_svc._tcp.example.com:443'), { host: '_svc._tcp.example.com', port: 443, kind: 'name' });
  });

  it('HA-15 maps U-labels to A-labels so both spellings are the same host', () => {
    assert.equal(authority('bücher.example:443').host, 'xn--bcher-kva.example');
    assert.equal(authority('xn--bcher-kva.example:443').host, 'xn--bcher-kva.example');
    assert.equal(authority('XN--BCHER-KVA.EXAMPLE:443').host, 'xn--bcher-kva.example');
  });

  it('HA-16 turns a mixed-script look-alike into a different A-label', () => {
    const lookalike = authority('\u0430pi.example.com:443').host;
    assert.notEqual(lookalike, 'api.example.com');
    assert.match(lookalike, /^xn--/);
  });

  it('HA-17 reports an IPv4 literal as kind ipv4, never as a name', () => {
    assert.deepEqual(authority('1.2.3.4:443'), { host: '1.2.3.4', port: 443, kind: 'ipv4' });
  });

  it('HA-18 refuses a zone id, encoded or not', () => {
    for (const text of ['[fe80::1%25eth0]:443', '[fe80::1%eth0]:443']) rejectsAuthority(text);
    assert.equal(normaliseHost('fe80::1%eth0').ok, false);
  });

  it('uses the default port only when the authority has none', () => {
    assert.equal(authority('api.example.com', 80).port, 80);
    assert.equal(authority('[::1]', 443).port, 443);
    assert.equal(authority('api.example.com:8080', 80).port, 8080);
    assert.equal(parseAuthority('api.example.com:', { defaultPort: 80 }).ok, false);
  });

  it('canonicalises numeric IPv4 inside an authority', () => {
    assert.deepEqual(authority('0x7f.1:8080'), { host: '127.0.0.1', port: 8080, kind: 'ipv4' });
  });
});

describe('normaliseHost', () => {
  // docs/destinations.md#the-host-parsing-trap and peer-tests IP-02..IP-12: every one of these is an IP to getaddrinfo and WHATWG URL.
  const numeric: readonly [string, string][] = [
    ['2852039166', '169.254.169.254'],
    ['0251.0376.0251.0376', '169.254.169.254'],
    ['0xa9.0xfe.0xa9.0xfe', '169.254.169.254'],
    ['0xA9FEA9FE', '169.254.169.254'],
    ['0XA9FEA9FE', '169.254.169.254'],
    ['169.254.43518', '169.254.169.254'],
    ['127.1', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['017700000001', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['127.0.0.1.', '127.0.0.1'],
    ['0', '0.0.0.0'],
    ['0x', '0.0.0.0'],
    ['4294967295', '255.255.255.255'],
    ['10.0.0.7', '10.0.0.7'],
    ['0x0a.0.0.7', '10.0.0.7'],
    ['\uff11\uff12\uff17.\uff10.\uff10.\uff11', '127.0.0.1'],
  ];
  for (const [input, canonical] of numeric) {
    it(`canonicalises ${JSON.stringify(input)} to ${canonical} with WHATWG IPv4 rules`, () => {
      assert.deepEqual(host(input), { host: canonical, kind: 'ipv4' });
    });
  }

  it('refuses hosts that end in a number but are not valid IPv4', () => {
    for (const raw of ['1.2.3.4.5', '256.0.0.1', '1.2.3.256', '1.2.65536', '4294967296', '0x100000000', '08', '09.1.1.1',
      'example.123', 'a.0x10', '1.2.3.4..', '99999999999999999999999']) {
      assert.equal(normaliseHost(raw).ok, false, raw);
    }
  });

  it('keeps names whose non-final labels are numeric', () => {
    assert.deepEqual(host('123.example.com'), { host: '123.example.com', kind: 'name' });
    assert.deepEqual(host('0x7f.example'), { host: '0x7f.example', kind: 'name' });
  });

  it('returns IPv6 canonical and unbracketed, bracketed or not', () => {
    assert.deepEqual(host('[2606:4700:0:0::1111]'), { host: '2606:4700::1111', kind: 'ipv6' });
    assert.deepEqual(host('2606:4700:0000::1111'), { host: '2606:4700::1111', kind: 'ipv6' });
    assert.deepEqual(host('[::FFFF:127.0.0.1]'), { host: '::ffff:7f00:1', kind: 'ipv6' });
    assert.equal(normaliseHost('[::1').ok, false);
    assert.equal(normaliseHost('[[::1]]').ok, false);
    assert.equal(normaliseHost('1::2::3').ok, false);
  });

  it('strips exactly one trailing dot', () => {
    assert.equal(host('example.com.').host, 'example.com');
    assert.equal(normaliseHost('example.com..').ok, false);
    assert.equal(normaliseHost('.').ok, false);
    assert.equal(normaliseHost('.example.com').ok, false);
  });

  it('refuses characters a hostname never has, and invalid punycode', () => {
    for (const raw of ['', 'a*b.com', 'a!b.com', 'a,b.com', 'a"b.com', 'a<b.com', 'xn--zz.com', 'a\u200db.com', 'a b.com', 'a%41.com',
      'a@b.com', 'a/b', 'a?b', 'a#b', 'a\\b', 'x'.repeat(2_000)]) {
      assert.equal(normaliseHost(raw).ok, false, JSON.stringify(raw));
    }
  });

  it('gives IDNA-equivalent spellings one A-label form', () => {
    assert.equal(host('B\u00fccher.Example').host, 'xn--bcher-kva.example');
    assert.equal(host('stra\u00dfe.example').host, 'xn--strae-oqa.example');
    assert.equal(host('a\u3002b.example').host, 'a.b.example');
  });
});

describe('parseWhatwgIpv4', () => {
  it('parses 1 to 4 parts, the last filling the remaining bytes', () => {
    assert.equal(parseWhatwgIpv4('1'), '0.0.0.1');
    assert.equal(parseWhatwgIpv4('1.2'), '1.0.0.2');
    assert.equal(parseWhatwgIpv4('1.2.3'), '1.2.0.3');
    assert.equal(parseWhatwgIpv4('1.2.3.4'), '1.2.3.4');
    assert.equal(parseWhatwgIpv4('1.2.3.4.5'), undefined);
    assert.equal(parseWhatwgIpv4('1..2'), undefined);
  });
});

describe('formatAuthority', () => {
  it('brackets IPv6 and round-trips through parseAuthority', () => {
    for (const [h, port] of [['api.example.com', 443], ['10.0.0.1', 80], ['2606:4700::1111', 8443]] as const) {
      const text = formatAuthority(h, port);
      assert.deepEqual([authority(text).host, authority(text).port], [h, port]);
    }
    assert.equal(formatAuthority('::1', 443), '[::1]:443');
  });
});
