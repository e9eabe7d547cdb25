// Pinned matcher tables (docs/policy.md: Host patterns, Host matching, Path globs through Query matching), binary globs, host overlap
// (used by V13), and every branch of decide().

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normaliseHost } from '../../src/net/host.js';
import { decide } from '../../src/policy/decide.js';
import { compileBinaryGlob, compileGlob, compilePathSelector, compileValueGlob, globError } from '../../src/policy/glob.js';
import { normalisePolicyHost } from '../../src/policy/host-pattern.js';
import { compileHostPattern, compileMethod, type HostMatcher, hostPatternsOverlap } from '../../src/policy/match.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { compileQueryMatcher, parseQuery, percentDecode } from '../../src/policy/query.js';
import { emptyPolicy, withGeneration } from '../../src/policy/store.js';
import type { EgressIntent } from '../../src/policy/types.js';

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

describe('rule path globs (docs/policy.md#path-globs, pinned)', () => {
  const table: [string, string, boolean][] = [
    ['/repos/*', '/repos/a', true],
    ['/repos/*', '/repos/a/b', false],
    ['/repos/**', '/repos/a/b/c', true],
    ['/repos/**', '/repos', false],
    ['/repos/**', '/repos/', true],
    ['**', '/', true],
    ['**', '/a/b/c', true],
    ['/**', '/', true],
    ['/**', '/x/y', true],
    ['/v1/*.json', '/v1/x.json', true],
    ['/v1/*.json', '/v1/a/x.json', false],
    ['/file?.txt', '/file1.txt', true],
    ['/file?.txt', '/file/.txt', false],
    ['/**/info/refs*', '/org/app.git/info/refs', true],
    ['/a/**secret**', '/a/x/secret', false],
    ['/a/**secret**', '/a/topsecrets', true],
    ['/v[0-9]/x', '/v2/x', true],
    ['/v[!0]/x', '/v0/x', false],
    ['/v[!0]/x', '/v1/x', true],
    ['/Repos/*', '/repos/a', false],
    ['/api/v1.0/x', '/api/v1x0/x', false],
    ['/a+b/(c)', '/a+b/(c)', true],
  ];
  for (const [pattern, path, expected] of table) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${path}`, () => {
      assert.equal(compileGlob(pattern).matches(path), expected);
    });
  }

  it('reports unusable globs', () => {
    assert.notEqual(globError('/v[0-9/x'), undefined);
    assert.notEqual(globError('/v[z-a]/x'), undefined);
    assert.equal(globError('/v[]]/x'), undefined);
    assert.equal(globError('/**/ok'), undefined);
  });

  it('explains a miss and says nothing on a match', () => {
    const glob = compileGlob('/repos/*');
    assert.equal(glob.explain('/repos/a'), undefined);
    assert.match(glob.explain('/other') ?? '', /does not match/);
  });
});

describe('endpoint path selector (docs/policy.md#endpoint-path-selector)', () => {
  const table: [string | undefined, string, boolean][] = [
    [undefined, '/anything', true],
    ['', '/anything', true],
    ['**', '/a/b', true],
    ['/**', '/', true],
    ['/v1/**', '/v1', true],
    ['/v1/**', '/v1/a/b', true],
    ['/v1/**', '/v10', false],
    ['/api/*', '/api/a/b', true],
    ['/graphql', '/graphql', true],
    ['/graphql', '/graphql/x', false],
  ];
  for (const [pattern, path, expected] of table) {
    it(`${pattern ?? '(none)'} ${expected ? 'selects' : 'does not select'} ${path}`, () => {
      assert.equal(compilePathSelector(pattern).matches(path), expected);
    });
  }

  it('counts specificity as the characters other than *', () => {
    assert.equal(compilePathSelector(undefined).specificity, 0);
    assert.equal(compilePathSelector('/**').specificity, 0);
    assert.equal(compilePathSelector('/v1/**').specificity, 4);
    assert.equal(compilePathSelector('/v1/admin/**').specificity, 10);
    assert.equal(compilePathSelector('/graphql').specificity, 8);
  });
});

describe('methods (docs/policy.md#method-matching, pinned)', () => {
  const table: [string, string, boolean][] = [
    ['GET', 'GET', true],
    ['GET', 'HEAD', true],
    ['GET', 'OPTIONS', false],
    ['get', 'GET', true],
    ['GET', 'get', true],
    ['*', 'DELETE', true],
    ['*', 'WEBSOCKET_TEXT', true],
    ['HEAD', 'GET', false],
    ['WEBSOCKET_TEXT', 'WEBSOCKET_TEXT', true],
    ['POST', 'PUT', false],
  ];
  for (const [rule, request, expected] of table) {
    it(`rule ${rule} ${expected ? 'matches' : 'does not match'} ${request}`, () => {
      assert.equal(compileMethod(rule).matches(request), expected);
      assert.equal(compileMethod(rule).explain(request) === undefined, expected);
    });
  }
});

describe('query matchers (docs/policy.md#query-matching, pinned)', () => {
  it('parses repeated keys in order and decodes %XX only', () => {
    const params = parseQuery('tag=a&tag=b%2Bc&q=x+y&flag&=v&&k%20ey=%E2%9C%93');
    assert.deepEqual(params.get('tag'), ['a', 'b+c']);
    assert.deepEqual(params.get('q'), ['x+y']);
    assert.deepEqual(params.get('flag'), ['']);
    assert.deepEqual(params.get('k ey'), ['✓']);
    assert.equal(percentDecode('%zz%4'), '%zz%4');
  });

  it('uses . as the value-glob separator and lets ** match anything', () => {
    assert.equal(compileValueGlob('v1.*').matches('v1.2'), true);
    assert.equal(compileValueGlob('v1.*').matches('v1.2.3'), false);
    assert.equal(compileValueGlob('**').matches('a.b/c'), true);
    assert.equal(compileValueGlob('git-*').matches('git-upload-pack'), true);
  });

  const spec = new Map([['tag', ['v1.*', 'stable']]]);
  const allow = compileQueryMatcher(spec, 'allow');
  const deny = compileQueryMatcher(spec, 'deny');
  const table: [string, boolean, boolean][] = [
    ['tag=v1.2', true, true],
    ['other=1', false, false],
    ['', false, false],
    ['tag=v1.2&tag=stable', true, true],
    ['tag=v1.2&tag=bad', false, true],
    ['tag=bad', false, false],
    ['tag=v1%2E2', true, true],
    ['tag=v1.2.3', false, false],
  ];
  for (const [query, allowed, denied] of table) {
    it(`query ${JSON.stringify(query)}: allow ${allowed ? 'matches' : 'misses'}, deny ${denied ? 'fires' : 'does not fire'}`, () => {
      const params = parseQuery(query);
      assert.equal(allow.matches(params), allowed);
      assert.equal(deny.matches(params), denied);
    });
  }

  it('needs every named key to pass', () => {
    const two = compileQueryMatcher(new Map([['a', ['1']], ['b', ['2']]]), 'allow');
    assert.equal(two.matches(parseQuery('a=1&b=2&c=3')), true);
    assert.equal(two.matches(parseQuery('a=1')), false);
    assert.match(two.explain(parseQuery('a=1')) ?? '', /b is absent/);
    const twoDeny = compileQueryMatcher(new Map([['a', ['1']], ['b', ['2']]]), 'deny');
    assert.equal(twoDeny.matches(parseQuery('a=1')), false);
    assert.equal(twoDeny.matches(parseQuery('a=1&b=2')), true);
  });

  it('matches every query when the rule names no keys', () => {
    assert.equal(compileQueryMatcher(new Map(), 'allow').matches(parseQuery('x=1')), true);
    assert.equal(compileQueryMatcher(new Map(), 'deny').matches(parseQuery('')), true);
  });
});

describe('binary globs', () => {
  const table: [string, string, boolean][] = [
    ['/usr/bin/node', '/usr/bin/node', true],
    ['/usr/bin/node', '/usr/bin/nodejs', false],
    ['/usr/bin/*', '/usr/bin/curl', true],
    ['/usr/bin/*', '/usr/bin/x/curl', false],
    ['/**', '/usr/local/bin/anything', true],
    ['/sandbox/.vscode-server/**', '/sandbox/.vscode-server/bin/abc/node', true],
    ['/usr/lib/jvm/*/bin/java', '/usr/lib/jvm/java-21/bin/java', true],
    ['/sandbox/.uv/python/*/bin/python3*', '/sandbox/.uv/python/3.12/bin/python3.12', true],
    // Identity sources report canonical paths; a dot segment would otherwise climb out of the glob's directory.
    ['/usr/bin/**', '/usr/bin/../../tmp/evil', false],
    ['/usr/bin/*', '/usr/bin/./curl', false],
    ['/**', '/tmp/../usr/bin/node', false],
    ['/usr/bin/**', 'usr/bin/node', false],
  ];
  for (const [pattern, path, expected] of table) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${path}`, () => {
      assert.equal(compileBinaryGlob(pattern).matches(path), expected);
    });
  }
});

