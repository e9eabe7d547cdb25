// decide() against the pinned tables (docs/policy.md, Access presets and rules through Deny precedence and enforcement; peer-tests HA/LD rows).
// Data-driven: each case names a policy snippet, an already-normalised intent and the expected decision.
// Intents carry lower-case A-label hosts, as adapters hand them over after net/host.ts.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { emptyPolicy } from '../../src/policy/store.js';
import type { DecisionReason, EgressIntent, Policy, Verdict } from '../../src/policy/types.js';

interface Expect {
  readonly verdict: Verdict;
  readonly reason: DecisionReason;
  /** `null` asserts that no policy decided (decision.policy undefined). */
  readonly policy?: string | null;
  readonly endpointIndex?: number;
  readonly binaryIdentity?: 'matched' | 'endpoint-only';
}

interface DecideCase {
  readonly group: string;
  readonly label: string;
  readonly policy: string;
  readonly intent: EgressIntent;
  readonly expect: Expect;
}

// ---- intent and expectation shorthands -------------------------------------------------------------------

function conn(host: string, port = 443, binary?: string): EgressIntent {
  return binary === undefined ? { adapter: 'connect', host, port } : { adapter: 'connect', host, port, binary };
}

/** An inspected request: `GET /path?query` on host:443. */
function req(method: string, target: string, host = 'api.example.com', binary?: string): EgressIntent {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const base = { adapter: 'l7' as const, host, port: 443, method, path };
  const withQuery = q < 0 ? base : { ...base, query: target.slice(q + 1) };
  return binary === undefined ? withQuery : { ...withQuery, binary };
}

const ALLOW_L4: Expect = { verdict: 'allow', reason: 'endpoint-allowed' };
const MISS: Expect = { verdict: 'deny', reason: 'no-endpoint-matched', policy: null };
const RULE_OK: Expect = { verdict: 'allow', reason: 'rule-allowed' };
const PRESET_OK: Expect = { verdict: 'allow', reason: 'preset-allowed' };
const NO_RULE: Expect = { verdict: 'deny', reason: 'no-rule-matched' };
const DENY_RULE: Expect = { verdict: 'deny', reason: 'deny-rule-matched' };
const AUDIT_NO_RULE: Expect = { verdict: 'audit', reason: 'no-rule-matched' };
const AUDIT_DENY_RULE: Expect = { verdict: 'audit', reason: 'deny-rule-matched' };
const UNSUPPORTED: Expect = { verdict: 'deny', reason: 'unsupported-l7-protocol' };
const BINARY_MISS: Expect = { verdict: 'deny', reason: 'binary-not-allowed' };

// ---- policy snippets ---------------------------------------------------------------------------------------

const ANY_BINARY = '    binaries: [{ path: "/**" }]';

/** One L4 endpoint under key `p`. */
function l4Policy(endpoint: string): string {
  return `version: 1\nnetwork_policies:\n  p:\n    endpoints:\n      - ${endpoint}\n${ANY_BINARY}\n`;
}

function hostPolicy(host: string): string {
  return l4Policy(`{ host: "${host}", port: 443 }`);
}

/** One enforced rest endpoint on api.example.com:443 with the given allow rules and deny rules (YAML lines). */
function restPolicy(rules: readonly string[], denyRules: readonly string[] = [], extra = ''): string {
  const lines = [
    'version: 1',
    'network_policies:',
    '  p:',
    '    endpoints:',
    '      - host: api.example.com',
    '        port: 443',
    '        protocol: rest',
    '        enforcement: enforce',
  ];
  if (extra) lines.push(extra);
  lines.push('        rules:', ...rules.map((r) => `          - allow: ${r}`));
  if (denyRules.length > 0) lines.push('        deny_rules:', ...denyRules.map((r) => `          - ${r}`));
  lines.push(ANY_BINARY);
  return `${lines.join('\n')}\n`;
}

function pathPolicy(pattern: string): string {
  return restPolicy([`{ method: GET, path: "${pattern}" }`]);
}

const METHODS_POLICY = restPolicy([
  '{ method: GET, path: /m/get }',
  '{ method: get, path: /m/lower }',
  '{ method: "*", path: /m/any }',
  '{ method: HEAD, path: /m/head }',
]);

const WEBSOCKET_POLICY = `version: 1
network_policies:
  p:
    endpoints:
      - host: ws.example.com
        port: 443
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: /rt }
          - allow: { method: WEBSOCKET_TEXT, path: /rt }
          - allow: { method: "*", path: /both }
          - allow: { method: GET, path: /upgrade-only }
${ANY_BINARY}
`;

