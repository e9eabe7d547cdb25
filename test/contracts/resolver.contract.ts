// The Resolver contract (net/resolver.ts): every implementation answers from the records it is given,
// reports failures as values (never a rejected promise), and never invents or reorders addresses.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Resolver } from '../../src/net/resolver.js';

export interface ContractRecord {
  readonly addresses: readonly string[];
  readonly ttlSeconds: number;
}

export interface ResolverUnderTest {
  readonly resolver: Resolver;
  close(): Promise<void>;
}

export type MakeResolver = (records: Readonly<Record<string, ContractRecord>>) => Promise<ResolverUnderTest>;

const RECORDS: Readonly<Record<string, ContractRecord>> = {
  'api.example.test': { addresses: ['127.0.0.2', '127.0.0.3'], ttlSeconds: 20 },
  'dual.example.test': { addresses: ['127.0.0.4', 'fd00::4'], ttlSeconds: 20 },
  'v6.example.test': { addresses: ['fd00::6'], ttlSeconds: 20 },
};

export function runResolverContract(label: string, make: MakeResolver): void {
  describe(`Resolver contract: ${label}`, () => {
    let subject: ResolverUnderTest;
    before(async () => {
      subject = await make(RECORDS);
    });
    after(() => subject.close());

    it('answers a known name with its IPv4 addresses, in order, and a TTL', async () => {
      const result = await subject.resolver.resolve('api.example.test', 4);
      assert.equal(result.ok, true);
      assert.ok(result.ok);
      assert.deepEqual(result.addresses, ['127.0.0.2', '127.0.0.3']);
      assert.ok(Number.isInteger(result.ttlSeconds) && result.ttlSeconds >= 0 && result.ttlSeconds <= 20);
    });

    it('answers family 6 with only the IPv6 addresses of a dual-stack name', async () => {
      const v4 = await subject.resolver.resolve('dual.example.test', 4);
      const v6 = await subject.resolver.resolve('dual.example.test', 6);
      assert.deepEqual(v4.ok && v4.addresses, ['127.0.0.4']);
      assert.deepEqual(v6.ok && v6.addresses, ['fd00::4']);
    });

    it('reports an unknown name as nxdomain, as a value', async () => {
      const result = await subject.resolver.resolve('missing.example.test', 4);
      assert.equal(result.ok, false);
      assert.equal(!result.ok && result.failure, 'nxdomain');
      assert.equal(typeof (!result.ok && result.message), 'string');
    });

    it('reports a name without records of the family as nodata', async () => {
      const result = await subject.resolver.resolve('v6.example.test', 4);
      assert.equal(!result.ok && result.failure, 'nodata');
    });

    it('answers concurrent questions independently', async () => {
      const names = ['api.example.test', 'missing.example.test', 'v6.example.test', 'api.example.test'];
      const results = await Promise.all(names.map((n) => subject.resolver.resolve(n, 4)));
      assert.deepEqual(results.map((r) => (r.ok ? r.addresses.join(',') : r.failure)), ['127.0.0.2,127.0.0.3', 'nxdomain', 'nodata', '127.0.0.2,127.0.0.3']);
    });
  });
}
