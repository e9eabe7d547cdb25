// Shared suite every CredentialSource must pass (file source, control-channel static source).
// Run from test/unit/credentials-source.test.ts; a source is driven only through its interface and `rotate`.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inspect } from 'node:util';
import { scopeFor } from '../../src/credentials/scope.js';
import type { ProviderInput } from '../../src/credentials/set.js';
import type { CredentialSource } from '../../src/credentials/source.js';

export interface SourceUnderTest {
  readonly source: CredentialSource;
  /** Makes `providers` the source's next input and resolves once the source has taken it in. */
  rotate(providers: readonly ProviderInput[]): Promise<void>;
  cleanup(): Promise<void>;
}

export type MakeSource = (providers: readonly ProviderInput[]) => Promise<SourceUnderTest>;

const ACME: ProviderInput = {
  name: 'acme',
  env: { API_TOKEN: 'contract-token-1', SHARED: 'shared-acme' },
  endpoints: [{ host: 'api.example.test', port: 443 }],
};
const OTHER: ProviderInput = { name: 'other', env: { SHARED: 'shared-other', ZED: 'zed-1' }, endpoints: [] };

export function runCredentialSourceContract(label: string, make: MakeSource): void {
  describe(`CredentialSource contract: ${label}`, () => {
    async function withSource(providers: readonly ProviderInput[], body: (s: SourceUnderTest) => Promise<void>) {
      const subject = await make(providers);
      try {
        await body(subject);
      } finally {
        await subject.source.close();
        await subject.cleanup();
      }
    }

    it('exposes every key of every provider, sorted and deduplicated', async () => {
      await withSource([ACME, OTHER], async ({ source }) => {
        const set = source.current();
        assert.deepEqual(set.keys, ['API_TOKEN', 'SHARED', 'ZED']);
        assert.equal(set.providers.get('acme')?.keys.get('API_TOKEN')?.reveal(), 'contract-token-1');
        assert.equal(set.providers.get('other')?.keys.get('SHARED')?.reveal(), 'shared-other');
        assert.ok(Number.isInteger(set.revision) && set.revision >= 1);
      });
    });

    it('never renders a value when the whole set is inspected or serialised', async () => {
      await withSource([ACME, OTHER], async ({ source }) => {
        const rendered = `${inspect(source.current(), { depth: 10 })}${JSON.stringify([...source.current().providers])}`;
        assert.ok(!rendered.includes('contract-token-1'));
        assert.ok(!rendered.includes('shared-acme'));
      });
    });

    it('moves to a new revision on rotation and tells subscribers with next and previous', async () => {
      await withSource([ACME], async ({ source, rotate }) => {
        const before = source.current();
        const seen: [number, number][] = [];
        source.subscribe((next, previous) => seen.push([next.revision, previous.revision]));
        await rotate([{ ...ACME, env: { ...ACME.env, API_TOKEN: 'contract-token-2' } }]);
        const after = source.current();
        assert.equal(after.revision, before.revision + 1);
        assert.equal(after.providers.get('acme')?.keys.get('API_TOKEN')?.reveal(), 'contract-token-2');
        assert.deepEqual(seen, [[after.revision, before.revision]]);
      });
    });

    it('keeps the revision when a rotation changes nothing', async () => {
      await withSource([ACME], async ({ source, rotate }) => {
        const before = source.current().revision;
        let calls = 0;
        source.subscribe(() => {
          calls += 1;
        });
        await rotate([ACME]);
        assert.equal(source.current().revision, before);
        assert.equal(calls, 0);
      });
    });

    it('stops calling a listener once it unsubscribed', async () => {
      await withSource([ACME], async ({ source, rotate }) => {
        let calls = 0;
        const off = source.subscribe(() => {
          calls += 1;
        });
        off();
        await rotate([{ ...ACME, env: { API_TOKEN: 'contract-token-3' } }]);
        assert.equal(calls, 0);
      });
    });

    it('makes a scope built before a rotation stale after it (revision guard)', async () => {
      await withSource([ACME], async ({ source, rotate }) => {
        const scope = scopeFor({ source, host: 'api.example.test', port: 443, path: '/' });
        assert.equal(scope.stillCurrent(), true);
        await rotate([{ ...ACME, env: { API_TOKEN: 'contract-token-4' } }]);
        assert.equal(scope.stillCurrent(), false);
        assert.equal(scopeFor({ source, host: 'api.example.test', port: 443, path: '/' }).stillCurrent(), true);
      });
    });

    it('keeps answering current() after close, and close can be called twice', async () => {
      const subject = await make([ACME]);
      await subject.source.close();
      await subject.source.close();
      assert.deepEqual(subject.source.current().keys, ['API_TOKEN', 'SHARED']);
      await subject.cleanup();
    });
  });
}