const QUERY_ALLOW_POLICY = restPolicy([
  '{ method: GET, path: /search, query: { q: "foo*" } }',
  '{ method: GET, path: /export, query: { format: { any: [csv, json] } } }',
  '{ method: GET, path: /v, query: { v: "1.*" } }',
  '{ method: GET, path: /any, query: { v: "**" } }',
  '{ method: GET, path: /two, query: { a: x, b: y } }',
  '{ method: GET, path: /space, query: { q: "hello world" } }',
]);

const QUERY_DENY_POLICY = restPolicy(
  ['{ method: "*", path: "/**" }'],
  [
    '{ method: GET, path: /export, query: { format: csv } }',
    '{ method: GET, path: /report, query: { format: csv, scope: all } }',
    '{ method: GET, path: /dl, query: { type: { any: [exe, msi] } } }',
  ],
);

function presetEndpoint(host: string, protocol: string, access: string): string {
  return `      - { host: ${host}, port: 443, protocol: ${protocol}, enforcement: enforce, access: ${access} }`;
}

const PRESETS_POLICY = `version: 1
network_policies:
  p:
    endpoints:
${presetEndpoint('ro.example.com', 'rest', 'read-only')}
${presetEndpoint('rw.example.com', 'rest', 'read-write')}
${presetEndpoint('full.example.com', 'rest', 'full')}
${presetEndpoint('ws-ro.example.com', 'websocket', 'read-only')}
${presetEndpoint('ws-rw.example.com', 'websocket', 'read-write')}
${presetEndpoint('ws-full.example.com', 'websocket', 'full')}
${ANY_BINARY}
`;

const PRECEDENCE_POLICY = `version: 1
network_policies:
  p:
    endpoints:
      - host: api.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        access: full
        deny_rules:
          - { method: DELETE, path: "/**" }
          - { method: "*", path: "/admin/**" }
      - host: repos.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: "*", path: "/repos/**" }
        deny_rules:
          - { method: GET, path: "/repos/private/**" }
${ANY_BINARY}
`;

const AUDIT_POLICY = `version: 1
network_policies:
  p:
    endpoints:
      - host: default.example.com
        port: 443
        protocol: rest
        rules:
          - allow: { method: GET, path: /ok }
        deny_rules:
          - { method: "*", path: "/bad/**" }
      - { host: explicit.example.com, port: 443, protocol: rest, enforcement: audit, access: read-only }
      - { host: enforced.example.com, port: 443, protocol: rest, enforcement: enforce, access: read-only }
    binaries: [{ path: /usr/bin/curl }]
`;

const UNSUPPORTED_POLICY = `version: 1
network_policies:
  p:
    endpoints:
      - { host: api.example.com, port: 443, protocol: rest, enforcement: enforce, access: read-only }
      - host: api.example.com
        port: 443
        path: /graphql
        protocol: graphql
        enforcement: enforce
        rules:
          - allow: { operation_type: query }
      - host: rpc.example.com
        port: 443
        protocol: json-rpc
        enforcement: enforce
        rules:
          - allow: { method: ledger_getBalance }
      - host: mcp.example.com
        port: 443
        protocol: mcp
        enforcement: enforce
        rules:
          - allow: { method: tools/list }
      - host: gql-audit.example.com
        port: 443
        protocol: graphql
        enforcement: audit
        access: read-only
${ANY_BINARY}
`;

const OVERLAP_RULES_POLICY = `version: 1
network_policies:
  b_guard:
    endpoints:
      - host: api.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/repos/public/**" }
        deny_rules:
          - { method: GET, path: "/repos/private/**" }
${ANY_BINARY}
  a_read:
    endpoints:
      - host: api.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/repos/**" }
${ANY_BINARY}
`;

const OVERLAP_L4_POLICY = `version: 1
network_policies:
  plain:
    endpoints:
      - { host: api.example.com, port: 443 }
${ANY_BINARY}
  inspected:
    endpoints:
      - { host: api.example.com, port: 443, protocol: rest, enforcement: enforce, access: read-only }
${ANY_BINARY}
`;

const SMALLEST_KEY_POLICY = `version: 1
network_policies:
  zeta:
    endpoints: [{ host: api.example.com, port: 443 }]
${ANY_BINARY}
  alpha:
    name: Alpha API
    endpoints: [{ host: "*.example.com", port: 443 }]
${ANY_BINARY}
  mid:
    endpoints: [{ host: api.example.com, port: 443 }]
${ANY_BINARY}
`;

const BINARY_SPLIT_POLICY = `version: 1
network_policies:
  b_node:
    endpoints: [{ host: api.example.com, port: 443 }]
    binaries: [{ path: /usr/bin/node }]
  a_tools:
    endpoints: [{ host: api.example.com, port: 443 }]
    binaries: [{ path: /usr/bin/curl }]
`;

