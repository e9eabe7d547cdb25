// Shared suite every SupervisorStore must pass (memory, state file, PostgreSQL), driven only through the store
// interface. Run from test/integration/supervisor-store.test.ts and supervisor-store-postgres.test.ts.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type AttachRecord,
  MAX_WITHDRAWAL_RECORDS,
  type SandboxPublication,
  type StoreChange,
  type SupervisorStore,
} from '../../src/supervisor/store/store.js';
import { type WaiterList, waiterList } from '../harness/waiters.js';

/** How long a test waits for a change notification to arrive. */
export const WAIT_MS = 5_000;

export interface StoreUnderTest {
  readonly store: SupervisorStore;
  cleanup(): Promise<void>;
}
export type MakeStore = () => Promise<StoreUnderTest>;

export function publication(sandboxId: string, overrides: Partial<SandboxPublication> = {}): SandboxPublication {
  return { sandboxId, policyHash: 'p1', policyText: 'version: 1\n', credentialsHash: 'c1', settings: { failureMode: 'fail_closed' }, ...overrides };
}

export function attach(sandboxId: string, instanceId: string, overrides: Partial<AttachRecord> = {}): AttachRecord {
  return { sandboxId, instanceId, bootId: 'boot-1', version: '0.1.0', replicaId: 'r1', sessionId: 's1', at: 50, ...overrides };
}

export function recordChanges(store: SupervisorStore): WaiterList<StoreChange> & { stop(): void } {
  const changes = waiterList<StoreChange>();
  const stop = store.subscribe((change) => changes.push(change));
  return Object.assign(changes, { stop });
}

