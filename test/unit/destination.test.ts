// checkDestination: IP literals are never resolved (peer-tests IP-02..IP-12), local and metadata names are
// refused without a query (NM-01..NM-03), other names are resolved once, A only. Fake resolver only.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkDestination, isLookupRefused, isResolveFailure } from '../../src/net/destination.js';
import { normaliseHost } from '../../src/net/host.js';
import type { DestinationCheck } from '../../src/net/ssrf.js';
import type { Endpoint } from '../../src/policy/types.js';
import { makeEndpoint } from '../harness/endpoint.js';
import { type FakeResolver, fakeResolver } from '../harness/fake-resolver.js';
import { testLookupGate } from '../harness/lookup-gate.js';

const WILDCARD = makeEndpoint({ host: '*.example.test' });
const EXACT = makeEndpoint({ host: 'api.example.test' });

async function destination(
  raw: string,
  options: { endpoint?: Endpoint | undefined; port?: number; resolver?: FakeResolver; allowLoopback?: boolean } = {},
): Promise<{ result: Awaited<ReturnType<typeof checkDestination>>; resolver: FakeResolver }> {
  const normal = normaliseHost(raw);
  assert.ok(normal.ok, `${raw} should normalise`);
  const resolver = options.resolver ?? fakeResolver();
  const endpoint = 'endpoint' in options ? options.endpoint : EXACT;
  const result = await checkDestination({
    host: normal.host,
    kind: normal.kind,
    port: options.port ?? 443,
    endpoint,
    endpoints: endpoint === undefined ? [] : [endpoint],
    lookups: testLookupGate(resolver),
    ...(options.allowLoopback === undefined ? {} : { allowLoopback: options.allowLoopback }),
  });
  return { result, resolver };
}

function checked(result: Awaited<ReturnType<typeof checkDestination>>): DestinationCheck {
  assert.ok(!isResolveFailure(result) && !isLookupRefused(result), 'expected a validation result, not a resolver failure or a gate refusal');
  return result;
}

function refusedWith(result: Awaited<ReturnType<typeof checkDestination>>, check: string): void {
  const value = checked(result);
  assert.equal(value.ok, false, `expected refusal with ${check}`);
  if (!value.ok) assert.equal(value.check, check);
}

describe('IP literals never reach the resolver (IP-02..IP-12)', () => {
  const rows: readonly [string, string][] = [
    ['IP-02', '2852039166'],
    ['IP-03', '0251.0376.0251.0376'],
    ['IP-04', '0xa9.0xfe.0xa9.0xfe'],
    ['IP-05', '0xA9FEA9FE'],
    ['IP-06', '169.254.43518'],
    ['IP-07', '127.1'],
    ['IP-08', '0177.0.0.1'],
    ['IP-09', '017700000001'],
    ['IP-10', '0x7f.1'],
    ['IP-11', '127.0.0.1.'],
    ['IP-12', '0'],
  ];
  for (const [id, raw] of rows) {
    it(`${id}: ${raw} is refused as always-blocked on every plan with 0 resolver calls`, async () => {
      // The resolver would happily answer with a public address for the raw spelling: it must not be asked.
      const resolver = fakeResolver({ [raw]: ['8.8.8.8'], [raw.toLowerCase()]: ['8.8.8.8'] });
      const covering = makeEndpoint({ host: 'api.example.test', allowedIps: ['0.0.0.0/0'] });
      for (const endpoint of [EXACT, WILDCARD, covering, undefined]) {
        const { result } = await destination(raw, { endpoint, resolver });
        refusedWith(result, 'always-blocked');
      }
      assert.equal(resolver.calls.length, 0);
    });

    it(`${id}: ${raw} passed mislabelled as a name is still treated as an IP literal`, async () => {
      const resolver = fakeResolver({ [raw]: ['8.8.8.8'] });
      const result = await checkDestination({ host: raw, kind: 'name', port: 443, endpoint: EXACT, endpoints: [EXACT], lookups: testLookupGate(resolver) });
      refusedWith(result, 'always-blocked');
      assert.deepEqual(resolver.calls, []);
    });
  }

  it('validates IPv6 literals without resolving (HA-03, IP-15)', async () => {
    const { result, resolver } = await destination('[2606:4700::1111]', { endpoint: WILDCARD });
    const value = checked(result);
    assert.ok(value.ok);
    assert.deepEqual(value.addresses, ['2606:4700::1111']);
    refusedWith((await destination('[::1]', { resolver })).result, 'always-blocked');
    assert.equal(resolver.calls.length, 0);
  });

  it('NM-16 allows an IP-literal endpoint for a non-canonical spelling of its IP (pin)', async () => {
    const endpoint = makeEndpoint({ host: '10.0.0.7' });
    for (const raw of ['10.0.0.7', '0x0a.0.0.7', '012.0.0.7', '167772167']) {
      const { result, resolver } = await destination(raw, { endpoint });
      const value = checked(result);
      assert.ok(value.ok, raw);
      assert.deepEqual(value.addresses, ['10.0.0.7']);
      assert.equal(resolver.calls.length, 0);
    }
  });
});