const BINARIES_POLICY = `version: 1
network_policies:
  exact:
    endpoints: [{ host: exact.example.com, port: 443 }]
    binaries: [{ path: /usr/bin/node }]
  glob:
    endpoints: [{ host: glob.example.com, port: 443 }]
    binaries: [{ path: "/usr/lib/jvm/*/bin/java" }, { path: "/usr/bin/python3*" }]
  deep:
    endpoints: [{ host: deep.example.com, port: 443 }]
    binaries: [{ path: "/opt/tools/**" }]
  any:
    endpoints: [{ host: any.example.com, port: 443 }]
    binaries: [{ path: "/**" }]
  none:
    endpoints: [{ host: none.example.com, port: 443 }]
    binaries: []
`;

const SELECTOR_POLICY = `version: 1
network_policies:
  p:
    endpoints:
      - { host: api.example.com, port: 443, protocol: rest, enforcement: enforce, access: full }
      - { host: api.example.com, port: 443, path: "/v1/admin/**", protocol: rest, enforcement: enforce, access: read-only }
      - host: api.example.com
        port: 443
        path: "/v1/files/*"
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
${ANY_BINARY}
`;

// ---- the table -----------------------------------------------------------------------------------------------

const CASES: DecideCase[] = [];

function add(group: string, label: string, policy: string, intent: EgressIntent, expect: Expect): void {
  CASES.push({ group, label, policy, intent, expect });
}

// docs/policy.md#host-matching: host runtime matching (label-bounded, apex never matched), plus HA-14/15/16/17.
const HOST_ROWS: readonly (readonly [pattern: string, host: string, match: boolean])[] = [
  ['*.example.com', 'a.example.com', true],
  ['*.example.com', 'a.b.example.com', false],
  ['*.example.com', 'example.com', false],
  ['*.example.com', 'evilexample.com', false],
  ['*.example.com', 'a.example.com.evil.net', false],
  ['*.example.com', '_svc.example.com', true],
  ['**.example.com', 'a.b.c.example.com', true],
  ['**.example.com', 'a.example.com', true],
  ['**.example.com', 'example.com', false],
  ['**.example.com', 'notexample.com', false],
  ['*-ai.example.com', 'us-ai.example.com', true],
  ['*-ai.example.com', 'x.us-ai.example.com', false],
  ['*-ai.example.com', 'us-ml.example.com', false],
  ['*.s3.*.amazonaws.com', 'b.s3.us-east-1.amazonaws.com', true],
  ['*.s3.*.amazonaws.com', 'b.s3.a.b.amazonaws.com', false],
  ['*.s3.*.amazonaws.com', 's3.us-east-1.amazonaws.com', false],
  ['api.*.example.com', 'api.eu.example.com', true],
  ['api.*.example.com', 'api.eu.west.example.com', false],
  ['api.*.example.com', 'www.eu.example.com', false],
  ['api.example.com', 'api.example.com', true],
  ['API.Example.COM', 'api.example.com', true],
  ['api.example.com.', 'api.example.com', true],
  ['api.example.com', 'api.example.com.evil.net', false],
  ['api.example.com', 'www.api.example.com', false],
  // IDNA: policy in U-labels, request already A-labels; and the reverse (request was bücher.example).
  ['bücher.example', 'xn--bcher-kva.example', true],
  ['BÜCHER.example', 'xn--bcher-kva.example', true],
  ['xn--bcher-kva.example', 'xn--bcher-kva.example', true],
  ['*.bücher.example', 'shop.xn--bcher-kva.example', true],
  ['*.xn--mnchen-3ya.example.com', 'a.xn--mnchen-3ya.example.com', true],
  ['bücher.example', 'bucher.example', false],
  // HA-16: `аpi` with a Cyrillic а is a different A-label.
  ['api.example.com', 'xn--pi-6kc.example.com', false],
  // HA-17: an IP literal never matches a name pattern, and a name never matches an IP-literal host.
  ['*.example.com', '1.2.3.4', false],
  ['**.example.com', '203.0.113.9', false],
  ['*.example.com', '2001:db8::1', false],
  ['10.0.0.7', '10.0.0.7', true],
  ['10.0.0.7', '10.0.0.8', false],
  ['10.0.0.7', 'ten.example.com', false],
  ['2001:DB8:0::10', '2001:db8::10', true],
  ['2001:db8::10', '2001:db8::11', false],
];
for (const [pattern, host, match] of HOST_ROWS) {
  add('host', `${pattern} vs ${host}`, hostPolicy(pattern), conn(host), match ? { ...ALLOW_L4, policy: 'p', endpointIndex: 0 } : MISS);
}

