// Every branch of decide() on one policy: no policy, L4 allow and miss, wildcards and IP literals, the smallest
// key, the hostless form, binaries, L7 rules, deny precedence, query matchers, audit, endpoint selection,
// uninspected protocols, websocket presets and the generation stamp.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { emptyPolicy, withGeneration } from '../../src/policy/store.js';
import type { EgressIntent } from '../../src/policy/types.js';
import { exe } from '../harness/decide-table.js';

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
    const node = decide(policy, connect('api.example.com', 443, { identity: exe('/usr/bin/node') }));
    assert.equal(node.verdict, 'allow');
    assert.equal(node.binaryIdentity, 'process');
    const curl = decide(policy, connect('api.example.com', 443, { identity: exe('/usr/bin/curl') }));
    assert.equal(curl.reason, 'binary-not-allowed');
    assert.match(curl.detail, /\/usr\/bin\/curl .*api\.example\.com:443 .*api/);
    assert.equal(decide(policy, connect('closed.example.com', 443, { identity: exe('/usr/bin/x') })).reason, 'binary-not-allowed');
    assert.equal(decide(policy, connect('closed.example.com', 443)).verdict, 'allow');
    const narrowed = decide(policy, connect('x.pkg.example.net', 443, { identity: exe('/usr/bin/wget') }));
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

  it('selects the most specific inspected endpoint and fails closed on json-rpc without its parsed body', () => {
    // docs/policy.md#graphql-inspection: without its parsed request a GraphQL endpoint fails closed.
    const graphql = decide(policy, l7('api.example.com', 'POST', '/graphql'));
    assert.equal(graphql.verdict, 'deny');
    assert.equal(graphql.reason, 'graphql-rejected');
    assert.equal(graphql.endpoint?.id, 'api#1');
    const rpc = decide(policy, l7('rpc.example.com', 'POST', '/rpc'));
    assert.equal(rpc.verdict, 'deny', 'audit never relaxes an unread body');
    assert.equal(rpc.reason, 'jsonrpc-rejected');
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

  it('allows every path of uninspected endpoints, and names the one whose path selector takes the request', () => {
    const paths = parsePolicy(`version: 1
network_policies:
  a:
    endpoints:
      - { host: l4.example.com, port: 443, path: /v1/**, credential_binding: { provider: one }, allow_uninspected_credentials: true }
    binaries: [{ path: "/**" }]
  b:
    endpoints:
      - { host: l4.example.com, port: 443, path: /v2/**, credential_binding: { provider: two }, allow_uninspected_credentials: true }
    binaries: [{ path: "/**" }]
`);
    const at = (path: string) => decide(paths, { adapter: 'forward', host: 'l4.example.com', port: 443, method: 'GET', path });
    assert.equal(at('/v2/x').endpoint?.credentialProvider, 'two');
    assert.equal(at('/v1/x').endpoint?.credentialProvider, 'one');
    assert.equal(at('/v3/x').verdict, 'allow');
    assert.equal(at('/v3/x').endpoint?.selectsPath('/v3/x'), false);
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
