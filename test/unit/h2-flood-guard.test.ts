import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createFloodGuard, H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS, H2_MAX_PINGS_BETWEEN_REQUESTS, H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS, H2_MAX_RESET_DEBT, H2_MAX_SETTINGS_BETWEEN_REQUESTS } from '../../src/http2/flood-guard.js';

describe('HTTP/2 flood budgets', () => {
  it('allows PING and SETTINGS up to their budgets, and a request restores both', () => {
    const guard = createFloodGuard();
    for (let i = 0; i < H2_MAX_PINGS_BETWEEN_REQUESTS; i++) assert.equal(guard.ping(), undefined);
    for (let i = 0; i < H2_MAX_SETTINGS_BETWEEN_REQUESTS; i++) assert.equal(guard.settings(), undefined);
    guard.request();
    for (let i = 0; i < H2_MAX_PINGS_BETWEEN_REQUESTS; i++) assert.equal(guard.ping(), undefined);
    assert.equal(guard.ping(), 'ping-flood');
    for (let i = 0; i < H2_MAX_SETTINGS_BETWEEN_REQUESTS; i++) guard.settings();
    assert.equal(guard.settings(), 'settings-flood');
  });

  it('allows empty DATA frames and refused streams up to their budgets, and a request restores both', () => {
    const guard = createFloodGuard();
    for (let i = 0; i < H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS; i++) assert.equal(guard.empty(), undefined);
    for (let i = 0; i < H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS; i++) assert.equal(guard.rejected(), undefined);
    guard.request();
    for (let i = 0; i < H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS; i++) assert.equal(guard.empty(), undefined);
    assert.equal(guard.empty(), 'empty-frame-flood');
    for (let i = 0; i < H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS; i++) guard.rejected();
    assert.equal(guard.rejected(), 'rejected-stream-flood');
  });

  it('counts resets as debt that answered streams pay back', () => {
    const guard = createFloodGuard();
    for (let i = 0; i < H2_MAX_RESET_DEBT; i++) assert.equal(guard.reset(), undefined);
    guard.answered();
    assert.equal(guard.reset(), undefined, 'one answer paid for one more reset');
    assert.equal(guard.reset(), 'reset-flood');
  });

  it('keeps a client that cancels now and then (deadlines) well inside the budget', () => {
    const guard = createFloodGuard();
    for (let i = 0; i < 100_000; i++) {
      guard.request();
      if (i % 10 === 0) assert.equal(guard.reset(), undefined);
      else guard.answered();
    }
  });
});