// Hostless allowed_ips: any host on the port (the address check happens later, in SSRF).
const HOSTLESS = l4Policy('{ port: 5432, allowed_ips: [10.20.0.0/16] }');
add('hostless', 'a name on the port', HOSTLESS, conn('db.internal.example', 5432), { ...ALLOW_L4, policy: 'p' });
add('hostless', 'an IP literal on the port', HOSTLESS, conn('10.20.1.1', 5432), { ...ALLOW_L4, policy: 'p' });
add('hostless', 'an unrelated name on the port', HOSTLESS, conn('anything.example.org', 5432), ALLOW_L4);
add('hostless', 'another port', HOSTLESS, conn('db.internal.example', 5433), MISS);

// Ports: multi-port, port+ports (ports wins), edges.
const MULTI_PORT = l4Policy('{ host: www.example.com, ports: [80, 443, 8443] }');
for (const port of [80, 443, 8443]) add('ports', `listed port ${port}`, MULTI_PORT, conn('www.example.com', port), ALLOW_L4);
for (const port of [8080, 22, 853, 65535]) add('ports', `unlisted port ${port}`, MULTI_PORT, conn('www.example.com', port), MISS);
const PORT_AND_PORTS = l4Policy('{ host: www.example.com, port: 80, ports: [443] }');
add('ports', 'ports wins over port: 443 allowed', PORT_AND_PORTS, conn('www.example.com', 443), ALLOW_L4);
add('ports', 'ports wins over port: 80 denied', PORT_AND_PORTS, conn('www.example.com', 80), MISS);
add('ports', 'an L7 request on an unlisted port', restPolicy(['{ method: GET, path: "/**" }']), { ...req('GET', '/'), port: 8443 }, MISS);

// docs/policy.md#path-globs: rule path globs: `*` and `?` stay inside one segment, `**` crosses; case-sensitive.
const PATH_ROWS: readonly (readonly [pattern: string, path: string, match: boolean])[] = [
  ['/repos/*', '/repos/a', true],
  ['/repos/*', '/repos/a/b', false],
  ['/repos/*', '/repos', false],
  ['/repos/**', '/repos/a/b/c', true],
  ['/repos/**', '/repos/a', true],
  ['/repos/**', '/repos', false],
  ['/repos/**', '/repos/', true],
  ['/repos/**', '/repository/a', false],
  ['**', '/', true],
  ['**', '/a/b/c', true],
  ['/**', '/', true],
  ['/**', '/x/y/z', true],
  ['/v1/*.json', '/v1/x.json', true],
  ['/v1/*.json', '/v1/a/x.json', false],
  ['/file?.txt', '/file1.txt', true],
  ['/file?.txt', '/file/.txt', false],
  ['/file?.txt', '/file12.txt', false],
  ['/**/info/refs*', '/org/app.git/info/refs', true],
  ['/**/info/refs*', '/org/app.git/info/refs.txt', true],
  ['/a/**secret**', '/a/x/secret', false],
  ['/a/**secret**', '/a/mysecretfile', true],
  ['/v[0-9]/x', '/v2/x', true],
  ['/v[0-9]/x', '/va/x', false],
  ['/v[!0]/x', '/v0/x', false],
  ['/v[!0]/x', '/v1/x', true],
  ['/Repos/*', '/repos/a', false],
  ['/repos/*', '/Repos/a', false],
];
for (const [pattern, path, match] of PATH_ROWS) {
  add('path glob', `${pattern} vs ${path}`, pathPolicy(pattern), req('GET', path), match ? RULE_OK : NO_RULE);
}

// docs/policy.md#method-matching: methods: GET implies HEAD, OPTIONS never implied, case-insensitive rule method, `*` any.
const METHOD_ROWS: readonly (readonly [method: string, path: string, match: boolean])[] = [
  ['GET', '/m/get', true],
  ['HEAD', '/m/get', true],
  ['OPTIONS', '/m/get', false],
  ['POST', '/m/get', false],
  ['GET', '/m/lower', true],
  ['HEAD', '/m/lower', true],
  ['PATCH', '/m/any', true],
  ['DELETE', '/m/any', true],
  ['PROPFIND', '/m/any', true],
  ['OPTIONS', '/m/any', true],
  ['HEAD', '/m/head', true],
  ['GET', '/m/head', false],
];
for (const [method, path, match] of METHOD_ROWS) {
  add('method', `${method} ${path}`, METHODS_POLICY, req(method, path), match ? RULE_OK : NO_RULE);
}

