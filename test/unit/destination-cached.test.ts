// context.ts's two destination paths (issue 13): destinationCached answers in this turn or says undefined and
// starts no query; destination always resolves when it must; on a hit both give the same verdict.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCachingResolver } from '../../src/net/resolver-cache.js';
import type { Resolver } from '../../src/net/resolver.js';
import { NO_SELF_ADDRESSES } from '../../src/net/ssrf.js';
import { type DestinationTarget, destination, destinationCached, type ProxyContext } from '../../src/proxy/context.js';
import { testClock } from '../harness/clock.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { testLookupGate } from '../harness/lookup-gate.js';

function contextWith(resolver: Resolver): ProxyContext {
  return { lookups: testLookupGate(resolver), hosts: undefined, allowLoopback: false, selfAddresses: () => NO_SELF_ADDRESSES } as unknown as ProxyContext;
}

const NAMED: DestinationTarget = { host: 'api.example.test', kind: 'name', port: 443, endpoint: undefined, endpoints: [] };

describe('destinationCached and destination', () => {
  it('answers an IP literal in this turn without asking the resolver', async () => {
    const upstream = fakeResolver({});
    const ctx = contextWith(upstream);
    const target: DestinationTarget = { host: '10.0.0.5', kind: 'ipv4', port: 443, endpoint: undefined, endpoints: [] };
    const held = destinationCached(ctx, target);
    assert.ok(held !== undefined);
    assert.deepEqual(held, await destination(ctx, target));
    assert.equal(upstream.calls.length, 0);
  });

  it('says undefined for a name it does not hold and starts no query', () => {
    const upstream = fakeResolver({ 'api.example.test': ['93.184.216.34'] });
    assert.equal(destinationCached(contextWith(upstream), NAMED), undefined);
    assert.equal(destinationCached(contextWith(createCachingResolver(upstream, { now: testClock().now })), NAMED), undefined);
    assert.equal(upstream.calls.length, 0);
  });

  it('serves a cached answer in this turn, the same verdict destination gave', async () => {
    const upstream = fakeResolver({ 'api.example.test': ['93.184.216.34'] });
    const ctx = contextWith(createCachingResolver(upstream, { now: testClock().now }));
    const resolved = await destination(ctx, NAMED);
    assert.equal(upstream.calls.length, 1);
    assert.deepEqual(destinationCached(ctx, NAMED), resolved);
    assert.equal(upstream.calls.length, 1);
  });

  it('refuses a local name in this turn, as destination does', async () => {
    const ctx = contextWith(fakeResolver({}));
    const target: DestinationTarget = { host: 'localhost', kind: 'name', port: 80, endpoint: undefined, endpoints: [] };
    const held = destinationCached(ctx, target);
    assert.equal(held?.ok, false);
    assert.deepEqual(held, await destination(ctx, target));
  });
});
