// decide() reference table rows for inspected requests: rule path globs, methods, websocket frames, query
// matchers on allow and deny rules, access presets, and the endpoint path selector.

import { ANY_BINARY, BINARY_MISS, caseTable, type DecideCase, DENY_RULE, exe, type Expect, NO_RULE, PRESET_OK, RULE_OK, req, restPolicy } from './decide-table.js';

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

const { cases, add } = caseTable();


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

// docs/identity.md#matching: a launcher listed in binaries grants what it starts; the L7 decision keeps that ancestor.
const LAUNCHER_POLICY = restPolicy(['{ method: GET, path: "/v1/**" }']).replace(ANY_BINARY, '    binaries: [{ path: /usr/local/bin/agent }]');
const LAUNCHED = { ...req('GET', '/v1/items'), identity: exe('/usr/bin/curl', ['/usr/local/bin/agent']) };
add('ancestor', 'GET /v1/items by curl under a listed launcher', LAUNCHER_POLICY, LAUNCHED, { ...RULE_OK, binaryIdentity: 'process' });
add('ancestor', 'DELETE /v1/items by curl under a listed launcher', LAUNCHER_POLICY, { ...LAUNCHED, method: 'DELETE' }, { ...NO_RULE, binaryIdentity: 'process' });
add('ancestor', 'GET /v1/items by curl alone', LAUNCHER_POLICY, req('GET', '/v1/items', 'api.example.com', '/usr/bin/curl'), BINARY_MISS);

export const REQUEST_CASES: readonly DecideCase[] = cases;