// WebSocket: GET is the upgrade, WEBSOCKET_TEXT a client text frame, `*` both.
const WS_ROWS: readonly (readonly [method: string, path: string, match: boolean])[] = [
  ['GET', '/rt', true],
  ['WEBSOCKET_TEXT', '/rt', true],
  ['WEBSOCKET_TEXT', '/elsewhere', false],
  ['GET', '/both', true],
  ['WEBSOCKET_TEXT', '/both', true],
  ['GET', '/upgrade-only', true],
  ['WEBSOCKET_TEXT', '/upgrade-only', false],
];
for (const [method, path, match] of WS_ROWS) {
  add('websocket', `${method} ${path}`, WEBSOCKET_POLICY, req(method, path, 'ws.example.com'), match ? RULE_OK : NO_RULE);
}

// docs/policy.md#query-matching: query matchers on allow rules: key absent -> no match; every repeated value must match; decoded.
const QUERY_ALLOW_ROWS: readonly (readonly [target: string, match: boolean])[] = [
  ['/search?q=foobar', true],
  ['/search', false],
  ['/search?q=foo1&q=foo2', true],
  ['/search?q=foo1&q=bar', false],
  ['/search?q=foo1&other=zzz', true],
  ['/search?Q=foo1', false],
  ['/search?q=foo%62ar', true],
  ['/search?%71=foobar', true],
  ['/search?q=', false],
  ['/search?q=bar', false],
  ['/export?format=csv', true],
  ['/export?format=json', true],
  ['/export?format=xml', false],
  ['/export?format=csv&format=json', true],
  ['/export?format=csv&format=xml', false],
  ['/export?format=CSV', false],
  ['/v?v=1.2', true],
  ['/v?v=1.2.3', false],
  ['/any?v=1.2.3', true],
  ['/any', false],
  ['/two?a=x&b=y', true],
  ['/two?b=y&a=x', true],
  ['/two?a=x', false],
  ['/two?a=x&b=z', false],
  ['/space?q=hello%20world', true],
  ['/space?q=hello+world', false],
];
for (const [target, match] of QUERY_ALLOW_ROWS) {
  add('query allow', `GET ${target}`, QUERY_ALLOW_POLICY, req('GET', target), match ? RULE_OK : NO_RULE);
}

// docs/policy.md#query-matching: query matchers on deny rules: key absent -> the deny does not apply; one matching value triggers.
const QUERY_DENY_ROWS: readonly (readonly [method: string, target: string, denied: boolean])[] = [
  ['GET', '/export?format=csv', true],
  ['GET', '/export', false],
  ['GET', '/export?format=json', false],
  ['GET', '/export?format=json&format=csv', true],
  ['GET', '/export?format=csv&format=json', true],
  ['GET', '/export?form%61t=csv', true],
  ['GET', '/export?format=cs%76', true],
  ['GET', '/export?format=CSV', false],
  ['HEAD', '/export?format=csv', true],
  ['POST', '/export?format=csv', false],
  ['GET', '/report?format=csv', false],
  ['GET', '/report?scope=all', false],
  ['GET', '/report?format=csv&scope=all', true],
  ['GET', '/report?scope=all&format=csv&extra=1', true],
  ['GET', '/report?format=csv&scope=mine', false],
  ['GET', '/dl?type=msi', true],
  ['GET', '/dl?type=zip', false],
  ['GET', '/dl?type=zip&type=exe', true],
];
for (const [method, target, denied] of QUERY_DENY_ROWS) {
  add('query deny', `${method} ${target}`, QUERY_DENY_POLICY, req(method, target), denied ? DENY_RULE : RULE_OK);
}

// docs/policy.md#access-presets-and-rules: presets: read-only = GET/HEAD/OPTIONS; read-write adds POST/PUT/PATCH (no DELETE); full = anything.
const PRESET_ROWS: readonly (readonly [host: string, method: string, allowed: boolean])[] = [
  ['ro.example.com', 'GET', true],
  ['ro.example.com', 'HEAD', true],
  ['ro.example.com', 'OPTIONS', true],
  ['ro.example.com', 'POST', false],
  ['ro.example.com', 'PUT', false],
  ['ro.example.com', 'PATCH', false],
  ['ro.example.com', 'DELETE', false],
  ['rw.example.com', 'GET', true],
  ['rw.example.com', 'HEAD', true],
  ['rw.example.com', 'OPTIONS', true],
  ['rw.example.com', 'POST', true],
  ['rw.example.com', 'PUT', true],
  ['rw.example.com', 'PATCH', true],
  ['rw.example.com', 'DELETE', false],
  ['full.example.com', 'DELETE', true],
  ['full.example.com', 'PROPFIND', true],
  ['full.example.com', 'GET', true],
  ['ws-ro.example.com', 'GET', true],
  ['ws-ro.example.com', 'WEBSOCKET_TEXT', false],
  ['ws-rw.example.com', 'GET', true],
  ['ws-rw.example.com', 'WEBSOCKET_TEXT', true],
  ['ws-full.example.com', 'GET', true],
  ['ws-full.example.com', 'WEBSOCKET_TEXT', true],
];
for (const [host, method, allowed] of PRESET_ROWS) {
  add('preset', `${method} on ${host}`, PRESETS_POLICY, req(method, '/any/path', host), allowed ? PRESET_OK : NO_RULE);
}

