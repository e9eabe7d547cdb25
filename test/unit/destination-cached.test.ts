// context.ts's destination (issue 13, one path since issue 30): a verdict in this turn when nothing must be resolved,
// else a promise that resolves once; a cached answer gives the same verdict the resolution gave.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCachingResolver } from '../../src/net/resolver-cache.js';
import type { Resolver } from '../../src/net/resolver.js';
import { NO_SELF_ADDRESSES } from '../../src/net/ssrf.js';
import type { DestinationResult } from '../../src/net/destination.js';
import { type DestinationTarget, destination, type ProxyContext } from '../../src/proxy/context.js';
import { testClock } from '../harness/clock.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { testLookupGate } from '../harness/lookup-gate.js';

function contextWith(resolver: Resolver): ProxyContext {
  return { lookups: testLookupGate(resolver), hosts: undefined, allowLoopback: false, selfAddresses: () => NO_SELF_ADDRESSES } as unknown as ProxyContext;
}

/** The verdict when it came in this turn, else undefined (a promise: a query was needed). */
function inThisTurn(ctx: ProxyContext, target: DestinationTarget): DestinationResult | undefined {
  const out = destination(ctx, target);
  return out instanceof Promise ? undefined : out;
}

const NAMED: DestinationTarget = { host: 'api.example.test', kind: 'name', port: 443, endpoint: undefined, endpoints: [] };

describe('destination', () => {
  it('answers an IP literal in this turn without asking the resolver', async () => {
    const upstream = fakeResolver({});
    const ctx = contextWith(upstream);
    const target: DestinationTarget = { host: '10.0.0.5', kind: 'ipv4', port: 443, endpoint: undefined, endpoints: [] };
    const held = inThisTurn(ctx, target);
    assert.ok(held !== undefined);
    assert.deepEqual(held, await destination(ctx, target));
    assert.equal(upstream.calls.length, 0);
  });

  it('answers a name it does not hold with a promise, after one query', async () => {
    const upstream = fakeResolver({ 'api.example.test': ['93.184.216.34'] });
    const out = destination(contextWith(createCachingResolver(upstream, { now: testClock().now })), NAMED);
    assert.ok(out instanceof Promise);
    assert.equal((await out).ok, true);
    assert.equal(upstream.calls.length, 1);
  });

  it('serves a cached answer in this turn, the same verdict destination gave', async () => {
    const upstream = fakeResolver({ 'api.example.test': ['93.184.216.34'] });
    const ctx = contextWith(createCachingResolver(upstream, { now: testClock().now }));
    const resolved = await destination(ctx, NAMED);
    assert.equal(upstream.calls.length, 1);
    assert.deepEqual(inThisTurn(ctx, NAMED), resolved);
    assert.equal(upstream.calls.length, 1);
  });

  it('refuses a local name in this turn, as destination does', async () => {
    const ctx = contextWith(fakeResolver({}));
    const target: DestinationTarget = { host: 'localhost', kind: 'name', port: 80, endpoint: undefined, endpoints: [] };
    const held = inThisTurn(ctx, target);
    assert.equal(held?.ok, false);
    assert.deepEqual(held, await destination(ctx, target));
  });
});
