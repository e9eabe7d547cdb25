import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ControlState } from '../../src/control/client.js';
import { controlReadiness } from '../../src/control/readiness.js';

const AT = Date.UTC(2026, 0, 1);

function state(overrides: Partial<ControlState>): ControlState {
  return {
    phase: 'waiting',
    supervisor: 'supervisor.example.test:5500',
    sessionId: undefined,
    connectedSince: undefined,
    disconnectedSince: AT,
    lastError: { kind: 'connect-refused', message: 'connect ECONNREFUSED', at: AT },
    failedAttempts: 3,
    failuresSinceHealthy: 3,
    nextAttemptAt: AT + 8_000,
    nextAttemptReason: 'backoff',
    policy: {
      effective: false,
      quarantined: false,
      generation: undefined,
      policyHash: undefined,
      localGeneration: 0,
      effectiveSince: undefined,
      credentialsHash: undefined,
      settings: { failureMode: 'fail_closed' },
      lastError: undefined,
    },
    events: { buffered: 0, sent: 0, dropped: 0 },
    relays: 0,
    superseded: undefined,
    ...overrides,
  };
}

describe('control readiness', () => {
  it('shows the failed attempts, the next attempt as ISO and why that delay while waiting', () => {
    const r = controlReadiness(state({}));
    assert.deepEqual(r.reconnect, { failedAttempts: 3, nextAttemptAt: '2026-01-01T00:00:08.000Z', reason: 'backoff' });
    assert.ok(r.reasons.some((reason) => reason.endsWith('; next attempt at 2026-01-01T00:00:08.000Z (backoff after 3 failed attempts)')), r.reasons.join('; '));
  });

  it('names a refusal that is not retryable', () => {
    const r = controlReadiness(state({ failuresSinceHealthy: 1, nextAttemptAt: AT + 30_000, nextAttemptReason: 'not-retryable' }));
    assert.equal(r.reconnect.reason, 'not-retryable');
    assert.ok(r.reasons.some((reason) => reason.endsWith('(not-retryable)')), r.reasons.join('; '));
  });

  it('is not ready once superseded, naming the other process, and keeps the last policy in the report', () => {
    const r = controlReadiness(
      state({
        phase: 'superseded',
        nextAttemptAt: undefined,
        nextAttemptReason: undefined,
        superseded: { bootId: 'boot-2', sandboxId: 'sb-1', instanceId: 'pod-1', at: AT },
        policy: { ...state({}).policy, effective: true, generation: 3 },
      }),
    );
    assert.equal(r.ready, false);
    assert.deepEqual(r.reasons, ['control-superseded: another boundary process (boot boot-2) attached as sandbox sb-1 instance pod-1']);
  });

  it('keeps only the failure count while attached', () => {
    const r = controlReadiness(state({ phase: 'attached', connectedSince: AT, failuresSinceHealthy: 0, nextAttemptAt: undefined, nextAttemptReason: undefined }));
    assert.deepEqual(r.reconnect, { failedAttempts: 0 });
  });
});
