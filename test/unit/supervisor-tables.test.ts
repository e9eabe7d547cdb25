import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AttachMessage } from '../../src/control/messages.js';
import { createTables, type SandboxConfig } from '../../src/supervisor/tables.js';
import { testClock } from '../harness/clock.js';

const config = (policyHash: string): SandboxConfig => ({
  policyText: `# ${policyHash}\nversion: 1\n`,
  policyHash,
  providers: [],
  credentialsHash: 'c0',
  settings: { failureMode: 'fail_closed' },
});
const attach = (extra: Partial<AttachMessage> = {}): AttachMessage => ({
  kind: 'attach',
  sandboxId: 'sb-1',
  instanceId: 'pod-1',
  bootId: 'b1',
  version: 'v',
  ...extra,
});

describe('supervisor tables', () => {
  it('admits the same instance again, superseding the old session, and omits what the boundary holds', () => {
    const tables = createTables({ now: testClock().now });
    const first = tables.admit(attach(), config('h1'), 's1');
    assert.ok(first.ok);
    assert.equal(first.admitted.policy, config('h1').policyText);
    const second = tables.admit(attach({ heldPolicyHash: 'h1', heldGeneration: 1, heldCredentialsHash: 'c0' }), config('h1'), 's2');
    assert.ok(second.ok);
    assert.deepEqual(second.superseded, { sessionId: 's1', bootId: 'b1', acked: false });
    assert.equal(second.admitted.policy, undefined);
    assert.equal(second.admitted.credentials, undefined);
    assert.equal(tables.bySession('s1'), undefined);
    assert.equal(tables.rows().length, 1);
  });

  it('reports the boot id of the session it replaced and whether that session had acked', () => {
    const tables = createTables({ now: testClock().now });
    assert.ok(tables.admit(attach({ bootId: 'boot-a' }), config('h1'), 's1').ok);
    tables.status('s1', { kind: 'status', generation: 1, policyHash: 'h1', state: 'effective' });
    const taken = tables.admit(attach({ bootId: 'boot-b' }), config('h1'), 's2');
    assert.ok(taken.ok);
    assert.deepEqual(taken.superseded, { sessionId: 's1', bootId: 'boot-a', acked: true });
    // The new session has not acked yet, and a detached instance replaces nothing.
    assert.equal(tables.bySession('s2')?.sessionAcked, false);
    tables.detach('s2');
    const restarted = tables.admit(attach({ bootId: 'boot-c' }), config('h1'), 's3');
    assert.ok(restarted.ok);
    assert.equal(restarted.superseded, undefined);
  });

  it('moves its generation past one a boundary held before a supervisor restart', () => {
    const tables = createTables({ now: testClock().now });
    const same = tables.admit(attach({ heldPolicyHash: 'h1', heldGeneration: 9 }), config('h1'), 's1');
    assert.ok(same.ok);
    assert.equal(same.admitted.generation, 9);
    const other = tables.admit(attach({ instanceId: 'pod-2', heldPolicyHash: 'old', heldGeneration: 9 }), config('h1'), 's2');
    assert.ok(other.ok);
    assert.equal(other.admitted.generation, 10);
    // The store's generation for a changed policy is adopted; the same generation again changes nothing.
    assert.deepEqual(tables.adopt('sb-1', 11, config('h2')), { generation: 11, policy: true, credentials: false, settings: false });
    assert.equal(tables.adopt('sb-1', 11, config('h2')), undefined);
  });

  it('adopts only generations that move forward, and an attach never changes a known sandbox', () => {
    const tables = createTables({ now: testClock().now });
    tables.adopt('sb-1', 5, config('h5'));
    assert.equal(tables.adopt('sb-1', 4, config('h4')), undefined);
    assert.equal(tables.sandbox('sb-1')?.config.policyHash, 'h5');
    const admitted = tables.admit(attach(), config('h-local'), 's1');
    assert.ok(admitted.ok);
    assert.equal(admitted.admitted.generation, 5);
    assert.equal(admitted.admitted.policyHash, 'h5');
    // A later generation with the same content moves the counter without a change to push.
    assert.equal(tables.adopt('sb-1', 6, config('h5')), undefined);
    assert.equal(tables.sandbox('sb-1')?.generation, 6);
  });

  it('records acks, detaches, and frees everything on withdrawal with the reason', () => {
    const clock = testClock();
    const tables = createTables({ now: clock.now });
    tables.admit(attach(), config('h1'), 's1');
    tables.status('s1', { kind: 'status', generation: 1, policyHash: 'h1', state: 'effective' });
    assert.equal(tables.rows()[0]?.effectiveGeneration, 1);
    tables.status('s1', { kind: 'status', generation: 2, policyHash: 'h2', state: 'failed', error: { kind: 'policy', message: 'bad' } });
    assert.deepEqual(tables.rows()[0]?.lastError, { kind: 'policy', message: 'bad' });
    tables.detach('s1');
    clock.advance(1_000);
    assert.equal(tables.rows()[0]?.attached, false);
    assert.equal(tables.rows()[0]?.detachedForMs, 1_000);
    tables.withdraw('sb-1', 'pod-1', 'deadline');
    assert.deepEqual(tables.rows(), []);
    assert.equal(tables.sandbox('sb-1'), undefined);
    assert.equal(tables.instanceCount(), 0);
    assert.deepEqual(tables.withdrawn(), [{ sandboxId: 'sb-1', instanceId: 'pod-1', reason: 'deadline', at: clock.now() }]);
  });
});