describe('names refused without resolving', () => {
  it('NM-01 refuses localhost and *.localhost as local names', async () => {
    for (const raw of ['localhost', 'LOCALHOST.', 'foo.localhost', 'a.b.localhost']) {
      const resolver = fakeResolver({ localhost: ['8.8.8.8'], 'foo.localhost': ['8.8.8.8'] });
      const { result } = await destination(raw, { resolver });
      refusedWith(result, 'local-name');
      assert.equal(resolver.calls.length, 0, raw);
    }
  });

  it('does not treat names that merely contain localhost as local', async () => {
    const resolver = fakeResolver({ 'localhost.example.test': ['8.8.8.8'], 'notlocalhost': ['8.8.8.8'] });
    for (const raw of ['localhost.example.test', 'notlocalhost']) {
      assert.ok(checked((await destination(raw, { resolver })).result).ok, raw);
    }
  });

  it('NM-02 refuses metadata.google.internal as a known metadata name', async () => {
    const resolver = fakeResolver({ 'metadata.google.internal': ['8.8.8.8'] });
    refusedWith((await destination('Metadata.Google.Internal.', { resolver })).result, 'metadata-name');
    assert.equal(resolver.calls.length, 0);
  });

  it('NM-03 refuses instance-data by name, and any name that resolves to 169.254.169.254 by address', async () => {
    const resolver = fakeResolver({ 'instance-data': ['169.254.169.254'], 'metadata.example.test': ['169.254.169.254'] });
    refusedWith((await destination('instance-data', { resolver })).result, 'metadata-name');
    assert.equal(resolver.calls.length, 0);
    refusedWith((await destination('metadata.example.test', { resolver })).result, 'always-blocked');
    assert.equal(resolver.calls.length, 1);
  });

  it('refuses a control-plane port before any DNS query (NM-06, NM-12)', async () => {
    const resolver = fakeResolver({ 'api.example.test': ['10.96.0.1'] });
    for (const port of [2379, 2380, 6443, 10250, 10255]) refusedWith((await destination('api.example.test', { port, resolver })).result, 'control-plane-port');
    assert.equal(resolver.calls.length, 0);
    assert.ok(checked((await destination('api.example.test', { resolver })).result).ok);
  });

  it('refuses a host that does not normalise, without resolving', async () => {
    const resolver = fakeResolver();
    const result = await checkDestination({ host: 'a..example.test', kind: 'name', port: 443, endpoint: EXACT, endpoints: [EXACT], lookups: testLookupGate(resolver) });
    refusedWith(result, 'invalid-host');
    assert.equal(resolver.calls.length, 0);
  });
});

describe('resolution', () => {
  it('resolves a name exactly once, for A records only', async () => {
    const resolver = fakeResolver({ 'api.example.test': ['93.184.216.34', '2606:2800::1'] });
    const value = checked((await destination('API.example.test.', { endpoint: WILDCARD, resolver })).result);
    assert.ok(value.ok);
    assert.deepEqual(value.addresses, ['93.184.216.34']);
    assert.deepEqual(resolver.calls, [{ name: 'api.example.test', family: 4 }]);
  });

  it('NM-05 refuses kubernetes.default.svc on the public-only plan', async () => {
    const resolver = fakeResolver({ 'kubernetes.default.svc': ['10.96.0.1'] });
    refusedWith((await destination('kubernetes.default.svc', { endpoint: WILDCARD, resolver })).result, 'internal-address');
    assert.equal(resolver.calls.length, 1);
  });

  it('NM-07 keeps only the surviving answers of a resolved name', async () => {
    const resolver = fakeResolver({ 'cdn.example.test': ['10.0.0.5', '93.184.216.34'] });
    const value = checked((await destination('cdn.example.test', { endpoint: WILDCARD, resolver })).result);
    assert.ok(value.ok);
    assert.deepEqual(value.addresses, ['93.184.216.34']);
    assert.deepEqual(value.dropped, [{ ip: '10.0.0.5', class: 'private', why: 'internal-address' }]);
  });

  it('returns a resolver failure as a value with its failure kind', async () => {
    const resolver = fakeResolver({ 'slow.example.test': 'timeout' });
    for (const [raw, failure] of [['missing.example.test', 'nxdomain'], ['slow.example.test', 'timeout']] as const) {
      const { result } = await destination(raw, { resolver });
      assert.ok(isResolveFailure(result));
      assert.equal(result.kind, 'resolve-failed');
      assert.equal(result.failure, failure);
      assert.equal(result.ok, false);
    }
  });

  it('lets a name resolving to loopback through only with allowLoopback', async () => {
    const resolver = fakeResolver({ 'api.example.test': ['127.0.0.1'] });
    refusedWith((await destination('api.example.test', { resolver })).result, 'always-blocked');
    const value = checked((await destination('api.example.test', { resolver, allowLoopback: true })).result);
    assert.ok(value.ok);
    assert.deepEqual(value.addresses, ['127.0.0.1']);
    // localhost stays a local name even in local development: allowLoopback relaxes addresses, not names.
    refusedWith((await destination('localhost', { resolver, allowLoopback: true })).result, 'local-name');
  });
});
