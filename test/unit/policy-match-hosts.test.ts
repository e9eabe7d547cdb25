// Pinned host tables (docs/policy.md: Host patterns, Host matching): the wildcard grammar, runtime matching,
// policy hosts normalised exactly as request hosts (HA-15), and host pattern overlap (used by V13).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normaliseHost } from '../../src/net/host.js';
import { decide } from '../../src/policy/decide.js';
import { normalisePolicyHost } from '../../src/policy/host-pattern.js';
import { compileHostPattern, type HostMatcher, hostPatternsOverlap } from '../../src/policy/match.js';
import { parsePolicy } from '../../src/policy/parse.js';

function host(pattern: string): HostMatcher {
  const result = normalisePolicyHost(pattern);
  assert.ok(result.ok, `${pattern} should be a valid policy host`);
  return compileHostPattern(result.host, result.kind);
}

describe('host wildcard grammar (docs/policy.md#host-patterns)', () => {
  const accepted: [string, string, string][] = [
    ['api.example.com', 'api.example.com', 'exact'],
    ['10.1.2.3', '10.1.2.3', 'ip'],
    ['*.example.com', '*.example.com', 'wildcard'],
    ['**.example.com', '**.example.com', 'wildcard'],
    ['*-ai.example.com', '*-ai.example.com', 'wildcard'],
    ['api.*.example.com', 'api.*.example.com', 'wildcard'],
    ['*.s3.*.amazonaws.com', '*.s3.*.amazonaws.com', 'wildcard'],
    ['*.co.uk', '*.co.uk', 'wildcard'],
    ['API.Example.COM.', 'api.example.com', 'exact'],
    ['bücher.example', 'xn--bcher-kva.example', 'exact'],
    ['*.Bücher.example', '*.xn--bcher-kva.example', 'wildcard'],
    ['[2001:DB8::1]', '2001:db8::1', 'ip'],
    ['2001:0db8:0:0:0:0:0:1', '2001:db8::1', 'ip'],
    ['_svc.example.com', '_svc.example.com', 'exact'],
  ];
  for (const [pattern, normalised, kind] of accepted) {
    it(`accepts ${pattern} as ${kind} ${normalised}`, () => {
      const result = normalisePolicyHost(pattern);
      assert.ok(result.ok);
      assert.equal(result.host, normalised);
      assert.equal(result.kind, kind);
    });
  }

  const rejected: [string, string][] = [
    ['*', 'POLICY_HOST_WILDCARD'],
    ['**', 'POLICY_HOST_WILDCARD'],
    ['*.com', 'POLICY_HOST_WILDCARD'],
    ['**.com', 'POLICY_HOST_WILDCARD'],
    ['*example.com', 'POLICY_HOST_WILDCARD'],
    ['api.ex*.com', 'POLICY_HOST_WILDCARD'],
    ['a.**.example.com', 'POLICY_HOST_WILDCARD'],
    ['example.*', 'POLICY_HOST_WILDCARD'],
    ['api.example.*', 'POLICY_HOST_WILDCARD'],
    ['api.*.com', 'POLICY_HOST_WILDCARD'],
    ['{a,b}.example.com', 'POLICY_HOST_WILDCARD'],
    ['?.example.com', 'POLICY_HOST_WILDCARD'],
    ['[ab].example.com', 'POLICY_HOST_WILDCARD'],
    ['**-ai.example.com', 'POLICY_HOST_WILDCARD'],
    ['a..example.com', 'POLICY_HOST_INVALID'],
    [`${'a'.repeat(64)}.example.com`, 'POLICY_HOST_INVALID'],
    ['api.example.com:443', 'POLICY_HOST_INVALID'],
    ['https://api.example.com', 'POLICY_HOST_INVALID'],
    ['fe80::1%eth0', 'POLICY_HOST_INVALID'],
    ['', 'POLICY_HOST_INVALID'],
    ['-bad.example.com', 'POLICY_HOST_INVALID'],
  ];
  for (const [pattern, code] of rejected) {
    it(`rejects ${JSON.stringify(pattern)} with ${code}`, () => {
      const result = normalisePolicyHost(pattern);
      assert.equal(result.ok, false);
      assert.equal(result.ok ? undefined : result.code, code);
    });
  }

  it('warns when the fixed suffix of a wildcard is a public suffix', () => {
    const result = normalisePolicyHost('*.github.io');
    assert.ok(result.ok && result.warning !== undefined);
    const plain = normalisePolicyHost('*.example.com');
    assert.ok(plain.ok && plain.warning === undefined);
  });

  it('rejects a trailing dot and IP literals for protocol tcp', () => {
    for (const raw of ['db.example.com.', '10.0.0.1', '[::1]']) {
      const result = normalisePolicyHost(raw, { tcp: true });
      assert.equal(result.ok ? undefined : result.code, 'POLICY_TCP_HOST', raw);
    }
  });
});

