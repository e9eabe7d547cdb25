import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCachingResolver, MAX_CACHE_TTL_MS, MAX_CACHED_NAMES, NEGATIVE_CACHE_TTL_MS } from '../../src/net/resolver-cache.js';
import { testClock } from '../harness/clock.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { runResolverContract } from '../contracts/resolver.contract.js';

runResolverContract('caching resolver over fakeResolver', async (records) => ({
  resolver: createCachingResolver(fakeResolver(records), { now: testClock().now }),
  close: async () => {},
}));

describe('createCachingResolver', () => {
  it('answers a repeated question from the cache until the TTL runs out', async () => {
    const clock = testClock();
    const inner = fakeResolver({ 'api.example.test': { addresses: ['127.0.0.1'], ttlSeconds: 10 } });
    const resolver = createCachingResolver(inner, { now: clock.now });
    await resolver.resolve('api.example.test', 4);
    await resolver.resolve('api.example.test', 4);
    assert.equal(inner.calls.length, 1);
    clock.advance(10_000);
    await resolver.resolve('api.example.test', 4);
    assert.equal(inner.calls.length, 2);
  });

  it('caps a long TTL', async () => {
    const clock = testClock();
    const inner = fakeResolver({ 'a.example.test': { addresses: ['127.0.0.2'], ttlSeconds: 86_400 } });
    const resolver = createCachingResolver(inner, { now: clock.now });
    await resolver.resolve('a.example.test', 4);
    clock.advance(MAX_CACHE_TTL_MS);
    await resolver.resolve('a.example.test', 4);
    assert.equal(inner.calls.length, 2);
  });

  it('never caches a TTL 0 answer, so a rebinding name is asked again every time', async () => {
    const inner = fakeResolver({ 'rebind.example.test': { addresses: ['127.0.0.3'], ttlSeconds: 0 } });
    const resolver = createCachingResolver(inner, { now: testClock().now });
    await resolver.resolve('rebind.example.test', 4);
    inner.set('rebind.example.test', { addresses: ['127.0.0.4'], ttlSeconds: 0 });
    const second = await resolver.resolve('rebind.example.test', 4);
    assert.equal(inner.calls.length, 2);
    assert.deepEqual(second.ok && second.addresses, ['127.0.0.4']);
  });

  it('keeps NXDOMAIN briefly and never keeps a timeout', async () => {
    const clock = testClock();
    const inner = fakeResolver({ 'slow.example.test': 'timeout' });
    const resolver = createCachingResolver(inner, { now: clock.now });
    await resolver.resolve('missing.example.test', 4);
    await resolver.resolve('missing.example.test', 4);
    await resolver.resolve('slow.example.test', 4);
    await resolver.resolve('slow.example.test', 4);
    assert.deepEqual(
      inner.calls.map((c) => c.name),
      ['missing.example.test', 'slow.example.test', 'slow.example.test'],
    );
    clock.advance(NEGATIVE_CACHE_TTL_MS);
    await resolver.resolve('missing.example.test', 4);
    assert.equal(inner.calls.length, 4);
  });

  it('shares one upstream exchange between concurrent questions for a name', async () => {
    const inner = fakeResolver({ 'api.example.test': ['127.0.0.1'] });
    const resolver = createCachingResolver(inner, { now: testClock().now });
    await Promise.all([resolver.resolve('api.example.test', 4), resolver.resolve('api.example.test', 4)]);
    assert.equal(inner.calls.length, 1);
  });

  it('keeps the families apart', async () => {
    const inner = fakeResolver({ 'api.example.test': ['127.0.0.1', '::1'] });
    const resolver = createCachingResolver(inner, { now: testClock().now });
    const v4 = await resolver.resolve('api.example.test', 4);
    const v6 = await resolver.resolve('api.example.test', 6);
    assert.deepEqual(v4.ok && v4.addresses, ['127.0.0.1']);
    assert.deepEqual(v6.ok && v6.addresses, ['::1']);
  });

  it('holds at most its named number of names, evicting the oldest', async () => {
    const inner = fakeResolver();
    for (let i = 0; i <= MAX_CACHED_NAMES; i++) inner.set(`n${i}.example.test`, ['127.0.0.1']);
    const resolver = createCachingResolver(inner, { now: testClock().now });
    for (let i = 0; i <= MAX_CACHED_NAMES; i++) await resolver.resolve(`n${i}.example.test`, 4);
    await resolver.resolve(`n${MAX_CACHED_NAMES}.example.test`, 4);
    await resolver.resolve('n0.example.test', 4);
    assert.equal(inner.calls.length, MAX_CACHED_NAMES + 2);
  });

  it('forgets cached answers on clear(), and an answer still in flight is not written back', async () => {
    const inner = fakeResolver({ 'api.example.test': { addresses: ['127.0.0.1'], ttlSeconds: 10 } });
    const resolver = createCachingResolver(inner, { now: testClock().now });
    await resolver.resolve('api.example.test', 4);
    resolver.clear();
    assert.equal(resolver.cached?.('api.example.test', 4), undefined);
    const inFlight = resolver.resolve('api.example.test', 4);
    resolver.clear();
    inner.set('api.example.test', { addresses: ['127.0.0.2'], ttlSeconds: 10 });
    await inFlight;
    assert.equal(resolver.cached?.('api.example.test', 4), undefined);
    const next = await resolver.resolve('api.example.test', 4);
    assert.deepEqual(next.ok ? next.addresses : next.failure, ['127.0.0.2']);
  });
});
