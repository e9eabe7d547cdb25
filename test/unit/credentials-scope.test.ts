import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileHostPattern, compilePathGlob } from '../../src/credentials/endpoint-match.js';
import type { PlaceholderRef } from '../../src/credentials/placeholder.js';
import { type Resolution, routeCarriesCredentials, scopeFor } from '../../src/credentials/scope.js';
import { type ProviderInput, REVISIONS_KEPT, stableHandle } from '../../src/credentials/set.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';
import type { Endpoint } from '../../src/policy/types.js';
import { makeEndpoint } from '../harness/endpoint.js';

// scopeFor reads credentialProvider and selectsPath from the policy endpoint.
function policyEndpoint(credentialProvider: string | undefined, selectsPath: (path: string) => boolean = () => true): Endpoint {
  return makeEndpoint({ host: 'tracker.test', credentialProvider, selectsPath });
}

const PROVIDERS: ProviderInput[] = [
  {
    name: 'acme',
    env: { ACME_TOKEN: 'acme-secret', SHARED: 'same-value' },
    endpoints: [
      { host: 'api.acme.test', port: 443, path: '/v1/**' },
      { host: '*.acme.test', port: 8443 },
    ],
  },
  { name: 'beta', env: { BETA_TOKEN: 'beta-secret', SHARED: 'same-value' }, endpoints: [{ host: 'api.acme.test', port: 443 }] },
  { name: 'tracker', env: { TRACKER_TOKEN: 'tracker-secret' } },
];

function value(resolution: Resolution): string {
  return resolution.kind === 'value' ? resolution.secret.reveal() : resolution.kind === 'mismatch' ? 'mismatch' : resolution.reason;
}

const canonical = (key: string): PlaceholderRef => ({ form: 'canonical', key });

describe('host patterns (docs/policy.md#host-matching)', () => {
  const table: [string, string, boolean][] = [
    ['*.example.com', 'a.example.com', true],
    ['*.example.com', 'a.b.example.com', false],
    ['*.example.com', 'example.com', false],
    ['**.example.com', 'a.b.c.example.com', true],
    ['**.example.com', 'example.com', false],
    ['*.example.com', 'evilexample.com', false],
    ['*.example.com', 'a.example.com.evil.net', false],
    ['*-ai.example.com', 'us-ai.example.com', true],
    ['*-ai.example.com', 'x.us-ai.example.com', false],
    ['*.s3.*.amazonaws.com', 'b.s3.us-east-1.amazonaws.com', true],
    ['*.s3.*.amazonaws.com', 'b.s3.a.b.amazonaws.com', false],
    ['API.Example.COM.', 'api.example.com', true],
    ['10.1.2.3', '10.1.2.3', true],
  ];
  for (const [pattern, host, expected] of table) {
    it(`${expected ? 'matches' : 'does not match'} ${host} with ${pattern}`, () => {
      const compiled = compileHostPattern(pattern);
      assert.ok(compiled.ok);
      assert.equal(compiled.value(host), expected);
    });
  }
  for (const bad of ['*', '**', '*.com', '**.com', '*example.com', 'api.ex*.com', 'a.**.example.com', 'example.*', '{a,b}.example.com', 'a?.example.com']) {
    it(`refuses the host pattern ${bad}`, () => {
      assert.equal(compileHostPattern(bad).ok, false);
    });
  }
});

describe('path globs (docs/policy.md#path-globs)', () => {
  const table: [string, string, boolean][] = [
    ['/repos/*', '/repos/a', true],
    ['/repos/*', '/repos/a/b', false],
    ['/repos/**', '/repos/a/b/c', true],
    ['/repos/**', '/repos', false],
    ['/repos/**', '/repos/', true],
    ['**', '/', true],
    ['/**', '/anything/at/all', true],
    ['/v1/*.json', '/v1/x.json', true],
    ['/v1/*.json', '/v1/a/x.json', false],
    ['/file?.txt', '/file1.txt', true],
    ['/file?.txt', '/file/.txt', false],
    ['/**/info/refs*', '/org/app.git/info/refs', true],
    ['/a/**secret**', '/a/x/secret', false],
    ['/v[0-9]/x', '/v2/x', true],
    ['/v[!0]/x', '/v0/x', false],
    ['/Repos/*', '/repos/a', false],
    ['/bot*/send', '/bot[CREDENTIAL]/send', true],
  ];
  for (const [glob, path, expected] of table) {
    it(`${expected ? 'matches' : 'does not match'} ${path} with ${glob}`, () => {
      const compiled = compilePathGlob(glob);
      assert.ok(compiled.ok);
      assert.equal(compiled.value(path), expected);
    });
  }
  for (const bad of ['', 'v1/**', '/a b', '/a#b', '/v[0-9/x']) {
    it(`refuses the path glob ${JSON.stringify(bad)}`, () => {
      assert.equal(compilePathGlob(bad).ok, false);
    });
  }
});