const DECIDE_POLICY = `version: 1
network_policies:
  api:
    name: api-display
    endpoints:
      - host: api.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/api/**" }
          - allow: { method: GET, path: /export, query: { format: { any: [csv, json] } } }
        deny_rules:
          - { method: "*", path: "/api/admin/**" }
      - host: api.example.com
        port: 443
        path: /graphql
        protocol: graphql
        enforcement: enforce
        rules:
          - allow: { operation_type: query }
    binaries: [{ path: /usr/bin/node }]
  audit_api:
    endpoints:
      - host: audit.example.com
        port: 443
        protocol: rest
        enforcement: audit
        access: read-only
        deny_rules:
          - { method: GET, path: /secret }
    binaries: [{ path: "/**" }]
  wild:
    endpoints:
      - { host: "*.pkg.example.net", ports: [443, 8443] }
      - { host: 10.1.2.3, port: 5432 }
    binaries: [{ path: "/**" }]
  hostless:
    endpoints:
      - { port: 9000, allowed_ips: [10.20.0.0/16] }
    binaries: [{ path: "/**" }]
  nobody:
    endpoints:
      - { host: closed.example.com, port: 443 }
    binaries: []
  a_second:
    endpoints:
      - { host: "*.pkg.example.net", port: 443 }
    binaries: [{ path: /usr/bin/curl }]
  ws:
    endpoints:
      - host: ws.example.com
        port: 443
        protocol: websocket
        enforcement: enforce
        access: read-write
  rpc:
    endpoints:
      - host: rpc.example.com
        port: 443
        path: /rpc
        protocol: json-rpc
        enforcement: audit
        rules:
          - allow: { method: "*" }
`;