// docs/policy.md#deny-precedence-and-enforcement: deny precedence: a matching deny wins over presets and allow rules; a GET deny also blocks HEAD.
add('precedence', 'DELETE under a full preset with a DELETE deny', PRECEDENCE_POLICY, req('DELETE', '/x'), DENY_RULE);
add('precedence', 'GET /admin/users under a full preset', PRECEDENCE_POLICY, req('GET', '/admin/users'), DENY_RULE);
add('precedence', 'GET /admin itself (the deny is /admin/**)', PRECEDENCE_POLICY, req('GET', '/admin'), PRESET_OK);
add('precedence', 'GET /users under a full preset', PRECEDENCE_POLICY, req('GET', '/users'), PRESET_OK);
add('precedence', 'GET inside the denied subtree', PRECEDENCE_POLICY, req('GET', '/repos/private/x', 'repos.example.com'), DENY_RULE);
add('precedence', 'HEAD inside the denied subtree', PRECEDENCE_POLICY, req('HEAD', '/repos/private/x', 'repos.example.com'), DENY_RULE);
add('precedence', 'POST inside the GET-only denied subtree', PRECEDENCE_POLICY, req('POST', '/repos/private/x', 'repos.example.com'), RULE_OK);
add('precedence', 'GET outside the denied subtree', PRECEDENCE_POLICY, req('GET', '/repos/public/x', 'repos.example.com'), RULE_OK);

// docs/policy.md#deny-precedence-and-enforcement: enforcement: audit by default for L7; L4 misses and binary misses are never audited.
add('audit', 'allowed request on a default-audit endpoint', AUDIT_POLICY, req('GET', '/ok', 'default.example.com'), RULE_OK);
add('audit', 'unlisted request on a default-audit endpoint', AUDIT_POLICY, req('POST', '/ok', 'default.example.com'), AUDIT_NO_RULE);
add('audit', 'deny-rule request on a default-audit endpoint', AUDIT_POLICY, req('GET', '/bad/x', 'default.example.com'), AUDIT_DENY_RULE);
add('audit', 'unlisted request on an explicit audit endpoint', AUDIT_POLICY, req('DELETE', '/x', 'explicit.example.com'), AUDIT_NO_RULE);
add('audit', 'preset request on an explicit audit endpoint', AUDIT_POLICY, req('GET', '/x', 'explicit.example.com'), PRESET_OK);
add('audit', 'unlisted request on an enforced endpoint', AUDIT_POLICY, req('DELETE', '/x', 'enforced.example.com'), NO_RULE);
add('audit', 'connection to an audit endpoint', AUDIT_POLICY, conn('default.example.com'), ALLOW_L4);
add('audit', 'connection to an unlisted host (L4 has no audit)', AUDIT_POLICY, conn('other.example.com'), MISS);
add('audit', 'connection to an audit host on an unlisted port', AUDIT_POLICY, conn('default.example.com', 8443), MISS);
add('audit', 'request from an unlisted binary on an audit endpoint', AUDIT_POLICY, req('POST', '/ok', 'default.example.com', '/usr/bin/wget'), BINARY_MISS);
add('audit', 'request from the listed binary on an audit endpoint', AUDIT_POLICY, req('POST', '/ok', 'default.example.com', '/usr/bin/curl'), {
  ...AUDIT_NO_RULE,
  binaryIdentity: 'matched',
});

