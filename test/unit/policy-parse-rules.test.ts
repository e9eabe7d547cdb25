// parsePolicy validation rules: one failing policy per rule (V1-V12 and the field checks), each expected at its
// YAML path, and the ambiguity rule (V13) for overlapping endpoints that disagree.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorCode } from '../../src/shared/errors.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { E0, endpoint, expectIssue } from '../harness/policy-parse-fixtures.js';

describe('parsePolicy: validation rules', () => {
  const cases: [string, string, ErrorCode, string][] = [
    ['V1 version must be exactly 1', 'version: "1"\n', 'POLICY_VERSION', 'version'],
    ['V1 version is required', 'network_policies: {}\n', 'POLICY_VERSION', 'version'],
    ['V1 unknown top-level key', 'version: 1\nnetwork_policy: {}\n', 'POLICY_UNKNOWN_KEY', 'network_policy'],
    ['V1 unknown key in a not-enforced section', 'version: 1\nlandlock: { compat: x }\n', 'POLICY_UNKNOWN_KEY', 'landlock.compat'],
    ['V1 not-enforced section must be a map', 'version: 1\nprocess: [a]\n', 'POLICY_TYPE', 'process'],
    ['V1 unknown entry key', endpoint('{ host: a.example.com, port: 443 }').replace('    binaries', '    binary: x\n    binaries'), 'POLICY_UNKNOWN_KEY', 'network_policies.p.binary'],
    ['V1 unknown key in a rule', endpoint('host: a.example.com\nport: 443\nprotocol: rest\nrules: [{ allow: { method: GET, path: /, querry: {} } }]'), 'POLICY_UNKNOWN_KEY', `${E0}.rules[0].allow.querry`],
    ['V1 unknown key in a binary', endpoint('{ host: a.example.com, port: 443 }').replace('[{ path: "/**" }]', '[{ path: "/**", sha: x }]'), 'POLICY_UNKNOWN_KEY', 'network_policies.p.binaries[0].sha'],
    ['V2 reserved key', 'version: 1\nnetwork_policies:\n  _provider_gh:\n    endpoints: [{ host: a.example.com, port: 443 }]\n', 'POLICY_RESERVED_KEY', 'network_policies._provider_gh'],
    ['V2 endpoints missing', 'version: 1\nnetwork_policies:\n  p:\n    binaries: []\n', 'POLICY_ENDPOINTS_EMPTY', 'network_policies.p.endpoints'],
    ['V2 endpoints must be a list', 'version: 1\nnetwork_policies:\n  p:\n    endpoints: { host: a }\n', 'POLICY_TYPE', 'network_policies.p.endpoints'],
    ['V3 host required', endpoint('{ port: 443 }'), 'POLICY_HOST_REQUIRED', `${E0}.host`],
    ['V3 host required with empty allowed_ips', endpoint('{ port: 443, allowed_ips: [] }'), 'POLICY_HOST_REQUIRED', `${E0}.host`],
    ['V3 host grammar', endpoint('{ host: "api.*", port: 443 }'), 'POLICY_HOST_WILDCARD', `${E0}.host`],
    ['V3 host must be a string', endpoint('{ host: [a], port: 443 }'), 'POLICY_TYPE', `${E0}.host`],
    ['V4 port range', endpoint('{ host: a.example.com, port: 65536 }'), 'POLICY_PORT_INVALID', `${E0}.port`],
    ['V4 port integer', endpoint('{ host: a.example.com, port: "443" }'), 'POLICY_PORT_INVALID', `${E0}.port`],
    ['V4 port required', endpoint('{ host: a.example.com }'), 'POLICY_PORT_REQUIRED', `${E0}.port`],
    ['V4 ports empty', endpoint('{ host: a.example.com, ports: [] }'), 'POLICY_PORT_REQUIRED', `${E0}.ports`],
    ['V5 access and rules', endpoint('host: a.example.com\nport: 443\nprotocol: rest\naccess: full\nrules: [{ allow: { method: GET, path: / } }]'), 'POLICY_ACCESS_AND_RULES', `${E0}.access`],
    ['V5 rest needs rules', endpoint('{ host: a.example.com, port: 443, protocol: rest }'), 'POLICY_RULES_REQUIRED', `${E0}.rules`],
    ['V5 websocket needs rules', endpoint('{ host: a.example.com, port: 443, protocol: websocket }'), 'POLICY_RULES_REQUIRED', `${E0}.rules`],
    ['V5 graphql needs rules', endpoint('{ host: a.example.com, port: 443, protocol: graphql }'), 'POLICY_RULES_REQUIRED', `${E0}.rules`],
    ['V5 access value', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: write }'), 'POLICY_ACCESS_INVALID', `${E0}.access`],
    ['V6 rules empty', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [] }'), 'POLICY_RULES_EMPTY', `${E0}.rules`],
    ['V6 rules without allow', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{}] }'), 'POLICY_RULES_NO_ALLOW', `${E0}.rules`],
    ['V6 a rules entry without allow beside one with it', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{}, { allow: { method: GET, path: /x } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0]`],
    ['V6 deny_rules empty', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, deny_rules: [] }'), 'POLICY_DENY_RULES_EMPTY', `${E0}.deny_rules`],
    ['V7 deny_rules need a protocol', endpoint('{ host: a.example.com, port: 443, deny_rules: [{ method: GET, path: / }] }'), 'POLICY_DENY_RULES_REQUIREMENTS', `${E0}.deny_rules`],
    ['V7 deny_rules need rules or access', endpoint('{ host: a.example.com, port: 443, protocol: mcp, deny_rules: [{ method: x }] }'), 'POLICY_DENY_RULES_REQUIREMENTS', `${E0}.deny_rules`],
    ['V8 mcp rejects access', endpoint('{ host: a.example.com, port: 443, protocol: mcp, access: full }'), 'POLICY_ACCESS_INVALID', `${E0}.access`],
    ['V8 json-rpc rejects access', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc, access: read-only }'), 'POLICY_ACCESS_INVALID', `${E0}.access`],
    ['V8 json-rpc needs rules', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc }'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules`],
    ['V8 json-rpc needs allow.method', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc, rules: [{ allow: {} }] }'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules[0].allow.method`],
    ['V8 json-rpc rejects method globs', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc, rules: [{ allow: { method: "reports.*" } }] }'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules[0].allow.method`],
    ['V8 mcp needs rules', endpoint('{ host: a.example.com, port: 443, protocol: mcp }'), 'POLICY_MCP_INVALID', `${E0}.rules`],
    ['V8 mcp needs a host', endpoint('{ allowed_ips: [10.0.0.0/8], port: 443, protocol: mcp, mcp: { allow_all_known_mcp_methods: true } }'), 'POLICY_MCP_INVALID', `${E0}.host`],
    ['V8 mcp tool needs tools/call', endpoint('{ host: a.example.com, port: 443, protocol: mcp, rules: [{ allow: { method: initialize, tool: x } }] }'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.method`],
    ['V8 mcp method * is not a method', endpoint('{ host: a.example.com, port: 443, protocol: mcp, rules: [{ allow: { method: "*" } }] }'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.method`],
    ['V8 mcp broad tools/call beside tool rules', endpoint('host: a.example.com\nport: 443\nprotocol: mcp\nrules:\n  - allow: { method: tools/call, tool: x }\n  - allow: { method: "tools/*" }'), 'POLICY_MCP_INVALID', `${E0}.rules`],
    ['V8 mcp options only on mcp', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, mcp: { max_body_bytes: 10 } }'), 'POLICY_MCP_INVALID', `${E0}.mcp`],
    ['V8 mcp options shape', endpoint('{ host: a.example.com, port: 443, protocol: mcp, mcp: { max_body_bytes: -5, allow_all_known_mcp_methods: true } }'), 'POLICY_MCP_INVALID', `${E0}.mcp.max_body_bytes`],
    ['V9 tcp rejects L7 fields', endpoint('{ host: db.example.com, port: 5432, protocol: tcp, enforcement: enforce }'), 'POLICY_TCP_L7_FIELD', `${E0}.enforcement`],
    ['V9 tcp needs a DNS name', endpoint('{ host: 10.0.0.1, port: 5432, protocol: tcp }'), 'POLICY_TCP_HOST', `${E0}.host`],
    ['V9 tcp rejects a trailing dot', endpoint('{ host: db.example.com., port: 5432, protocol: tcp }'), 'POLICY_TCP_HOST', `${E0}.host`],
    ['V9 tcp needs a host', endpoint('{ port: 5432, protocol: tcp, allowed_ips: [10.0.0.0/24] }'), 'POLICY_TCP_HOST', `${E0}.host`],
    ['V10 allowed_ips loopback', endpoint('{ host: a.example.com, port: 443, allowed_ips: [127.0.0.0/8] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips metadata', endpoint('{ host: a.example.com, port: 443, allowed_ips: [169.254.169.254/32] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips v6 link-local', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["fe80::/64"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips ::1', endpoint('{ host: a.example.com, port: 443, allowed_ips: [10.0.0.0/8, "::1"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[1]`],
    ['V10 allowed_ips 0.0.0.0/0', endpoint('{ host: a.example.com, port: 443, allowed_ips: [0.0.0.0/0] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips ::/0', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["::/0"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips mapped loopback', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["::ffff:127.0.0.1"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    // Embedded IPv4 forms are classified as the IPv4 they carry (address.ts), so they overlap it just the same.
    ['V10 allowed_ips NAT64 metadata', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["64:ff9b::a9fe:a9fe"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips all of NAT64', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["64:ff9b::/96"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips IPv4-compatible loopback', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["::7f00:1"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips 6to4 loopback', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["2002:7f00::/24"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips 6to4 link-local', endpoint('{ host: a.example.com, port: 443, allowed_ips: ["2002:a9fe:a9fe::/48"] }'), 'POLICY_ALLOWED_IPS_LOOPBACK', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips host bits', endpoint('{ host: a.example.com, port: 443, allowed_ips: [10.1.0.0/8] }'), 'POLICY_ALLOWED_IPS_HOST_BITS', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips prefix too long', endpoint('{ host: a.example.com, port: 443, allowed_ips: [10.1.2.3/33] }'), 'POLICY_ALLOWED_IPS_INVALID', `${E0}.allowed_ips[0]`],
    ['V10 allowed_ips bad octet', endpoint('{ host: a.example.com, port: 443, allowed_ips: [300.1.1.1] }'), 'POLICY_ALLOWED_IPS_INVALID', `${E0}.allowed_ips[0]`],
    ['V11 signing needs a service', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, credential_signing: sigv4 }'), 'POLICY_SIGNING_INVALID', `${E0}.credential_signing`],
    ['V11 signing mode', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, credential_signing: sigv2, signing_service: s3 }'), 'POLICY_SIGNING_INVALID', `${E0}.credential_signing`],
    ['V11 signing excludes body rewrite', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, credential_signing: sigv4, signing_service: s3, request_body_credential_rewrite: true }'), 'POLICY_SIGNING_INVALID', `${E0}.credential_signing`],
    ['V11 body rewrite is rest only', endpoint('{ host: a.example.com, port: 443, protocol: websocket, access: full, request_body_credential_rewrite: true }'), 'POLICY_BODY_REWRITE_INVALID', `${E0}.request_body_credential_rewrite`],
    ['websocket rewrite is rest or websocket only', endpoint('{ host: a.example.com, port: 443, protocol: graphql, access: full, websocket_credential_rewrite: true }'), 'POLICY_WEBSOCKET_REWRITE_INVALID', `${E0}.websocket_credential_rewrite`],
    ['V12 credentials on L4', endpoint('{ host: a.example.com, port: 443, credential_binding: { provider: gh } }'), 'POLICY_UNINSPECTED_CREDENTIALS', `${E0}.credential_binding`],
    ['V12 credentials on tls skip', endpoint('{ host: a.example.com, port: 443, tls: skip, credential_binding: { provider: gh } }'), 'POLICY_UNINSPECTED_CREDENTIALS', `${E0}.credential_binding`],
    ['protocol sql is rejected', endpoint('{ host: db.example.com, port: 5432, protocol: sql, access: full }'), 'POLICY_PROTOCOL_INVALID', `${E0}.protocol`],
    ['protocol https is unknown', endpoint('{ host: a.example.com, port: 443, protocol: https }'), 'POLICY_PROTOCOL_INVALID', `${E0}.protocol`],
    ['tls value', endpoint('{ host: a.example.com, port: 443, tls: off }'), 'POLICY_TLS_INVALID', `${E0}.tls`],
    ['tls skip with a request protocol', endpoint('{ host: a.example.com, port: 443, tls: skip, protocol: rest, access: full }'), 'POLICY_TLS_WITH_PROTOCOL', `${E0}.tls`],
    ['enforcement value', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, enforcement: block }'), 'POLICY_ENFORCEMENT_INVALID', `${E0}.enforcement`],
    ['endpoint path selector glob', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, path: "/v[1" }'), 'POLICY_PATH_INVALID', `${E0}.path`],
    ['rule method token', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: "GE T", path: / } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.method`],
    ['rule path required', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: GET } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.path`],
    ['rule path must be absolute', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: GET, path: api } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.path`],
    ['deny rule method required', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, deny_rules: [{ path: / }] }'), 'POLICY_RULE_INVALID', `${E0}.deny_rules[0].method`],
    ['query any must not be empty', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: GET, path: /, query: { f: { any: [] } } } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.query.f.any`],
    ['query value glob with . inside a class (values split on .)', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: GET, path: /, query: { v: "[a.b]" } } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.query.v`],
    ['query matcher shape', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: GET, path: /, query: { f: 3 } } }] }'), 'POLICY_TYPE', `${E0}.rules[0].allow.query.f`],
    ['websocket rule methods', endpoint('{ host: a.example.com, port: 443, protocol: websocket, rules: [{ allow: { method: POST, path: / } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.method`],
    ['websocket rule mixing forms', endpoint('{ host: a.example.com, port: 443, protocol: websocket, rules: [{ allow: { method: GET, path: /, operation_type: query } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow`],
    ['graphql operation type', endpoint('{ host: a.example.com, port: 443, protocol: graphql, rules: [{ allow: { operation_type: read } }] }'), 'POLICY_GRAPHQL_INVALID', `${E0}.rules[0].allow.operation_type`],
    ['graphql rule fields on rest', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: POST, path: /graphql, fields: [viewer] } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.fields`],
    ['graphql rule fields on an L4 endpoint', endpoint('{ host: a.example.com, port: 443, rules: [{ allow: { method: POST, path: /graphql, operation_type: query } }] }'), 'POLICY_RULE_INVALID', `${E0}.rules[0].allow.operation_type`],
    ['binary path required', endpoint('{ host: a.example.com, port: 443 }').replace('[{ path: "/**" }]', '[{ name: curl }]'), 'POLICY_BINARY_INVALID', 'network_policies.p.binaries[0].path'],
    ['binary path absolute', endpoint('{ host: a.example.com, port: 443 }').replace('"/**"', 'node'), 'POLICY_BINARY_INVALID', 'network_policies.p.binaries[0].path'],
    ['boolean fields', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, allow_encoded_slash: "yes" }'), 'POLICY_TYPE', `${E0}.allow_encoded_slash`],
  ];
  for (const [name, text, code, path] of cases) {
    it(`${name}: ${code} at ${path}`, () => {
      expectIssue(text, code, path);
    });
  }
});

describe('parsePolicy: ambiguity (V13)', () => {
  const two = (a: string, b: string): string =>
    `version: 1\nnetwork_policies:\n  one:\n    endpoints: [${a}]\n  two:\n    endpoints: [${b}]\n`;
  const rest = (extra: string): string => `{ host: api.example.com, port: 443, protocol: rest, enforcement: enforce, access: full${extra} }`;

  const rejected: [string, string, string][] = [
    ['tls', rest(''), '{ host: api.example.com, port: 443, tls: skip }'],
    ['allowed_ips on a wildcard', '{ host: "*.example.com", port: 443, allowed_ips: [10.20.0.0/16] }', '{ host: api.example.com, port: 443 }'],
    ['allowed_ips on overlapping wildcards', '{ host: "**.example.com", port: 443 }', '{ host: "api.*.example.com", port: 443, allowed_ips: [10.20.0.0/16] }'],
    ['protocol', rest(''), '{ host: api.example.com, port: 443, protocol: websocket, enforcement: enforce, access: full }'],
    ['enforcement', rest(''), rest('').replace('enforce,', 'audit,')],
    ['credentials', rest(', credential_binding: { provider: a }'), rest(', credential_binding: { provider: b }')],
    ['tls with the hostless form', '{ port: 443, allowed_ips: [10.0.0.0/24] }', '{ host: x.example.com, port: 443, tls: skip }'],
    ['enforcement, on equally specific path selectors that share a path', rest(', path: "/api/*/x"'), rest(', path: "/api/v/*"').replace('enforce,', 'audit,')],
  ];
  for (const [what, a, b] of rejected) {
    it(`rejects endpoints that disagree on ${what}, at the later endpoint`, () => {
      expectIssue(two(a, b), 'POLICY_AMBIGUOUS', 'network_policies.two.endpoints[0]');
    });
  }

  const accepted: [string, string, string][] = [
    ['different ports', rest(''), '{ host: api.example.com, port: 8443, tls: skip }'],
    ['non-overlapping wildcards', '{ host: "*.a.example.com", port: 443, allowed_ips: [10.20.0.0/16] }', '{ host: "*.example.com", port: 443 }'],
    ['different path selectors', rest(''), '{ host: api.example.com, port: 443, path: /graphql, protocol: graphql, enforcement: audit, access: full }'],
    ['an L4 endpoint beside an inspected one', rest(''), '{ host: "*.example.com", port: 443 }'],
    ['identical settings in two entries', rest(''), rest('')],
    ['the hostless form with its own allowed_ips', '{ port: 443, allowed_ips: [10.0.0.0/24] }', '{ host: x.example.com, port: 443 }'],
    ['equally specific path selectors that share no path', rest(', path: "/api/*/read"'), rest(', path: "/api/*/list"').replace('enforce,', 'audit,')],
  ];
  for (const [what, a, b] of accepted) {
    it(`accepts ${what}`, () => {
      assert.doesNotThrow(() => parsePolicy(two(a, b)));
    });
  }
});
