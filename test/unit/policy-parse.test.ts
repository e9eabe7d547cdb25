// parsePolicy and loadPolicyFile: one failing policy per validation rule (V1-V14), every problem reported at
// once with its YAML path, line and column, warnings, host normalisation, the hash and the frozen result.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { BoundaryError, type ErrorCode, type Issue, isBoundaryError } from '../../src/errors.js';
import { loadPolicyFile } from '../../src/policy/load.js';
import { parsePolicy } from '../../src/policy/parse.js';

function issuesOf(text: string, source?: string): readonly Issue[] {
  try {
    parsePolicy(text, source === undefined ? {} : { source });
  } catch (err) {
    assert.ok(isBoundaryError(err), String(err));
    assert.equal(err.code, 'POLICY_INVALID');
    return err.issues;
  }
  assert.fail('the policy loaded, but it should have failed');
}

function expectIssue(text: string, code: ErrorCode, path: string): Issue {
  const issues = issuesOf(text);
  const issue = issues.find((i) => i.code === code && i.path === path);
  assert.ok(issue, `no ${code} at ${path}; got:\n${issues.map((i) => `${i.code} ${i.path} ${i.message}`).join('\n')}`);
  assert.ok((issue.line ?? 0) >= 1 && (issue.column ?? 0) >= 1, 'issue has a 1-based position');
  return issue;
}

/** One endpoint under `network_policies.p.endpoints[0]`, written as YAML flow-map body lines. */
function endpoint(lines: string, extra = ''): string {
  const body = lines
    .trim()
    .split('\n')
    .map((line, i) => `${i === 0 ? '      - ' : '        '}${line.trim()}`)
    .join('\n');
  return `version: 1\nnetwork_policies:\n  p:\n    endpoints:\n${body}\n    binaries: [{ path: "/**" }]\n${extra}`;
}

const E0 = 'network_policies.p.endpoints[0]';

describe('parsePolicy: a valid policy', () => {
  const text = `version: 1
network_policies:
  tracker_api:
    name: tracker-api
    endpoints:
      - host: Tracker.Example.com.
        ports: [443]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/api/v2/**" }
          - allow: { method: get, path: /export, query: { format: { any: [csv, json] } } }
        deny_rules:
          - { method: "*", path: "/api/v2/admin/**" }
    binaries: [{ path: /usr/bin/node }]
  packages:
    endpoints: [{ host: "*.pkg.example.net", port: 443 }]
    binaries: [{ path: "/**" }]
  cache:
    endpoints: [{ host: cache.internal.example.com, port: 6379, protocol: tcp }]
    binaries: [{ path: /usr/local/bin/worker }]
`;
  const policy = parsePolicy(text);

  it('compiles entries and endpoints in policy order with stable ids', () => {
    assert.deepEqual(policy.entries.map((e) => e.key), ['tracker_api', 'packages', 'cache']);
    assert.deepEqual(policy.endpoints.map((e) => e.id), ['tracker_api#0', 'packages#0', 'cache#0']);
    assert.deepEqual(policy.endpoints.map((e) => e.order), [0, 1, 2]);
    assert.equal(policy.entries[0]?.name, 'tracker-api');
    assert.equal(policy.entries[1]?.name, 'packages', 'name defaults to the key');
    assert.equal(policy.generation, 0);
  });

  it('normalises hosts and records how each was written', () => {
    const [tracker, packages, cache] = policy.endpoints;
    assert.equal(tracker?.host, 'tracker.example.com');
    assert.equal(tracker?.hostKind, 'exact');
    assert.equal(packages?.hostKind, 'wildcard');
    assert.equal(cache?.protocol, 'tcp');
    assert.equal(packages?.protocol, 'l4');
    assert.equal(tracker?.inspected, true);
    assert.equal(packages?.inspected, false);
    assert.equal(tracker?.enforcement, 'enforce');
    assert.equal(tracker?.tls, 'auto');
    assert.deepEqual(tracker?.ports, [443]);
    assert.equal(tracker?.rules.length, 2);
    assert.equal(tracker?.denyRules[0]?.text, '* /api/v2/admin/**');
    assert.equal(tracker?.rules[1]?.text, 'GET /export (query: format)');
  });

  it('is deep-frozen', () => {
    assert.ok(Object.isFrozen(policy));
    assert.ok(Object.isFrozen(policy.entries));
    assert.ok(Object.isFrozen(policy.endpoints));
    assert.ok(Object.isFrozen(policy.endpoints[0]));
    assert.ok(Object.isFrozen(policy.endpoints[0]?.ports));
    assert.ok(Object.isFrozen(policy.endpoints[0]?.rules));
    assert.ok(Object.isFrozen(policy.warnings));
    assert.throws(() => {
      (policy.endpoints as unknown as unknown[]).push({});
    }, TypeError);
    assert.throws(() => {
      (policy.endpoints[0] as unknown as { host: string }).host = 'evil.example';
    }, TypeError);
  });

  it('hashes canonical content: formatting, comments, key order and entry order do not change it', () => {
    const reordered = `# comment
network_policies:
  cache:
    endpoints: [{ protocol: tcp, port: 6379, host: cache.internal.example.com }]
    binaries: [{ path: /usr/local/bin/worker }]
  packages:
    binaries: [{ path: "/**" }]
    endpoints:
      - port: 443
        host: "*.pkg.example.net"
  tracker_api:
    name: tracker-api
    binaries: [{ path: /usr/bin/node }]
    endpoints:
      - host: tracker.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/api/v2/**" }
          - allow: { path: /export, method: GET, query: { format: { any: [csv, json] } } }
        deny_rules:
          - { path: "/api/v2/admin/**", method: "*" }
version: 1
`;
    assert.match(policy.hash, /^[0-9a-f]{64}$/);
    assert.equal(parsePolicy(reordered).hash, policy.hash);
    assert.notEqual(parsePolicy(text.replace('port: 6379', 'port: 6380')).hash, policy.hash);
    assert.notEqual(parsePolicy(text.replace('enforcement: enforce', 'enforcement: audit')).hash, policy.hash);
  });

  it('indexes hosts: exact, wildcard and none', () => {
    assert.deepEqual(policy.endpointsForHost('tracker.example.com').map((e) => e.id), ['tracker_api#0']);
    assert.deepEqual(policy.endpointsForHost('a.pkg.example.net').map((e) => e.id), ['packages#0']);
    assert.deepEqual(policy.endpointsForHost('pkg.example.net'), []);
    assert.deepEqual(policy.endpointsForHost('1.2.3.4'), []);
  });

  it('accepts an empty file section and yields a policy with no entries', () => {
    const empty = parsePolicy('version: 1\nnetwork_policies: {}\n');
    assert.equal(empty.entries.length, 0);
    assert.equal(parsePolicy('version: 1\n').entries.length, 0);
  });
});