describe('host runtime matching (docs/policy.md#host-matching, pinned)', () => {
  const table: [string, string, boolean][] = [
    ['*.example.com', 'a.example.com', true],
    ['*.example.com', 'a.b.example.com', false],
    ['*.example.com', 'example.com', false],
    ['**.example.com', 'a.b.c.example.com', true],
    ['**.example.com', 'a.example.com', true],
    ['**.example.com', 'example.com', false],
    ['*.example.com', 'evilexample.com', false],
    ['*.example.com', 'a.example.com.evil.net', false],
    ['*-ai.example.com', 'us-ai.example.com', true],
    ['*-ai.example.com', 'x.us-ai.example.com', false],
    ['*-ai.example.com', 'us-ai-x.example.com', false],
    ['*.s3.*.amazonaws.com', 'b.s3.us-east-1.amazonaws.com', true],
    ['*.s3.*.amazonaws.com', 'b.s3.a.b.amazonaws.com', false],
    ['api.*.example.com', 'api.eu.example.com', true],
    ['api.*.example.com', 'web.eu.example.com', false],
    ['api.example.com', 'api.example.com', true],
    ['api.example.com', 'www.api.example.com', false],
  ];
  for (const [pattern, name, expected] of table) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${name}`, () => {
      assert.equal(host(pattern).matches(name), expected);
      assert.equal(host(pattern).explain(name) === undefined, expected);
    });
  }

  it('matches API.Example.COM. after request-side normalisation through the policy index', () => {
    const policy = parsePolicy('version: 1\nnetwork_policies:\n  a:\n    endpoints: [{ host: api.example.com, port: 443 }]\n');
    assert.equal(policy.endpointsForHost('API.Example.COM.').length, 1);
  });
});

describe('policy hosts and request hosts normalise alike (docs/policy.md#host-patterns, HA-15)', () => {
  // Each spelling is run through both sides: the policy host must be exactly what normaliseHost() makes of the
  // same text, or refused when the request side refuses it. Lower-casing before IDNA broke this for 46 code
  // points (U+1E9E, Georgian capitals, U+04C0): ẞ lower-cases to ß (A-label xn--zca) but UTS 46 maps it to ss.
  const spellings = [
    'ẞ.example.com',
    'Ⴀx.example.com',
    'Ӏx.example.com',
    'ＡＰＩ.example.com',
    'api。example。com',
    'api.example.com。',
    'Bücher.example',
    '１２７.１',
    '0x7f.1',
    '10.0.0.07',
    '[::FFFF:10.0.0.1]',
    'foo.123',
  ];
  for (const spelling of spellings) {
    it(`normalises ${JSON.stringify(spelling)} on the policy side exactly as on the request side`, () => {
      const request = normaliseHost(spelling);
      const policy = normalisePolicyHost(spelling);
      assert.equal(policy.ok, request.ok);
      if (policy.ok && request.ok) assert.equal(policy.host, request.host);
    });
  }

  it('maps a capital sharp s in a policy host the way requests are mapped (ss, not xn--zca)', () => {
    const policy = parsePolicy('version: 1\nnetwork_policies:\n  a:\n    endpoints: [{ host: ẞ.example.com, port: 443 }]\n');
    const asked = normaliseHost('ẞ.example.com');
    assert.ok(asked.ok);
    assert.equal(decide(policy, { adapter: 'connect', host: asked.host, port: 443 }).verdict, 'allow');
    assert.equal(decide(policy, { adapter: 'connect', host: 'xn--zca.example.com', port: 443 }).verdict, 'deny');
  });

  it('maps wildcard hosts with IDNA on the whole name, as requests are', () => {
    const result = normalisePolicyHost('*.ẞ.Example.com');
    assert.ok(result.ok);
    assert.equal(result.host, '*.ss.example.com');
  });

  it('accepts all-digit and hex-looking labels inside a wildcard host and matches them', () => {
    for (const [pattern, name] of [
      ['*.1.example.com', 'a.1.example.com'],
      ['**.0x10.example.com', 'a.b.0x10.example.com'],
      ['api.*.2.example.com', 'api.eu.2.example.com'],
    ] as const) {
      const matcher = host(pattern);
      assert.equal(matcher.pattern, pattern);
      const asked = normaliseHost(name);
      assert.ok(asked.ok && asked.kind === 'name');
      assert.equal(matcher.matches(asked.host), true, `${pattern} should match ${name}`);
    }
  });

  it('rejects a wildcard whose name ends in a number: requests read such names as IPv4', () => {
    for (const pattern of ['*.example.1', '*.1.2.3', '**.0x7f.1']) {
      const result = normalisePolicyHost(pattern);
      assert.equal(result.ok, false, pattern);
    }
  });

  it('accepts a trailing ideographic full stop like a trailing dot, and refuses it for protocol tcp', () => {
    const result = normalisePolicyHost('api.example.com。');
    assert.ok(result.ok);
    assert.equal(result.host, 'api.example.com');
    const tcp = normalisePolicyHost('api.example.com。', { tcp: true });
    assert.equal(tcp.ok ? undefined : tcp.code, 'POLICY_TCP_HOST');
  });
});

describe('host pattern overlap (V13)', () => {
  const table: [string, string, boolean][] = [
    ['*.example.com', 'api.example.com', true],
    ['*.example.com', 'a.b.example.com', false],
    ['**.example.com', 'a.b.example.com', true],
    ['**.example.com', '*.example.com', true],
    ['**.a.example.com', '**.example.com', true],
    ['*.a.example.com', '*.example.com', false],
    ['api.*.example.com', '*.foo.example.com', true],
    ['*-ai.example.com', 'us-*.example.com', true],
    ['*-ai.example.com', '*-ml.example.com', false],
    ['*.example.com', '*.example.net', false],
    ['10.0.0.1', '10.0.0.1', true],
    ['10.0.0.1', '*.example.com', false],
  ];
  for (const [a, b, expected] of table) {
    it(`${a} and ${b} ${expected ? 'overlap' : 'do not overlap'}`, () => {
      assert.equal(hostPatternsOverlap(host(a), host(b)), expected);
      assert.equal(hostPatternsOverlap(host(b), host(a)), expected);
    });
  }

  it('treats the hostless form as overlapping everything', () => {
    assert.equal(hostPatternsOverlap(compileHostPattern(undefined, 'any'), host('api.example.com')), true);
  });
});
