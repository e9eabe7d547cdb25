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

  it('keeps only the failure count while attached', () => {
    const r = controlReadiness(state({ phase: 'attached', connectedSince: AT, failuresSinceHealthy: 0, nextAttemptAt: undefined, nextAttemptReason: undefined }));
    assert.deepEqual(r.reconnect, { failedAttempts: 0 });
  });
});