describe('parsePolicy: every problem at once, with positions', () => {
  const text = `version: 2
network_policies:
  api:
    endpoints:
      - host: "*.com"
        port: 0
        deny_rule: []
      - host: ok.example.com
        ports: [443, 70000]
        protocol: rest
    binaries: [{ path: usr/bin/node }]
  _provider_x:
    endpoints: []
extra: true
`;
  const issues = issuesOf(text, 'broken.yaml');

  it('reports each problem with its code, path, line and column', () => {
    const table: [ErrorCode, string, number, number][] = [
      ['POLICY_VERSION', 'version', 1, 10],
      ['POLICY_HOST_WILDCARD', 'network_policies.api.endpoints[0].host', 5, 15],
      ['POLICY_PORT_INVALID', 'network_policies.api.endpoints[0].port', 6, 15],
      ['POLICY_UNKNOWN_KEY', 'network_policies.api.endpoints[0].deny_rule', 7, 9],
      ['POLICY_PORT_INVALID', 'network_policies.api.endpoints[1].ports[1]', 9, 22],
      ['POLICY_RULES_REQUIRED', 'network_policies.api.endpoints[1].rules', 8, 9],
      ['POLICY_BINARY_INVALID', 'network_policies.api.binaries[0].path', 11, 24],
      ['POLICY_RESERVED_KEY', 'network_policies._provider_x', 12, 3],
      ['POLICY_ENDPOINTS_EMPTY', 'network_policies._provider_x.endpoints', 13, 16],
      ['POLICY_UNKNOWN_KEY', 'extra', 14, 1],
    ];
    for (const [code, path, line, column] of table) {
      const issue = issues.find((i) => i.code === code && i.path === path);
      assert.ok(issue, `missing ${code} at ${path}`);
      assert.deepEqual([issue.line, issue.column], [line, column], `${code} at ${path}`);
      assert.equal(issue.source, 'broken.yaml');
    }
    assert.equal(issues.length, table.length, issues.map((i) => `${i.code} ${i.path}`).join('\n'));
  });

  it('puts the source and every problem into the error message, in document order', () => {
    try {
      parsePolicy(text, { source: 'broken.yaml' });
    } catch (err) {
      assert.ok(err instanceof BoundaryError);
      assert.match(err.message, /policy broken\.yaml is invalid \(10 problems\)/);
      assert.match(err.message, /broken\.yaml:5:15: network_policies\.api\.endpoints\[0\]\.host/);
      assert.ok(err.message.indexOf(':1:10:') < err.message.indexOf(':14:1:'));
    }
  });

  it('turns YAML syntax errors into POLICY_YAML_SYNTAX issues with a line', () => {
    const syntax = issuesOf('version: 1\nnetwork_policies:\n  a: [1,\n');
    assert.equal(syntax[0]?.code, 'POLICY_YAML_SYNTAX');
    assert.ok((syntax[0]?.line ?? 0) >= 3);
    const duplicate = issuesOf('version: 1\nversion: 1\n');
    assert.equal(duplicate[0]?.code, 'POLICY_YAML_SYNTAX');
    assert.equal(duplicate[0]?.line, 2);
  });

  it('rejects an empty document and a non-map document', () => {
    assert.equal(issuesOf('')[0]?.code, 'POLICY_VERSION');
    assert.equal(issuesOf('- 1\n')[0]?.code, 'POLICY_TYPE');
  });
});

