// control/apply.ts with a compile that takes its time (as policy/parse-off-thread.ts does): pushes queue behind it
// and apply and settle in generation order, held() never names a compile in flight, and close() abandons it
// without a swap, a quarantine or an ack. The parse is driven by hand, so nothing here waits on a clock.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createControlApplier } from '../../src/control/apply.js';
import type { PolicyPush } from '../../src/control/messages.js';
import { BoundaryError } from '../../src/shared/errors.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore, emptyPolicy } from '../../src/policy/store.js';
import type { Policy } from '../../src/policy/types.js';

function policyText(host: string): string {
  return `version: 1\nnetwork_policies:\n  api:\n    name: api\n    endpoints:\n      - host: ${host}\n        port: 443\n`;
}
const A = policyText('a.example.test');
const B = policyText('b.example.test');
const C = policyText('c.example.test');
const hashOf = (text: string): string => parsePolicy(text).hash;
const push = (generation: number, text: string): PolicyPush => ({ kind: 'policy', generation, policyHash: hashOf(text), policy: text });

/** An applier whose parses settle only when the test says so, in any order it likes. */
function handParsed() {
  const store = createPolicyStore();
  const pending: { text: string; settle(fail?: boolean): void }[] = [];
  const applier = createControlApplier({
    store,
    parsePolicy: (text) =>
      new Promise<Policy>((resolve, reject) => {
        pending.push({ text, settle: (fail) => (fail ? reject(new BoundaryError('POLICY_INVALID', 'refused')) : resolve(parsePolicy(text))) });
      }),
    emptyPolicy,
    sink: { emit() {} },
    now: () => 0,
  });
  /** Settles the oldest parse asked for, once the applier has asked for it. */
  async function settleNext(fail = false): Promise<string> {
    for (let turn = 0; turn < 100 && pending.length === 0; turn++) await Promise.resolve();
    const next = pending.shift();
    assert.ok(next, 'a parse was asked for');
    next.settle(fail);
    return next.text;
  }
  return { store, applier, pending, settleNext };
}

describe('control applier: pushes while a compile runs', () => {
  it('queues a newer push behind the compiling one; both apply and settle in generation order', async () => {
    const { store, applier, pending, settleNext } = handParsed();
    const settled: number[] = [];
    const noted = (generation: number) => (outcome: Awaited<ReturnType<typeof applier.applyPolicy>>) => {
      settled.push(generation);
      return outcome;
    };
    const first = applier.applyPolicy(push(2, A)).then(noted(2));
    const second = applier.applyPolicy(push(3, B)).then(noted(3));
    assert.equal(await settleNext(), A);
    // The second parse starts only after the first swapped: it cannot overtake.
    assert.equal((await first).result, 'applied');
    assert.equal(store.current().hash, hashOf(A));
    assert.equal(await settleNext(), B);
    assert.deepEqual([(await first).status?.generation, (await second).status?.generation], [2, 3]);
    assert.deepEqual(settled, [2, 3]);
    assert.equal(store.current().hash, hashOf(B));
    assert.equal(pending.length, 0);
  });

  it('keeps the old generation in force and held() at it until the compile settles', async () => {
    const { store, applier, settleNext } = handParsed();
    const admitted = applier.applyPolicy(push(1, A));
    await settleNext();
    await admitted;
    const inForce = store.current();
    const compiling = applier.applyPolicy(push(2, B));
    let idle = false;
    void applier.settled().then(() => {
      idle = true;
    });
    await Promise.resolve();
    assert.equal(store.current(), inForce);
    assert.deepEqual(applier.held(), { heldPolicyHash: hashOf(A), heldGeneration: 1 });
    assert.equal(idle, false);
    await settleNext();
    await compiling;
    await applier.settled();
    assert.deepEqual(applier.held(), { heldPolicyHash: hashOf(B), heldGeneration: 2 });
  });

  it('still publishes the deny-all quarantine when an asynchronous compile fails in fail_closed mode', async () => {
    const { store, applier, settleNext } = handParsed();
    const applied = applier.applyPolicy(push(1, A));
    await settleNext();
    await applied;
    const failed = applier.applyPolicy(push(2, B));
    await settleNext(true);
    assert.equal((await failed).status?.state, 'failed');
    assert.equal(store.current().hash, emptyPolicy().hash);
    assert.equal(applier.state().quarantined, true);
  });

  it('abandons a compile in flight on close(): nothing swapped, quarantined or acknowledged, and the queue ends too', async () => {
    const { store, applier, settleNext } = handParsed();
    const applied = applier.applyPolicy(push(1, A));
    await settleNext();
    await applied;
    const inForce = store.current();
    const compiling = applier.applyPolicy(push(2, B));
    const queued = applier.applyPolicy(push(3, C));
    for (let turn = 0; turn < 10; turn++) await Promise.resolve();
    applier.close();
    assert.deepEqual(await compiling, { result: 'ignored' });
    assert.deepEqual(await queued, { result: 'ignored' });
    // A compiler closed under the parse rejects it; that is not a policy failure and publishes no quarantine.
    await settleNext(true);
    await applier.settled();
    assert.equal(store.current(), inForce);
    assert.equal(applier.state().quarantined, false);
    assert.deepEqual(await applier.applyAdmitted({
      kind: 'admitted',
      sessionId: 's-2',
      generation: 4,
      policyHash: hashOf(C),
      policy: C,
      credentialsHash: 'c0',
      credentials: [],
      settings: { failureMode: 'fail_closed' },
    }), []);
  });
});