describe('scopeFor', () => {
  const source = createStaticCredentialSource({ providers: PROVIDERS });

  it('binds exactly the keys of providers whose endpoints match host, port and path', () => {
    assert.deepEqual(scopeFor({ source, host: 'api.acme.test', port: 443, path: '/v1/users' }).boundKeys, [
      'ACME_TOKEN',
      'BETA_TOKEN',
      'SHARED',
    ]);
    assert.deepEqual(scopeFor({ source, host: 'api.acme.test', port: 443, path: '/v2/users' }).boundKeys, [
      'BETA_TOKEN',
      'SHARED',
    ]);
    assert.deepEqual(scopeFor({ source, host: 'eu.acme.test', port: 8443, path: '/' }).boundKeys, ['ACME_TOKEN', 'SHARED']);
    assert.deepEqual(scopeFor({ source, host: 'eu.acme.test', port: 443, path: '/' }).boundKeys, []);
  });

  it('matches the host case-insensitively and without its trailing dot', () => {
    assert.deepEqual(scopeFor({ source, host: 'EU.Acme.Test.', port: 8443, path: '/' }).boundKeys, ['ACME_TOKEN', 'SHARED']);
  });

  it('matches the path with placeholders redacted, without the query', () => {
    const scope = scopeFor({ source, host: 'api.acme.test', port: 443, path: '/v1/openshell:resolve:env:ACME_TOKEN' });
    assert.ok(scope.boundKeys.includes('ACME_TOKEN'));
  });

  it('resolves a bound key, reports a key bound elsewhere as a mismatch and an unknown key as unavailable', () => {
    const scope = scopeFor({ source, host: 'api.acme.test', port: 443, path: '/v2/x' });
    assert.equal(value(scope.resolve(canonical('BETA_TOKEN'))), 'beta-secret');
    assert.equal(value(scope.resolve(canonical('ACME_TOKEN'))), 'mismatch');
    assert.equal(value(scope.resolve(canonical('TRACKER_TOKEN'))), 'mismatch');
    assert.equal(value(scope.resolve(canonical('NOPE'))), 'unknown-key');
  });

  it('binds a provider through the policy endpoint credential_binding, and only that provider', () => {
    const scope = scopeFor({ source, host: 'tracker.test', port: 443, path: '/', endpoint: policyEndpoint('tracker') });
    assert.deepEqual(scope.boundKeys, ['TRACKER_TOKEN']);
    assert.equal(value(scope.resolve(canonical('TRACKER_TOKEN'))), 'tracker-secret');
    assert.equal(value(scope.resolve(canonical('ACME_TOKEN'))), 'mismatch');
    const unbound = scopeFor({ source, host: 'tracker.test', port: 443, path: '/', endpoint: policyEndpoint(undefined) });
    assert.deepEqual(unbound.boundKeys, []);
    const missing = scopeFor({ source, host: 'tracker.test', port: 443, path: '/', endpoint: policyEndpoint('ghost') });
    assert.deepEqual(missing.boundKeys, []);
  });

  it("binds the policy endpoint's provider only on paths its selector takes", () => {
    const v1 = policyEndpoint('tracker', (path) => path.startsWith('/v1/'));
    assert.deepEqual(scopeFor({ source, host: 'tracker.test', port: 443, path: '/v1/x', endpoint: v1 }).boundKeys, ['TRACKER_TOKEN']);
    const outside = scopeFor({ source, host: 'tracker.test', port: 443, path: '/v2/x', endpoint: v1 });
    assert.deepEqual(outside.boundKeys, []);
    assert.equal(value(outside.resolve(canonical('TRACKER_TOKEN'))), 'mismatch');
  });

  it('resolves the family it is given and refuses the other, whatever the key', () => {
    const ryno = (key: string): PlaceholderRef => ({ form: 'canonical', key, family: 'ryno' });
    const openshell = (key: string): PlaceholderRef => ({ form: 'canonical', key, family: 'openshell' });
    const byDefault = scopeFor({ source, host: 'tracker.test', port: 443, path: '/', endpoint: policyEndpoint('tracker') });
    assert.equal(value(byDefault.resolve(openshell('TRACKER_TOKEN'))), 'tracker-secret');
    assert.equal(value(byDefault.resolve(ryno('TRACKER_TOKEN'))), 'other-family');
    const rynoScope = scopeFor({ source, host: 'tracker.test', port: 443, path: '/', endpoint: policyEndpoint('tracker'), family: 'ryno' });
    assert.equal(value(rynoScope.resolve(ryno('TRACKER_TOKEN'))), 'tracker-secret');
    assert.equal(value(rynoScope.resolve(openshell('TRACKER_TOKEN'))), 'other-family');
    // boundary's own lookups by key name (SigV4 keys) carry no family and use the scope's.
    assert.equal(value(rynoScope.resolve(canonical('TRACKER_TOKEN'))), 'tracker-secret');
  });

  it('gives a request without an authority no resolver at all', () => {
    const scope = scopeFor({ source, host: undefined, port: 80, path: '/', endpoint: policyEndpoint('tracker') });
    assert.equal(scope.hasResolver, false);
    assert.deepEqual(scope.boundKeys, []);
    assert.equal(value(scope.resolve(canonical('TRACKER_TOKEN'))), 'no-authority');
  });

  it('resolves a key two bound providers share only when their values agree', () => {
    const scope = scopeFor({ source, host: 'api.acme.test', port: 443, path: '/v1/x' });
    assert.equal(value(scope.resolve(canonical('SHARED'))), 'same-value');
    const split = createStaticCredentialSource({
      providers: [
        { name: 'a', env: { K: 'one' }, endpoints: [{ host: 'h.test', port: 1 }] },
        { name: 'b', env: { K: 'two' }, endpoints: [{ host: 'h.test', port: 1 }] },
      ],
    });
    const ambiguous = scopeFor({ source: split, host: 'h.test', port: 1, path: '/' });
    assert.equal(value(ambiguous.resolve(canonical('K'))), 'ambiguous-key');
    const handle = stableHandle('b', 'K');
    assert.equal(value(ambiguous.resolve({ form: 'stable', key: 'K', handle })), 'two');
  });

  it('resolves the stable form by provider handle and refuses foreign or unknown handles', () => {
    const scope = scopeFor({ source, host: 'api.acme.test', port: 443, path: '/v2/x' });
    assert.equal(value(scope.resolve({ form: 'stable', key: 'BETA_TOKEN', handle: stableHandle('beta', 'BETA_TOKEN') })), 'beta-secret');
    assert.equal(value(scope.resolve({ form: 'stable', key: 'ACME_TOKEN', handle: stableHandle('acme', 'ACME_TOKEN') })), 'mismatch');
    assert.equal(value(scope.resolve({ form: 'stable', key: 'BETA_TOKEN', handle: 'f'.repeat(64) })), 'unknown-handle');
  });

  it('resolves revision-pinned placeholders of the last revisions to the current value', () => {
    const rotating = createStaticCredentialSource({ providers: [{ name: 'p', env: { K: 'v1' }, endpoints: [{ host: 'h.test', port: 1 }] }] });
    for (let i = 2; i <= REVISIONS_KEPT + 2; i += 1) {
      rotating.replace([{ name: 'p', env: { K: `v${i}` }, endpoints: [{ host: 'h.test', port: 1 }] }]);
    }
    const current = rotating.current().revision;
    assert.equal(current, REVISIONS_KEPT + 2);
    const scope = scopeFor({ source: rotating, host: 'h.test', port: 1, path: '/' });
    const pinned = (revision: number) => value(scope.resolve({ form: 'revision', key: 'K', revision }));
    assert.equal(pinned(current), `v${current}`);
    assert.equal(pinned(current - REVISIONS_KEPT + 1), `v${current}`);
    assert.equal(pinned(current - REVISIONS_KEPT), 'revision-not-retained');
    assert.equal(pinned(current + 1), 'revision-not-retained');
  });

  it('refuses a revision-pinned placeholder whose key moved to another provider', () => {
    const moving = createStaticCredentialSource({ providers: [{ name: 'p', env: { K: 'v1' }, endpoints: [{ host: 'h.test', port: 1 }] }] });
    moving.replace([{ name: 'q', env: { K: 'v2' }, endpoints: [{ host: 'h.test', port: 1 }] }]);
    const scope = scopeFor({ source: moving, host: 'h.test', port: 1, path: '/' });
    assert.equal(value(scope.resolve({ form: 'revision', key: 'K', revision: 1 })), 'identity-changed');
    assert.equal(value(scope.resolve({ form: 'revision', key: 'K', revision: 2 })), 'v2');
  });

  it('captures the revision: stillCurrent() turns false once the source rotates (revision guard)', () => {
    const rotating = createStaticCredentialSource({ providers: [{ name: 'p', env: { K: 'v1' } }] });
    const scope = scopeFor({ source: rotating, host: 'h.test', port: 1, path: '/' });
    rotating.replace([{ name: 'p', env: { K: 'v1' } }]);
    assert.equal(scope.stillCurrent(), true, 'an unchanged push keeps the revision');
    rotating.replace([{ name: 'p', env: { K: 'v2' } }]);
    assert.equal(scope.stillCurrent(), false);
  });

  it('shares one scope among requests that bind nothing, per set, source, family and authority, answering as before', () => {
    const rotating = createStaticCredentialSource({ providers: PROVIDERS });
    const a = scopeFor({ source: rotating, host: 'other.test', port: 443, path: '/a' });
    const b = scopeFor({ source: rotating, host: 'else.test', port: 80, path: '/b' });
    assert.equal(a, b);
    assert.ok(Object.isFrozen(a));
    assert.notEqual(scopeFor({ source, host: 'other.test', port: 443, path: '/a' }), a, 'another source');
    const ryno = scopeFor({ source: rotating, host: 'other.test', port: 443, path: '/a', family: 'ryno' });
    assert.notEqual(ryno, a);
    assert.equal(value(ryno.resolve({ form: 'canonical', key: 'TRACKER_TOKEN', family: 'openshell' })), 'other-family');
    const noAuthority = scopeFor({ source: rotating, host: undefined, port: 80, path: '/' });
    assert.notEqual(noAuthority, a);
    assert.equal(value(noAuthority.resolve(canonical('TRACKER_TOKEN'))), 'no-authority');
    assert.deepEqual(a.boundKeys, []);
    assert.deepEqual(a.secrets(), []);
    assert.deepEqual(a.placements(), []);
    assert.equal(a.keyExists('ACME_TOKEN'), true);
    assert.equal(a.keyExists('NOPE'), false);
    assert.equal(value(a.resolve(canonical('ACME_TOKEN'))), 'mismatch');
    assert.equal(value(a.resolve(canonical('NOPE'))), 'unknown-key');
    // A bound request still gets its own scope.
    const bound = scopeFor({ source: rotating, host: 'api.acme.test', port: 443, path: '/v1/x' });
    assert.notEqual(bound, scopeFor({ source: rotating, host: 'api.acme.test', port: 443, path: '/v1/x' }));
    rotating.replace([{ name: 'p', env: { K: 'v2' } }]);
    const after = scopeFor({ source: rotating, host: 'other.test', port: 443, path: '/a' });
    assert.notEqual(after, a, 'a new set, a new scope');
    assert.equal(a.stillCurrent(), false);
    assert.equal(after.stillCurrent(), true);
    assert.equal(after.keyExists('ACME_TOKEN'), false);
  });
});

describe('routeCarriesCredentials', () => {
  const source = createStaticCredentialSource({ providers: PROVIDERS });

  it('is true for any path of a provider endpoint host and port, and for a credential_binding endpoint', () => {
    assert.equal(routeCarriesCredentials({ source, host: 'api.acme.test', port: 443 }), true);
    assert.equal(routeCarriesCredentials({ source, host: 'x.acme.test', port: 8443 }), true);
    assert.equal(routeCarriesCredentials({ source, host: 'other.test', port: 443, endpoint: policyEndpoint('tracker') }), true);
    assert.equal(routeCarriesCredentials({ source, host: 'other.test', port: 443 }), false);
    assert.equal(routeCarriesCredentials({ source, host: 'x.acme.test', port: 443 }), false);
  });
});
