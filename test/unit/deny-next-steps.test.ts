// Denial bodies and reason phrases that a client and an agent can act on (docs/destinations.md#denial-responses): a
// table of denials, each with the `next_steps` kinds, the `rule` / `rule_missing` fields and the status line's reason.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { NEXT_STEP_KINDS } from '../../src/policy/suggest.js';
import type { EgressIntent } from '../../src/policy/types.js';
import { connectPolicyDenial, credentialDenial, type Denial, forwardPolicyDenial, l7PolicyDenial, policyChangedDenial, ssrfDenial } from '../../src/chain/denials.js';
import { renderDenial } from '../../src/proxy/answer.js';

const POLICY = parsePolicy(`version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/v1/**" }
        deny_rules:
          - { method: GET, path: "/v1/admin/**" }
      - host: raw.example.test
        port: 443
    binaries: [{ path: "/**" }]
`);

function connect(host: string, port = 443): Denial {
  const decision = decide(POLICY, { adapter: 'connect', host, port });
  assert.equal(decision.verdict, 'deny');
  return connectPolicyDenial(host, port, `${host}:${port}`, decision, { policy: POLICY, adapter: 'connect' });
}

function l7(host: string, method: string, path: string, query = ''): Denial {
  const intent: EgressIntent = { adapter: 'connect', host, port: 443, method, path, query };
  const decision = decide(POLICY, intent);
  assert.equal(decision.verdict, 'deny', `${method} ${path}`);
  const denied = { policy: POLICY, adapter: 'connect' as const };
  return decision.layer === 'l7'
    ? l7PolicyDenial({ method, path, host, port: 443 }, decision, denied)
    : forwardPolicyDenial(method, `${host}:443`, path, decision, { ...denied, host, port: 443 });
}

/** An L7 or forward denial's body: always an object (only a JSON-RPC batch answer is an array). */
const bodyOf = (d: Denial): Readonly<Record<string, unknown>> => d.body as Readonly<Record<string, unknown>>;
const steps = (d: Denial): { kind: string; message: string; yaml?: string }[] => bodyOf(d).next_steps as { kind: string; message: string; yaml?: string }[];

describe('denial next steps and reason phrases', () => {
  const cases: { name: string; denial: () => Denial; kinds: string[]; phrase: string; rule?: string | null; missing?: boolean }[] = [
    { name: 'CONNECT to an uncovered host', denial: () => connect('other.test'), kinds: ['add_policy_entry'], phrase: 'Forbidden by policy: no endpoint for other.test:443' },
    { name: 'CONNECT on an unlisted port', denial: () => connect('raw.example.test', 8443), kinds: ['add_policy_entry'], phrase: 'Forbidden by policy: no endpoint for raw.example.test:8443' },
    {
      name: 'L7: no rule matched',
      denial: () => l7('api.example.test', 'POST', '/v1/items', 'token=s3cret'),
      kinds: ['add_policy_entry'],
      phrase: 'Forbidden by policy: no rule allows POST on api.example.test:443',
      rule: 'POST /v1/items',
      missing: true,
    },
    {
      name: 'L7: a deny rule matched',
      denial: () => l7('api.example.test', 'GET', '/v1/admin/users'),
      kinds: ['narrow_deny_rule'],
      phrase: 'Forbidden by policy: a deny rule matches GET on api.example.test:443',
      rule: 'GET /v1/admin/**',
      missing: false,
    },
    { name: 'policy changed while connecting', denial: () => policyChangedDenial('api.example.test:443'), kinds: ['retry_after_reload'], phrase: 'Forbidden by policy: policy changed while connecting to api.example.test:443' },
    { name: 'SSRF: metadata address', denial: () => ssrfDenial('169.254.169.254:80', 'always-blocked', 'no'), kinds: ['not_allowable'], phrase: 'Forbidden by SSRF rules: always-blocked for 169.254.169.254:80' },
    { name: 'SSRF: internal answer', denial: () => ssrfDenial('db.example.test:5432', 'internal-address', 'no'), kinds: ['set_allowed_ips'], phrase: 'Forbidden by SSRF rules: internal-address for db.example.test:5432' },
    {
      name: 'credential bound elsewhere',
      denial: () => credentialDenial({ status: 403, error: 'credential_endpoint_mismatch', message: 'placeholder for GITHUB_TOKEN is bound elsewhere' }),
      kinds: ['use_bound_endpoint'],
      phrase: 'Forbidden: credential is bound to another endpoint',
    },
    { name: 'credential unavailable', denial: () => credentialDenial({ status: 500, error: 'credential_unavailable', message: 'unknown key SECRET' }), kinds: [], phrase: 'Internal Server Error: credential unavailable' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = c.denial();
      assert.deepEqual(steps(d).map((s) => s.kind), c.kinds);
      assert.ok(steps(d).every((s) => (NEXT_STEP_KINDS as readonly string[]).includes(s.kind) && s.message.length > 0));
      assert.equal(d.reasonPhrase, c.phrase);
      assert.ok(renderDenial(d).startsWith(`HTTP/1.1 ${d.status} ${c.phrase}\r\n`));
      if (c.rule !== undefined) assert.equal(bodyOf(d).rule, c.rule);
      if (c.missing !== undefined) assert.equal(bodyOf(d).rule_missing === null, !c.missing);
      // Never a query value, key name or secret in the phrase or the steps.
      assert.doesNotMatch(`${d.reasonPhrase} ${JSON.stringify(steps(d))}`, /s3cret|token=|GITHUB_TOKEN|SECRET/);
    });
  }

  it('suggests an entry that names the exact host, port and rule', () => {
    const [step] = steps(l7('api.example.test', 'POST', '/v1/items'));
    assert.match(step?.yaml ?? '', /network_policies:\n {2}allow_api_example_test_443:/);
    assert.match(step?.yaml ?? '', /method: POST\n\s+path: \/v1\/items/);
    const [open] = steps(connect('other.test'));
    assert.match(open?.yaml ?? '', /host: other\.test\n\s+port: 443/);
  });
});