// docs/policy.md#endpoint-fields (protocol): graphql / mcp / json-rpc load but fail closed per request until inspection exists.
add('unsupported l7', 'POST /graphql selects the graphql endpoint', UNSUPPORTED_POLICY, req('POST', '/graphql'), { ...UNSUPPORTED, endpointIndex: 1 });
add('unsupported l7', 'GET /graphql selects the graphql endpoint', UNSUPPORTED_POLICY, req('GET', '/graphql'), UNSUPPORTED);
add('unsupported l7', 'GET /repos falls to the REST endpoint', UNSUPPORTED_POLICY, req('GET', '/repos'), { ...PRESET_OK, endpointIndex: 0 });
add('unsupported l7', 'a json-rpc request', UNSUPPORTED_POLICY, req('POST', '/', 'rpc.example.com'), UNSUPPORTED);
add('unsupported l7', 'an mcp request', UNSUPPORTED_POLICY, req('POST', '/mcp', 'mcp.example.com'), UNSUPPORTED);
add('unsupported l7', 'a graphql request on an audit endpoint still fails closed', UNSUPPORTED_POLICY, req('POST', '/graphql', 'gql-audit.example.com'), UNSUPPORTED);
add('unsupported l7', 'the connection to a json-rpc endpoint', UNSUPPORTED_POLICY, conn('rpc.example.com'), ALLOW_L4);

// Overlapping endpoints: allow rules add up; a deny in any matching endpoint wins; L4 adds no request access.
add('overlap', 'deny from one entry beats allow from another', OVERLAP_RULES_POLICY, req('GET', '/repos/private/x'), DENY_RULE);
add('overlap', 'allow from the broader entry', OVERLAP_RULES_POLICY, req('GET', '/repos/other/x'), RULE_OK);
add('overlap', 'allow from the narrower entry', OVERLAP_RULES_POLICY, req('GET', '/repos/public/x'), RULE_OK);
add('overlap', 'no entry allows POST', OVERLAP_RULES_POLICY, req('POST', '/repos/x'), NO_RULE);
add('overlap', 'connection reports the smallest key', OVERLAP_RULES_POLICY, conn('api.example.com'), { ...ALLOW_L4, policy: 'a_read' });
add('overlap', 'L4 plus rest: connection allowed', OVERLAP_L4_POLICY, conn('api.example.com'), { ...ALLOW_L4, policy: 'inspected' });
add('overlap', 'L4 plus rest: GET allowed by the preset', OVERLAP_L4_POLICY, req('GET', '/x'), PRESET_OK);
add('overlap', 'L4 plus rest: the L4 entry adds no request access', OVERLAP_L4_POLICY, req('POST', '/x'), NO_RULE);
add('overlap', 'three entries match: smallest key decides', SMALLEST_KEY_POLICY, conn('api.example.com'), { ...ALLOW_L4, policy: 'alpha' });
add('overlap', 'only the wildcard entry matches', SMALLEST_KEY_POLICY, conn('www.example.com'), { ...ALLOW_L4, policy: 'alpha' });

// Binaries: exact, glob (* inside a segment, ** any depth), /**, empty list; endpoint-only when unknown.
const BINARY_ROWS: readonly (readonly [host: string, binary: string | undefined, expect: Expect])[] = [
  ['exact.example.com', '/usr/bin/node', { ...ALLOW_L4, policy: 'exact', binaryIdentity: 'matched' }],
  ['exact.example.com', '/usr/local/bin/node', BINARY_MISS],
  ['exact.example.com', '/usr/bin/nodejs', BINARY_MISS],
  ['exact.example.com', undefined, { ...ALLOW_L4, policy: 'exact', binaryIdentity: 'endpoint-only' }],
  ['glob.example.com', '/usr/lib/jvm/17/bin/java', { ...ALLOW_L4, binaryIdentity: 'matched' }],
  ['glob.example.com', '/usr/lib/jvm/17/jre/bin/java', BINARY_MISS],
  ['glob.example.com', '/usr/lib/jvm/bin/java', BINARY_MISS],
  ['glob.example.com', '/usr/bin/python3.12', { ...ALLOW_L4, binaryIdentity: 'matched' }],
  ['glob.example.com', '/usr/bin/python2', BINARY_MISS],
  ['deep.example.com', '/opt/tools/a/b/c', { ...ALLOW_L4, binaryIdentity: 'matched' }],
  ['deep.example.com', '/opt/other/x', BINARY_MISS],
  ['any.example.com', '/anything/at/all', { ...ALLOW_L4, binaryIdentity: 'matched' }],
  ['none.example.com', '/usr/bin/node', BINARY_MISS],
  ['none.example.com', undefined, { ...ALLOW_L4, binaryIdentity: 'endpoint-only' }],
];
for (const [host, binary, expect] of BINARY_ROWS) {
  add('binary', `${binary ?? '(no identity)'} to ${host}`, BINARIES_POLICY, conn(host, 443, binary), expect);
}
add('binary', 'the entry that lists the binary decides', BINARY_SPLIT_POLICY, conn('api.example.com', 443, '/usr/bin/node'), { ...ALLOW_L4, policy: 'b_node' });
add('binary', 'the other entry for the other binary', BINARY_SPLIT_POLICY, conn('api.example.com', 443, '/usr/bin/curl'), { ...ALLOW_L4, policy: 'a_tools' });
add('binary', 'no identity: smallest key among endpoint matches', BINARY_SPLIT_POLICY, conn('api.example.com'), { ...ALLOW_L4, policy: 'a_tools' });
add('binary', 'a binary neither entry lists', BINARY_SPLIT_POLICY, conn('api.example.com', 443, '/usr/bin/wget'), BINARY_MISS);