describe('decide', () => {
  const policy = parsePolicy(DECIDE_POLICY);
  const connect = (host: string, port: number, extra: Partial<EgressIntent> = {}): EgressIntent => ({
    adapter: 'connect',
    host,
    port,
    ...extra,
  });
  const l7 = (host: string, method: string, path: string, extra: Partial<EgressIntent> = {}): EgressIntent => ({
    adapter: 'l7',
    host,
    port: 443,
    method,
    path,
    ...extra,
  });

  it('denies everything on the empty policy with reason no-policy', () => {
    const decision = decide(emptyPolicy(), connect('api.example.com', 443));
    assert.equal(decision.verdict, 'deny');
    assert.equal(decision.reason, 'no-policy');
    assert.equal(decision.generation, 0);
  });

  it('allows a connection to a listed host and port and lists every matching endpoint', () => {
    const decision = decide(policy, connect('api.example.com', 443));
    assert.equal(decision.verdict, 'allow');
    assert.equal(decision.reason, 'endpoint-allowed');
    assert.equal(decision.layer, 'l4');
    assert.equal(decision.policy, 'api');
    assert.equal(decision.policyName, 'api-display');
    assert.equal(decision.endpointIndex, 0);
    assert.deepEqual(decision.endpoints.map((e) => e.id), ['api#0', 'api#1']);
    assert.equal(decision.binaryIdentity, 'endpoint-only');
    assert.equal(decision.policyHash, policy.hash);
    assert.ok(Object.isFrozen(decision));
  });

  it('denies an unlisted host or port with a sentence naming the endpoint', () => {
    const other = decide(policy, connect('evil.example.org', 443));
    assert.equal(other.reason, 'no-endpoint-matched');
    assert.equal(other.detail, 'endpoint evil.example.org:443 is not allowed by any policy');
    assert.equal(decide(policy, connect('api.example.com', 22)).reason, 'no-endpoint-matched');
    assert.match(decide(policy, connect('2001:db8::1', 443)).detail, /\[2001:db8::1\]:443/);
  });

  it('matches wildcard hosts on each listed port and never an IP literal against a name pattern', () => {
    assert.equal(decide(policy, connect('a.pkg.example.net', 8443)).verdict, 'allow');
    assert.equal(decide(policy, connect('pkg.example.net', 443)).verdict, 'deny');
    assert.equal(decide(policy, connect('10.1.2.3', 5432)).verdict, 'allow');
    assert.equal(decide(policy, connect('10.1.2.3', 443)).verdict, 'deny');
  });

  it('picks the lexicographically smallest policy key when several entries match', () => {
    const decision = decide(policy, connect('x.pkg.example.net', 443));
    assert.equal(decision.policy, 'a_second');
    assert.deepEqual(decision.endpoints.map((e) => e.id), ['wild#0', 'a_second#0']);
  });

  it('lets the hostless allowed_ips form match any host on its port', () => {
    const decision = decide(policy, connect('db.internal.example', 9000));
    assert.equal(decision.verdict, 'allow');
    assert.equal(decision.policy, 'hostless');
    assert.equal(decide(policy, connect('10.20.1.1', 9000)).verdict, 'allow');
  });

  it('checks binaries when the intent names one, and an empty binaries list matches nothing', () => {
    const node = decide(policy, connect('api.example.com', 443, { binary: '/usr/bin/node' }));
    assert.equal(node.verdict, 'allow');
    assert.equal(node.binaryIdentity, 'matched');
    const curl = decide(policy, connect('api.example.com', 443, { binary: '/usr/bin/curl' }));
    assert.equal(curl.reason, 'binary-not-allowed');
    assert.match(curl.detail, /\/usr\/bin\/curl .*api\.example\.com:443 .*api/);
    assert.equal(decide(policy, connect('closed.example.com', 443, { binary: '/usr/bin/x' })).reason, 'binary-not-allowed');
    assert.equal(decide(policy, connect('closed.example.com', 443)).verdict, 'allow');
    const narrowed = decide(policy, connect('x.pkg.example.net', 443, { binary: '/usr/bin/wget' }));
    assert.equal(narrowed.policy, 'wild');
  });

  it('allows an L7 request by rule and renders the rule', () => {
    const decision = decide(policy, l7('api.example.com', 'GET', '/api/v2/items'));
    assert.equal(decision.verdict, 'allow');
    assert.equal(decision.reason, 'rule-allowed');
    assert.equal(decision.rule, 'GET /api/**');
    assert.equal(decision.layer, 'l7');
    assert.equal(decide(policy, l7('api.example.com', 'HEAD', '/api/x')).verdict, 'allow');
  });

  it('lets deny rules win over allow rules', () => {
    const decision = decide(policy, l7('api.example.com', 'GET', '/api/admin/users'));
    assert.equal(decision.verdict, 'deny');
    assert.equal(decision.reason, 'deny-rule-matched');
    assert.equal(decision.rule, '* /api/admin/**');
  });

  it('denies a request no rule allows and names the missing rule', () => {
    const decision = decide(policy, l7('api.example.com', 'DELETE', '/api/v2/x'));
    assert.equal(decision.verdict, 'deny');
    assert.equal(decision.reason, 'no-rule-matched');
    assert.equal(decision.rule, 'DELETE /api/v2/x');
  });

  it('applies query matchers and never puts the query string into the detail', () => {
    const ok = decide(policy, l7('api.example.com', 'GET', '/export', { query: 'format=csv&token=s3cr3t' }));
    assert.equal(ok.verdict, 'allow');
    const bad = decide(policy, l7('api.example.com', 'GET', '/export', { query: 'format=xml&token=s3cr3t' }));
    assert.equal(bad.reason, 'no-rule-matched');
    for (const d of [ok, bad]) {
      assert.doesNotMatch(d.detail, /s3cr3t|format=/);
      assert.doesNotMatch(d.rule ?? '', /s3cr3t/);
    }
  });

  it('turns would-be denies into audit on audit endpoints, keeping the deny reason', () => {
    const missing = decide(policy, l7('audit.example.com', 'POST', '/x'));
    assert.equal(missing.verdict, 'audit');
    assert.equal(missing.reason, 'no-rule-matched');
    const denied = decide(policy, l7('audit.example.com', 'GET', '/secret'));
    assert.equal(denied.verdict, 'audit');
    assert.equal(denied.reason, 'deny-rule-matched');
    const preset = decide(policy, l7('audit.example.com', 'OPTIONS', '/x'));
    assert.equal(preset.verdict, 'allow');
    assert.equal(preset.reason, 'preset-allowed');
  });

  it('selects the most specific inspected endpoint and denies uninspected protocols outright', () => {
    const graphql = decide(policy, l7('api.example.com', 'POST', '/graphql'));
    assert.equal(graphql.verdict, 'deny');
    assert.equal(graphql.reason, 'unsupported-l7-protocol');
    assert.equal(graphql.endpoint?.id, 'api#1');
    const rpc = decide(policy, l7('rpc.example.com', 'POST', '/rpc'));
    assert.equal(rpc.verdict, 'deny', 'audit never relaxes an uninspected protocol');
    assert.equal(rpc.reason, 'unsupported-l7-protocol');
  });

  it('denies a request whose path no inspected endpoint selects', () => {
    const decision = decide(policy, l7('rpc.example.com', 'POST', '/other'));
    assert.equal(decision.verdict, 'deny');
    assert.equal(decision.reason, 'no-rule-matched');
    assert.equal(decision.endpoint, undefined);
  });

  it('keeps the L4 allow for an uninspected endpoint when the intent carries a method', () => {
    const decision = decide(policy, l7('a.pkg.example.net', 'DELETE', '/anything'));
    assert.equal(decision.verdict, 'allow');
    assert.equal(decision.reason, 'endpoint-allowed');
    assert.equal(decision.layer, 'l4');
  });

  it('applies websocket presets to the upgrade and to text frames', () => {
    assert.equal(decide(policy, l7('ws.example.com', 'GET', '/socket')).reason, 'preset-allowed');
    assert.equal(decide(policy, l7('ws.example.com', 'WEBSOCKET_TEXT', '/socket')).verdict, 'allow');
    assert.equal(decide(policy, l7('ws.example.com', 'POST', '/socket')).verdict, 'deny');
  });

  it('stamps the generation of the policy it decided with', () => {
    assert.equal(decide(withGeneration(policy, 7), connect('api.example.com', 443)).generation, 7);
  });
});