describe('parsePolicy: validation rules', () => {
  const cases: [string, string, ErrorCode, string][] = [
    ['V1 version must be exactly 1', 'version: "1"\n', 'POLICY_VERSION', 'version'],
    ['V1 version is required', 'network_policies: {}\n', 'POLICY_VERSION', 'version'],
    ['V1 unknown top-level key', 'version: 1\nnetwork_policy: {}\n', 'POLICY_UNKNOWN_KEY', 'network_policy'],
    ['V1 unknown key in a not-enforced section', 'version: 1\nlandlock: { compat: x }\n', 'POLICY_UNKNOWN_KEY', 'landlock.compat'],
    ['V1 not-enforced section must be a map', 'version: 1\nprocess: [a]\n', 'POLICY_TYPE', 'process'],
    ['middlewares are unsupported', 'version: 1\nnetwork_middlewares: {}\n', 'POLICY_MIDDLEWARES_UNSUPPORTED', 'network_middlewares'],
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
    ['V6 deny_rules empty', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, deny_rules: [] }'), 'POLICY_DENY_RULES_EMPTY', `${E0}.deny_rules`],
    ['V7 deny_rules need a protocol', endpoint('{ host: a.example.com, port: 443, deny_rules: [{ method: GET, path: / }] }'), 'POLICY_DENY_RULES_REQUIREMENTS', `${E0}.deny_rules`],
    ['V7 deny_rules need rules or access', endpoint('{ host: a.example.com, port: 443, protocol: mcp, deny_rules: [{ method: x }] }'), 'POLICY_DENY_RULES_REQUIREMENTS', `${E0}.deny_rules`],
    ['V8 mcp rejects access', endpoint('{ host: a.example.com, port: 443, protocol: mcp, access: full }'), 'POLICY_ACCESS_INVALID', `${E0}.access`],
    ['V8 json-rpc rejects access', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc, access: read-only }'), 'POLICY_ACCESS_INVALID', `${E0}.access`],
    ['V8 json-rpc needs rules', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc }'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules`],
    ['V8 json-rpc needs allow.method', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc, rules: [{ allow: {} }] }'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules[0].allow.method`],
    ['V8 json-rpc rejects method globs', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc, rules: [{ allow: { method: "reports.*" } }] }'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules[0].allow.method`],
    ['V8 mcp needs rules', endpoint('{ host: a.example.com, port: 443, protocol: mcp }'), 'POLICY_MCP_INVALID', `${E0}.rules`],
    ['V8 mcp needs a concrete host', endpoint('{ host: "*.example.com", port: 443, protocol: mcp, mcp: { allow_all_known_mcp_methods: true } }'), 'POLICY_MCP_INVALID', `${E0}.host`],
    ['V8 mcp tool needs tools/call', endpoint('{ host: a.example.com, port: 443, protocol: mcp, rules: [{ allow: { method: initialize, tool: x } }] }'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow`],
    ['V8 mcp method * is not a method', endpoint('{ host: a.example.com, port: 443, protocol: mcp, rules: [{ allow: { method: "*" } }] }'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.method`],
    ['V8 mcp broad tools/call beside tool rules', endpoint('host: a.example.com\nport: 443\nprotocol: mcp\nrules:\n  - allow: { method: tools/call, tool: x }\n  - allow: { method: "tools/*" }'), 'POLICY_MCP_INVALID', `${E0}.rules`],
    ['V8 mcp options only on mcp', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, mcp: { max_body_bytes: 10 } }'), 'POLICY_MCP_INVALID', `${E0}.mcp`],
    ['V8 mcp options shape', endpoint('{ host: a.example.com, port: 443, protocol: mcp, mcp: { max_body_bytes: 0, allow_all_known_mcp_methods: true } }'), 'POLICY_MCP_INVALID', `${E0}.mcp.max_body_bytes`],
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
    ['graphql options only on graphql', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, graphql_max_body_bytes: 10 }'), 'POLICY_GRAPHQL_INVALID', `${E0}.graphql_max_body_bytes`],
    ['graphql allow_registered needs a registry', endpoint('{ host: a.example.com, port: 443, protocol: graphql, access: full, persisted_queries: allow_registered }'), 'POLICY_GRAPHQL_INVALID', `${E0}.persisted_queries`],
    ['binary path required', endpoint('{ host: a.example.com, port: 443 }').replace('[{ path: "/**" }]', '[{ harness: true }]'), 'POLICY_BINARY_INVALID', 'network_policies.p.binaries[0].path'],
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
  ];
  for (const [what, a, b] of accepted) {
    it(`accepts ${what}`, () => {
      assert.doesNotThrow(() => parsePolicy(two(a, b)));
    });
  }
});

describe('parsePolicy: warnings and ignored sections', () => {
  const warned = (text: string, code: ErrorCode, pathPrefix: string): void => {
    const policy = parsePolicy(text);
    assert.ok(
      policy.warnings.some((w) => w.code === code && w.path.startsWith(pathPrefix) && (w.line ?? 0) >= 1),
      `expected ${code} under ${pathPrefix}; got ${policy.warnings.map((w) => `${w.code} ${w.path}`).join(', ')}`,
    );
  };

  it('warns on the audit default of an L7 endpoint and not on an L4 one', () => {
    warned(endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full }'), 'POLICY_WARN_AUDIT_DEFAULT', E0);
    assert.deepEqual(parsePolicy(endpoint('{ host: a.example.com, port: 443 }')).warnings, []);
  });

  it('warns when port and ports are both set, and ports wins', () => {
    warned(endpoint('{ host: a.example.com, port: 80, ports: [443, 8443] }'), 'POLICY_WARN_PORT_AND_PORTS', E0);
    assert.deepEqual(parsePolicy(endpoint('{ host: a.example.com, port: 80, ports: [8443, 443] }')).endpoints[0]?.ports, [443, 8443]);
  });

  it('warns on deprecated tls values and treats them as auto', () => {
    warned(endpoint('{ host: a.example.com, port: 443, tls: terminate }'), 'POLICY_WARN_TLS_DEPRECATED', `${E0}.tls`);
    assert.equal(parsePolicy(endpoint('{ host: a.example.com, port: 443, tls: passthrough }')).endpoints[0]?.tls, 'auto');
  });

  it('warns on allowed_ips broader than /16 and keeps canonical CIDRs', () => {
    warned(endpoint('{ host: a.example.com, port: 443, allowed_ips: [172.16.0.0/12] }'), 'POLICY_WARN_ALLOWED_IPS_BROAD', `${E0}.allowed_ips[0]`);
    const policy = parsePolicy(endpoint('{ host: a.example.com, port: 443, allowed_ips: [10.1.2.3, "2001:DB8::/32"] }'));
    assert.deepEqual(policy.endpoints[0]?.allowedIps, ['10.1.2.3/32', '2001:db8::/32']);
  });

  it('warns on rules without protocol (V14)', () => {
    warned(endpoint('{ host: a.example.com, port: 443, access: read-only }'), 'POLICY_WARN_RULES_WITHOUT_PROTOCOL', E0);
  });

  it('warns on public-suffix wildcards', () => {
    warned(endpoint('{ host: "*.co.uk", port: 443 }'), 'POLICY_WARN_PUBLIC_SUFFIX', `${E0}.host`);
  });

  it('warns that graphql, mcp and json-rpc are not inspected yet', () => {
    warned(endpoint('{ host: a.example.com, port: 443, protocol: graphql, enforcement: enforce, rules: [{ allow: { operation_type: query } }] }'), 'POLICY_WARN_UNSUPPORTED_L7', E0);
    warned(endpoint('{ host: a.example.com, port: 443, protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true } }'), 'POLICY_WARN_UNSUPPORTED_L7', E0);
  });

  it('lists filesystem_policy, landlock and process as not enforced, with a warning each', () => {
    const text = 'version: 1\nfilesystem_policy: { read_only: [/usr] }\nlandlock: { compatibility: best_effort }\nprocess: { run_as_user: sandbox }\n';
    const policy = parsePolicy(text);
    assert.deepEqual(policy.notEnforced, ['filesystem_policy', 'landlock', 'process']);
    assert.equal(policy.warnings.filter((w) => w.code === 'POLICY_WARN_NOT_ENFORCED').length, 3);
  });

  it('ignores harness, advisor_proposed and provider_credentialed in user YAML', () => {
    const policy = parsePolicy(
      endpoint('{ host: a.example.com, port: 443, advisor_proposed: true, provider_credentialed: true }').replace('"/**" }', '"/**", harness: true }'),
    );
    assert.equal(policy.endpoints[0]?.credentialProvider, undefined);
  });

  it('applies protocol option defaults and reads explicit ones', () => {
    const policy = parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true, max_body_bytes: 131072, versions: ["2025-06-18"] } }'));
    const options = policy.endpoints[0]?.options;
    assert.equal(options?.mcpAllowAllKnownMethods, true);
    assert.equal(options?.mcpMaxBodyBytes, 131072);
    assert.equal(options?.mcpStrictToolNames, true);
    assert.equal(options?.graphqlMaxBodyBytes, 65536);
    assert.deepEqual(options?.mcpVersions, ['2025-06-18']);
  });

  it('accepts an escape-hatched credentialed L4 endpoint and a credentialed rest endpoint', () => {
    const hatch = parsePolicy(endpoint('{ host: a.example.com, port: 443, credential_binding: { provider: gh }, allow_uninspected_credentials: true }'));
    assert.equal(hatch.endpoints[0]?.credentialProvider, 'gh');
    const rest = parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: rest, enforcement: enforce, access: full, credential_binding: { provider: gh }, request_body_credential_rewrite: true }'));
    assert.equal(rest.endpoints[0]?.requestBodyCredentialRewrite, true);
  });

  it('keeps IDN and IP literal hosts in canonical form', () => {
    const policy = parsePolicy(
      'version: 1\nnetwork_policies:\n  p:\n    endpoints:\n      - { host: "Bücher.Example", port: 443 }\n      - { host: "[2001:DB8:0::1]", port: 443 }\n',
    );
    assert.deepEqual(policy.endpoints.map((e) => [e.host, e.hostKind]), [
      ['xn--bcher-kva.example', 'exact'],
      ['2001:db8::1', 'ip'],
    ]);
    assert.equal(policy.endpointsForHost('xn--bcher-kva.example').length, 1);
    assert.equal(policy.endpointsForHost('[2001:db8::1]').length, 1);
  });
});

