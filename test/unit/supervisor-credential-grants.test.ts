// Which providers a policy binds (src/supervisor/credential-grants.ts): credential_binding names, and provider
// endpoints a policy endpoint reaches (a name both host patterns match, on a shared port), per host form.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCredentialSet, type CredentialEndpointInput } from '../../src/credentials/set.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { policyReach, providersBoundBy } from '../../src/supervisor/credential-grants.js';

function policy(endpoints: string): string {
  return `version: 1\nnetwork_policies:\n  p:\n    endpoints:\n${endpoints}    binaries: [{ path: "/**" }]\n`;
}

/** The names of the providers (one each, with the given endpoints) that `policyText` binds. */
function bound(policyText: string, providers: Record<string, readonly CredentialEndpointInput[]>): string[] {
  const set = createCredentialSet({
    revision: 1,
    providers: Object.entries(providers).map(([name, endpoints]) => ({ name, env: { [`${name.toUpperCase()}_KEY`]: 'v' }, endpoints })),
  });
  return providersBoundBy(policyReach(parsePolicy(policyText)), set.providers.values()).map((p) => p.name);
}

describe('credential grants: the providers a policy binds', () => {
  it('binds a provider named by credential_binding, whatever its own endpoints', () => {
    const text = policy('      - host: api.example.test\n        port: 443\n        protocol: rest\n        access: full\n        credential_binding: { provider: named }\n');
    assert.deepEqual(bound(text, { named: [], other: [] }), ['named']);
  });

  it('binds a provider whose endpoint the policy reaches on a shared port, and not on another port', () => {
    const text = policy('      - host: api.example.test\n        ports: [443, 8443]\n');
    assert.deepEqual(
      bound(text, {
        same: [{ host: 'API.example.test.', port: 8443 }],
        port: [{ host: 'api.example.test', port: 80 }],
        host: [{ host: 'other.example.test', port: 443 }],
        pathed: [{ host: 'api.example.test', port: 443, path: '/v1/**' }],
      }),
      ['same', 'pathed'],
    );
  });

  it('follows wildcards on either side: one label, ** for several, partial first labels', () => {
    const wild = policy('      - host: "*.example.test"\n        port: 443\n');
    assert.deepEqual(
      bound(wild, {
        one: [{ host: 'api.example.test', port: 443 }],
        apex: [{ host: 'example.test', port: 443 }],
        deep: [{ host: 'a.b.example.test', port: 443 }],
        theirs: [{ host: '**.example.test', port: 443 }],
        partial: [{ host: 'api-*.example.test', port: 443 }],
      }),
      ['one', 'theirs', 'partial'],
    );
    const exact = policy('      - host: a.b.example.test\n        port: 443\n');
    assert.deepEqual(bound(exact, { globstar: [{ host: '**.example.test', port: 443 }], star: [{ host: '*.example.test', port: 443 }] }), ['globstar']);
  });

  it('matches IP literals only to the same literal, and a hostless allowed_ips endpoint reaches every name on its port', () => {
    const ip = policy('      - host: 10.0.0.5\n        port: 443\n');
    assert.deepEqual(bound(ip, { same: [{ host: '10.0.0.5', port: 443 }], other: [{ host: '10.0.0.6', port: 443 }], name: [{ host: 'api.example.test', port: 443 }] }), ['same']);
    const hostless = policy('      - port: 443\n        allowed_ips: ["10.0.0.0/8"]\n');
    assert.deepEqual(bound(hostless, { any: [{ host: 'api.example.test', port: 443 }], port: [{ host: 'api.example.test', port: 80 }] }), ['any']);
  });

  it('binds nothing for a policy that reaches no provider endpoint', () => {
    const text = policy('      - host: api.example.test\n        port: 443\n');
    assert.deepEqual(bound(text, { none: [] }), []);
  });
});