export function runStoreContract(label: string, make: MakeStore): void {
  describe(`SupervisorStore contract: ${label}`, () => {
    async function withStore(body: (store: SupervisorStore) => Promise<void>): Promise<void> {
      const subject = await make();
      try {
        await body(subject.store);
      } finally {
        await subject.cleanup();
      }
    }

    it('publishSandbox is a compare-and-set on the hashes and settings', () =>
      withStore(async (store) => {
        const first = await store.publishSandbox(publication('sb'));
        assert.deepEqual(first, { ...publication('sb'), generation: 1 });
        assert.equal((await store.publishSandbox(publication('sb'))).generation, 1, 'same content: no bump');
        assert.equal((await store.publishSandbox(publication('sb', { policyText: 'other text' }))).generation, 1, 'text alone is not a change');
        assert.equal((await store.publishSandbox(publication('sb', { policyHash: 'p2' }))).generation, 2);
        assert.equal((await store.publishSandbox(publication('sb', { policyHash: 'p2', credentialsHash: 'c2' }))).generation, 3);
        const settings = { failureMode: 'retain_last_valid' } as const;
        const latest = await store.publishSandbox(publication('sb', { policyHash: 'p2', credentialsHash: 'c2', settings }));
        assert.equal(latest.generation, 4);
        assert.equal((await store.publishSandbox(publication('other'))).generation, 1, 'a new sandbox starts at 1');
        assert.deepEqual(await store.sandbox('sb'), latest);
        assert.equal(await store.sandbox('missing'), undefined);
        assert.deepEqual((await store.sandboxes()).map((s) => [s.sandboxId, s.generation]).sort(), [['other', 1], ['sb', 4]]);
      }));

    it('raiseGeneration only moves the generation up, and knows no unknown sandbox', () =>
      withStore(async (store) => {
        assert.equal(await store.raiseGeneration('missing', 3), undefined);
        await store.publishSandbox(publication('sb'));
        assert.equal((await store.raiseGeneration('sb', 5))?.generation, 5);
        assert.equal((await store.raiseGeneration('sb', 3))?.generation, 5);
        assert.equal((await store.sandbox('sb'))?.generation, 5);
        assert.equal((await store.publishSandbox(publication('sb', { policyHash: 'p2' }))).generation, 6);
      }));

    it('expect inserts an unknown instance, keeps the earlier deadline, and leaves an attached one alone', () =>
      withStore(async (store) => {
        await store.expect('sb', 'i1', 1_000);
        const expected = await store.instance('sb', 'i1');
        assert.equal(expected?.bootId, 'expected');
        assert.equal(expected?.deadlineAt, 1_000);
        assert.equal(expected?.replicaId, null);
        assert.equal(expected?.attachedAt, null);
        await store.expect('sb', 'i1', 2_000);
        assert.equal((await store.instance('sb', 'i1'))?.deadlineAt, 1_000, 'a later deadline does not extend');
        await store.expect('sb', 'i1', 500);
        assert.equal((await store.instance('sb', 'i1'))?.deadlineAt, 500, 'an earlier one wins');

        await store.attached(attach('sb', 'i2'));
        await store.expect('sb', 'i2', 700);
        const attached = await store.instance('sb', 'i2');
        assert.equal(attached?.deadlineAt, null);
        assert.equal(attached?.replicaId, 'r1');
        assert.equal((await store.instances()).length, 2);
      }));

    it('attached clears the deadline; status and detached are ignored for an old session', () =>
      withStore(async (store) => {
        await store.expect('sb', 'i1', 1_000);
        await store.attached(attach('sb', 'i1', { at: 60 }));
        const row = await store.instance('sb', 'i1');
        assert.deepEqual(
          [row?.bootId, row?.version, row?.replicaId, row?.sessionId, row?.deadlineAt, row?.attachedAt, row?.detachedAt],
          ['boot-1', '0.1.0', 'r1', 's1', null, 60, null],
        );
        const error = { kind: 'policy', message: 'bad rule' };
        await store.status('sb', 'i1', 's1', { state: 'failed', generation: 3, policyHash: 'p3', error });
        let now = await store.instance('sb', 'i1');
        assert.deepEqual([now?.effectiveGeneration, now?.policyHash, now?.lastStatus, now?.lastError], [3, 'p3', 'failed', error]);

        await store.attached(attach('sb', 'i1', { sessionId: 's2', replicaId: 'r2', at: 70 }));
        await store.status('sb', 'i1', 's1', { state: 'applied', generation: 9, policyHash: 'p9', error: null });
        await store.detached('sb', 'i1', 's1', 80, 5_000);
        now = await store.instance('sb', 'i1');
        assert.deepEqual([now?.sessionId, now?.replicaId, now?.effectiveGeneration, now?.deadlineAt], ['s2', 'r2', 3, null]);

        await store.status('sb', 'i1', 's2', { state: 'applied', generation: 4, policyHash: 'p4', error: null });
        await store.detached('sb', 'i1', 's2', 90, 5_000);
        now = await store.instance('sb', 'i1');
        assert.deepEqual(
          [now?.replicaId, now?.deadlineAt, now?.detachedAt, now?.effectiveGeneration, now?.lastError],
          [null, 5_000, 90, 4, null],
        );
        await store.status('sb', 'missing', 's1', { state: 'applied', generation: 1, policyHash: 'p', error: null });
        assert.equal(await store.instance('sb', 'missing'), undefined);
      }));

    it('claimDue withdraws exactly the detached instances that are due, once', () =>
      withStore(async (store) => {
        await store.expect('sb', 'due-expected', 100);
        await store.expect('sb', 'later', 500);
        await store.attached(attach('sb', 'attached'));
        await store.attached(attach('sb', 'was-attached', { sessionId: 's9' }));
        await store.detached('sb', 'was-attached', 's9', 60, 150);
        const seen: string[] = [];
        const claimed = await store.claimDue(200, 'r1', true, (instance) => {
          seen.push(instance.instanceId);
          return `gone ${instance.instanceId} (${instance.bootId})`;
        });
        assert.deepEqual(claimed.map((w) => w.instanceId).sort(), ['due-expected', 'was-attached']);
        assert.deepEqual(seen.sort(), ['due-expected', 'was-attached']);
        for (const w of claimed) {
          assert.equal(w.sandboxId, 'sb');
          assert.equal(w.at, 200);
          assert.equal(w.replicaId, 'r1');
          assert.equal(w.hook, 'pending');
          assert.equal(w.attempts, 0);
          assert.equal(w.deliveredAt, null);
          assert.equal(w.lastError, null);
        }
        assert.equal(claimed.find((w) => w.instanceId === 'due-expected')?.reason, 'gone due-expected (expected)');
        assert.notEqual(claimed[0]?.id, claimed[1]?.id);
        assert.deepEqual((await store.instances()).map((i) => i.instanceId).sort(), ['attached', 'later']);
        assert.deepEqual(await store.claimDue(200, 'r1', true, () => 'again'), []);

        const none = await store.claimDue(500, 'r2', false, () => 'late');
        assert.deepEqual(none.map((w) => [w.instanceId, w.hook, w.nextAttemptAt, w.replicaId]), [['later', 'none', null, 'r2']]);
        const listed = await store.withdrawals();
        assert.deepEqual(listed.map((w) => w.id).sort(), [...claimed, ...none].map((w) => w.id).sort());
      }));

    it('releaseReplica detaches exactly what that replica holds', () =>
      withStore(async (store) => {
        await store.attached(attach('sb', 'a', { replicaId: 'r1', sessionId: 'sa' }));
        await store.attached(attach('sb', 'b', { replicaId: 'r1', sessionId: 'sb' }));
        await store.attached(attach('sb', 'c', { replicaId: 'r2', sessionId: 'sc' }));
        assert.equal(await store.releaseReplica('r1', 300, 900), 2);
        const a = await store.instance('sb', 'a');
        assert.deepEqual([a?.replicaId, a?.deadlineAt, a?.detachedAt], [null, 900, 300]);
        assert.equal((await store.instance('sb', 'c'))?.replicaId, 'r2');
        assert.equal(await store.releaseReplica('r1', 310, 900), 0);
        // Detached with no session: a late ack of the old session changes nothing.
        await store.status('sb', 'a', 'sa', { state: 'applied', generation: 7, policyHash: 'p7', error: null });
        assert.equal((await store.instance('sb', 'a'))?.effectiveGeneration, null);
      }));

    it('releaseStaleReplicas releases stale and silent replicas, never itself or a fresh one', () =>
      withStore(async (store) => {
        await store.heartbeat('fresh', 1_000);
        await store.heartbeat('stale', 100);
        await store.heartbeat('self', 1);
        for (const replicaId of ['self', 'fresh', 'stale', 'silent']) {
          await store.attached(attach('sb', `on-${replicaId}`, { replicaId, sessionId: `s-${replicaId}` }));
        }
        assert.equal(await store.releaseStaleReplicas('self', 500, 600, 4_000), 2);
        const holders = Object.fromEntries((await store.instances()).map((i) => [i.instanceId, [i.replicaId, i.deadlineAt]]));
        assert.deepEqual(holders, {
          'on-self': ['self', null],
          'on-fresh': ['fresh', null],
          'on-stale': [null, 4_000],
          'on-silent': [null, 4_000],
        });
        assert.equal(await store.releaseStaleReplicas('self', 500, 600, 4_000), 0);
      }));

    it('hook deliveries are leased, counted, and settled by delivered or failed', () =>
      withStore(async (store) => {
        await store.expect('sb', 'a', 10);
        await store.expect('sb', 'b', 20);
        await store.claimDue(100, 'r1', true, () => 'withdrawn');
        const [first, ...none] = await store.claimHookDeliveries(100, 400, 1);
        assert.equal(none.length, 0, 'limit is honoured');
        assert.equal(first?.attempts, 1);
        const [second] = await store.claimHookDeliveries(100, 400, 10);
        assert.notEqual(second?.id, first?.id, 'a leased delivery is not handed out again');
        assert.equal(second?.attempts, 1);
        assert.deepEqual(await store.claimHookDeliveries(399, 600, 10), []);
        const again = await store.claimHookDeliveries(400, 600, 10);
        assert.deepEqual(again.map((w) => w.attempts), [2, 2], 'an expired lease is claimable again');

        await store.hookDelivered(first!.id, 450);
        await store.hookFailed(second!.id, 'HTTP 503', 1_000);
        const byId = new Map((await store.withdrawals()).map((w) => [w.id, w]));
        assert.deepEqual([byId.get(first!.id)?.hook, byId.get(first!.id)?.deliveredAt], ['delivered', 450]);
        const failed = byId.get(second!.id);
        assert.deepEqual([failed?.hook, failed?.lastError, failed?.nextAttemptAt, failed?.attempts], ['pending', 'HTTP 503', 1_000, 2]);
        assert.deepEqual(await store.claimHookDeliveries(999, 2_000, 10), [], 'not before nextAttemptAt');
        const retry = await store.claimHookDeliveries(1_000, 2_000, 10);
        assert.deepEqual(retry.map((w) => [w.id, w.attempts]), [[second!.id, 3]]);
        await store.hookDelivered(second!.id, 1_100);
        assert.deepEqual(await store.claimHookDeliveries(5_000, 6_000, 10), []);
      }));

    it('withdrawals: pending first, newest first, and the rest bounded by MAX_WITHDRAWAL_RECORDS', () =>
      withStore(async (store) => {
        await store.expect('sb', 'pending-old', 10);
        await store.claimDue(10, 'r1', true, () => 'p');
        await store.expect('sb', 'pending-new', 11);
        await store.claimDue(11, 'r1', true, () => 'p');
        const bulk = MAX_WITHDRAWAL_RECORDS + 5;
        await Promise.all(Array.from({ length: bulk }, (_, n) => store.expect('sb', `bulk-${n}`, 20)));
        assert.equal((await store.claimDue(20, 'r1', false, () => 'b')).length, bulk);
        await store.expect('sb', 'newest', 30);
        await store.claimDue(30, 'r1', false, () => 'n');
        const listed = await store.withdrawals();
        assert.equal(listed.length, 2 + MAX_WITHDRAWAL_RECORDS);
        assert.deepEqual(listed.slice(0, 3).map((w) => w.instanceId), ['pending-new', 'pending-old', 'newest']);
        assert.ok(listed.slice(3).every((w) => w.at === 20 && w.hook === 'none'));
        assert.equal(new Set(listed.map((w) => w.id)).size, listed.length);
      }));

    it('subscribe delivers sandbox and attached changes, once per real change, until unsubscribed', () =>
      withStore(async (store) => {
        const changes = recordChanges(store);
        await store.publishSandbox(publication('sb'));
        await store.publishSandbox(publication('sb'));
        await store.attached(attach('sb', 'i1', { replicaId: 'r7', sessionId: 's7', bootId: 'b7' }));
        await store.publishSandbox(publication('marker'));
        await changes.waitFor((c) => c.kind === 'sandbox' && c.sandboxId === 'marker', WAIT_MS, 'marker change');
        assert.deepEqual(changes.items, [
          { kind: 'sandbox', sandboxId: 'sb', generation: 1 },
          { kind: 'attached', sandboxId: 'sb', instanceId: 'i1', replicaId: 'r7', sessionId: 's7', bootId: 'b7' },
          { kind: 'sandbox', sandboxId: 'marker', generation: 1 },
        ]);
        changes.stop();
        const later = recordChanges(store);
        await store.publishSandbox(publication('after'));
        await later.waitFor((c) => c.kind === 'sandbox' && c.sandboxId === 'after', WAIT_MS, 'change after unsubscribe');
        assert.equal(changes.items.length, 3, 'an unsubscribed listener hears nothing more');
        later.stop();
      }));
  });
}
