// parsePolicy warnings and ignored sections: audit default, port and ports, GraphQL fields elsewhere, broad allowed_ips,
// rules without protocol (V14), public suffixes, uninspected L7, not-enforced sections, option defaults and
// canonical IDN and IP hosts.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorCode } from '../../src/shared/errors.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { E0, endpoint } from '../harness/policy-parse-fixtures.js';

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

  it('reads tls: "" as automatic, without a warning', () => {
    const policy = parsePolicy(endpoint('{ host: a.example.com, port: 443, tls: "" }'));
    assert.equal(policy.endpoints[0]?.tls, 'auto');
    assert.deepEqual(policy.warnings, []);
  });

  it('warns on GraphQL endpoint fields outside graphql and websocket, and on allow_registered without a registry', () => {
    for (const fields of ['protocol: rest, enforcement: enforce, access: full,', 'protocol: json-rpc, enforcement: enforce, rules: [{ allow: { method: x } }],', '']) {
      warned(endpoint(`{ host: a.example.com, port: 443, ${fields} persisted_queries: deny }`), 'POLICY_WARN_GRAPHQL_FIELD_IGNORED', `${E0}.persisted_queries`);
    }
    const gql = endpoint('{ host: a.example.com, port: 443, protocol: graphql, enforcement: enforce, access: full, persisted_queries: allow_registered }');
    warned(gql, 'POLICY_WARN_PERSISTED_QUERIES_EMPTY', `${E0}.persisted_queries`);
    assert.equal(parsePolicy(gql).endpoints[0]?.options.graphqlPersistedQueries?.size, 0);
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

  it('loads graphql, mcp and json-rpc endpoints (all inspected) without a warning', () => {
    for (const body of [
      'protocol: graphql, enforcement: enforce, rules: [{ allow: { operation_type: query } }]',
      'protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true }',
      'protocol: json-rpc, enforcement: enforce, rules: [{ allow: { method: "*" } }]',
    ]) {
      assert.deepEqual(parsePolicy(endpoint(`{ host: a.example.com, port: 443, ${body} }`)).warnings, []);
    }
  });

  it('lists filesystem_policy, landlock and process as not enforced, in one warning', () => {
    const text = 'version: 1\nfilesystem_policy: { read_only: [/usr] }\nlandlock: { compatibility: best_effort }\nprocess: { run_as_user: sandbox }\n';
    const policy = parsePolicy(text);
    assert.deepEqual(policy.notEnforced, ['filesystem_policy', 'landlock', 'process']);
    const warnings = policy.warnings.filter((w) => w.code === 'POLICY_WARN_NOT_ENFORCED');
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.path, 'filesystem_policy');
  });

  it('applies protocol option defaults and reads explicit ones', () => {
    const policy = parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true, max_body_bytes: 131072 } }'));
    const options = policy.endpoints[0]?.options;
    assert.equal(options?.mcpAllowAllKnownMethods, true);
    assert.equal(options?.jsonRpcMaxBodyBytes, 131072);
    assert.equal(options?.mcpStrictToolNames, true);
    assert.equal(options?.mcpFilterToolsList, false);
    assert.equal(options?.graphqlMaxBodyBytes, 65536);
    // graphql_max_body_bytes: 0 is the default, as in OpenShell.
    const zero = parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: graphql, enforcement: enforce, access: read-only, graphql_max_body_bytes: 0 }'));
    assert.equal(zero.endpoints[0]?.options.graphqlMaxBodyBytes, 65536);
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