// docs/policy.md#endpoint-path-selector: endpoint path selector: most specific wins; `/v1/admin/**` also selects `/v1/admin`; `*` crosses `/`.
const SELECTOR_ROWS: readonly (readonly [method: string, path: string, expect: Expect])[] = [
  ['DELETE', '/v1/admin/users', { ...NO_RULE, endpointIndex: 1 }],
  ['GET', '/v1/admin/users', { ...PRESET_OK, endpointIndex: 1 }],
  ['DELETE', '/v1/admin', { ...NO_RULE, endpointIndex: 1 }],
  ['DELETE', '/v1/users', { ...PRESET_OK, endpointIndex: 0 }],
  ['DELETE', '/v1/files/a/b', { ...NO_RULE, endpointIndex: 2 }],
  ['GET', '/v1/files/a/b', { ...RULE_OK, endpointIndex: 2 }],
  ['DELETE', '/v1/filesystem', { ...PRESET_OK, endpointIndex: 0 }],
];
for (const [method, path, expect] of SELECTOR_ROWS) {
  add('selector', `${method} ${path}`, SELECTOR_POLICY, req(method, path), expect);
}

// No entries at all: everything is denied with `no-policy`, connections and requests alike.
add('no policy', 'a connection under a version-only policy', 'version: 1\n', conn('api.example.com'), { verdict: 'deny', reason: 'no-policy', policy: null });
add('no policy', 'a request under a version-only policy', 'version: 1\n', req('GET', '/'), { verdict: 'deny', reason: 'no-policy', policy: null });

// The binary check is repeated for inspected requests.
add('binary', 'an L7 request from a listed binary', AUDIT_POLICY, req('GET', '/x', 'enforced.example.com', '/usr/bin/curl'), { ...PRESET_OK, binaryIdentity: 'matched' });
add('binary', 'an L7 request from an unlisted binary', AUDIT_POLICY, req('GET', '/x', 'enforced.example.com', '/usr/bin/nc'), BINARY_MISS);

// Requests on an L4 endpoint are allowed at L4: nothing inspects them.
add('layer', 'a request on an uninspected endpoint', hostPolicy('api.example.com'), req('DELETE', '/anything'), { ...ALLOW_L4, policy: 'p' });

// ---- runner --------------------------------------------------------------------------------------------------

const parsed = new Map<string, Policy>();
function policyFor(text: string): Policy {
  let policy = parsed.get(text);
  if (policy === undefined) {
    policy = parsePolicy(text, { source: 'decide-table' });
    parsed.set(text, policy);
  }
  return policy;
}

describe('decide() against the pinned reference tables', () => {
  it('has at least 150 cases', () => {
    assert.ok(CASES.length >= 150, `only ${CASES.length} cases`);
  });

  it('denies everything with no-policy under emptyPolicy()', () => {
    for (const intent of [conn('api.example.com'), req('GET', '/'), conn('10.0.0.7', 5432)]) {
      const decision = decide(emptyPolicy(), intent);
      assert.deepEqual([decision.verdict, decision.reason, decision.policy], ['deny', 'no-policy', undefined]);
    }
  });

  for (const c of CASES) {
    const { verdict, reason } = c.expect;
    it(`${c.group}: ${c.label} -> ${verdict} (${reason})`, () => {
      const decision = decide(policyFor(c.policy), c.intent);
      const got = { verdict: decision.verdict, reason: decision.reason };
      assert.deepEqual(got, { verdict, reason }, `detail: ${decision.detail}`);
      if (c.expect.policy === null) assert.equal(decision.policy, undefined);
      else if (c.expect.policy !== undefined) assert.equal(decision.policy, c.expect.policy);
      if (c.expect.endpointIndex !== undefined) assert.equal(decision.endpointIndex, c.expect.endpointIndex);
      if (c.expect.binaryIdentity !== undefined) assert.equal(decision.binaryIdentity, c.expect.binaryIdentity);
      assert.equal(decision.generation, 0);
      assert.equal(typeof decision.detail, 'string');
      if (c.intent.query) assert.ok(!decision.detail.includes(c.intent.query), 'detail never carries the query');
    });
  }
});