describe('loadPolicyFile', () => {
  it('reads and parses a file, and names the file on every issue', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const good = join(dir, 'good.yaml');
    writeFileSync(good, endpoint('{ host: a.example.com, port: 443 }'));
    assert.equal((await loadPolicyFile(good)).endpoints.length, 1);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, endpoint('{ host: a.example.com, port: 0 }'));
    await assert.rejects(loadPolicyFile(bad), (err: unknown) => {
      assert.ok(isBoundaryError(err));
      assert.equal(err.code, 'POLICY_INVALID');
      assert.equal(err.issues[0]?.source, bad);
      assert.ok(err.message.includes(bad));
      return true;
    });
  });

  it('fails POLICY_UNREADABLE with the cause for a missing file or a directory', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    await assert.rejects(loadPolicyFile(join(dir, 'missing.yaml')), (err: unknown) => {
      assert.ok(isBoundaryError(err));
      assert.equal(err.code, 'POLICY_UNREADABLE');
      assert.ok(err.cause instanceof Error);
      return true;
    });
    await assert.rejects(loadPolicyFile(dir), { code: 'POLICY_UNREADABLE' });
    const binary = join(dir, 'binary.yaml');
    writeFileSync(binary, Buffer.from([0xff, 0xfe, 0x00]));
    await assert.rejects(loadPolicyFile(binary), { code: 'POLICY_UNREADABLE' });
  });
});
