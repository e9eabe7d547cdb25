// decide() reference table rows for how entries combine: deny precedence, audit enforcement, inspected L7
// protocols that fail closed without their parsed body, overlapping endpoints and entries, binaries, and a policy with no entries.

import {
  ALLOW_L4,
  ANY_BINARY,
  AUDIT_DENY_RULE,
  AUDIT_NO_RULE,
  BINARY_MISS,
  caseTable,
  conn,
  type DecideCase,
  DENY_RULE,
  MISS,
  type Expect,
  NO_RULE,
  PRESET_OK,
  RULE_OK,
  req,
  JSONRPC_UNREAD,
} from './decide-table.js';

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

const { cases, add } = caseTable();

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
  binaryIdentity: 'process',
});

// docs/policy.md#endpoint-fields (protocol): graphql / mcp / json-rpc load but fail closed per request until inspection exists.
// docs/policy.md#graphql-inspection: a graphql endpoint decides the parsed request; one decided without it fails closed.
const GRAPHQL_UNREAD = { verdict: 'deny', reason: 'graphql-rejected' } as const;
add('unsupported l7', 'POST /graphql selects the graphql endpoint (no parsed body: rejected)', UNSUPPORTED_POLICY, req('POST', '/graphql'), { ...GRAPHQL_UNREAD, endpointIndex: 1 });
add('unsupported l7', 'GET /graphql selects the graphql endpoint (no parsed envelope: rejected)', UNSUPPORTED_POLICY, req('GET', '/graphql'), GRAPHQL_UNREAD);
add('unsupported l7', 'GET /repos falls to the REST endpoint', UNSUPPORTED_POLICY, req('GET', '/repos'), { ...PRESET_OK, endpointIndex: 0 });
add('unsupported l7', 'a json-rpc request without its parsed body (rejected)', UNSUPPORTED_POLICY, req('POST', '/', 'rpc.example.com'), JSONRPC_UNREAD);
add('unsupported l7', 'an mcp request without its parsed body (rejected)', UNSUPPORTED_POLICY, req('POST', '/mcp', 'mcp.example.com'), JSONRPC_UNREAD);
add('unsupported l7', 'a graphql request on an audit endpoint still fails closed', UNSUPPORTED_POLICY, req('POST', '/graphql', 'gql-audit.example.com'), GRAPHQL_UNREAD);
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
  ['exact.example.com', '/usr/bin/node', { ...ALLOW_L4, policy: 'exact', binaryIdentity: 'process' }],
  ['exact.example.com', '/usr/local/bin/node', BINARY_MISS],
  ['exact.example.com', '/usr/bin/nodejs', BINARY_MISS],
  ['exact.example.com', undefined, { ...ALLOW_L4, policy: 'exact', binaryIdentity: 'endpoint-only' }],
  ['glob.example.com', '/usr/lib/jvm/17/bin/java', { ...ALLOW_L4, binaryIdentity: 'process' }],
  ['glob.example.com', '/usr/lib/jvm/17/jre/bin/java', BINARY_MISS],
  ['glob.example.com', '/usr/lib/jvm/bin/java', BINARY_MISS],
  ['glob.example.com', '/usr/bin/python3.12', { ...ALLOW_L4, binaryIdentity: 'process' }],
  ['glob.example.com', '/usr/bin/python2', BINARY_MISS],
  ['deep.example.com', '/opt/tools/a/b/c', { ...ALLOW_L4, binaryIdentity: 'process' }],
  ['deep.example.com', '/opt/other/x', BINARY_MISS],
  ['any.example.com', '/anything/at/all', { ...ALLOW_L4, binaryIdentity: 'process' }],
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

// No entries at all: everything is denied with `no-policy`, connections and requests alike.
add('no policy', 'a connection under a version-only policy', 'version: 1\n', conn('api.example.com'), { verdict: 'deny', reason: 'no-policy', policy: null });
add('no policy', 'a request under a version-only policy', 'version: 1\n', req('GET', '/'), { verdict: 'deny', reason: 'no-policy', policy: null });

// The binary check is repeated for inspected requests.
add('binary', 'an L7 request from a listed binary', AUDIT_POLICY, req('GET', '/x', 'enforced.example.com', '/usr/bin/curl'), { ...PRESET_OK, binaryIdentity: 'process' });
add('binary', 'an L7 request from an unlisted binary', AUDIT_POLICY, req('GET', '/x', 'enforced.example.com', '/usr/bin/nc'), BINARY_MISS);

export const ENTRY_CASES: readonly DecideCase[] = cases;
