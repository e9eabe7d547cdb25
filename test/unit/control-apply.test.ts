import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { createControlApplier } from '../../src/control/apply.js';
import { encodeMessage, type PushMessage } from '../../src/control/messages.js';
import { decodeMessages } from '../../src/control/ndjson.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore, emptyPolicy } from '../../src/policy/store.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { testClock } from '../harness/clock.js';

function policyText(host: string): string {
  return `version: 1\nnetwork_policies:\n  api:\n    name: api\n    endpoints:\n      - host: ${host}\n        port: 443\n`;
}
const hashOf = (text: string): string => parsePolicy(text).hash;
const A = policyText('a.example.test');
const B = policyText('b.example.test');
const BAD = 'version: 2\n';

function setup() {
  const store = createPolicyStore();
  const events: AuditEvent[] = [];
  const replaced: unknown[] = [];
  const clock = testClock();
  const applier = createControlApplier({
    store,
    parsePolicy,
    emptyPolicy,
    credentials: {
      replace(providers) {
        if (providers.some((p) => p.name === 'broken')) throw new Error('CREDENTIALS_INVALID: broken provider');
        replaced.push(providers);
      },
    },
    sink: { emit: (event) => events.push(event) },
    now: clock.now,
  });
  return { store, events, replaced, applier, clock };
}

const admitted = (generation: number, policy: string | undefined, extra: { policyHash?: string; [k: string]: unknown } = {}) => ({
  kind: 'admitted' as const,
  sessionId: 's-1',
  generation,
  policyHash: extra.policyHash ?? hashOf(policy ?? A),
  ...(policy === undefined ? {} : { policy }),
  credentialsHash: 'c0',
  credentials: [],
  settings: { failureMode: 'fail_closed' as const },
  ...extra,
});

describe('applying delivered policy and credentials', () => {
  it('applies the admission snapshot through the store, reports effective and emits CONFIG:LOADED', async () => {
    const { store, events, applier } = setup();
    const outcomes = await applier.applyAdmitted(admitted(3, A));
    assert.equal(store.hasPolicy(), true);
    assert.equal(store.current().hash, hashOf(A));
    // The supervisor's generation, not a count of swaps here: both ends name one number (issue 29).
    assert.equal(store.current().generation, 3);
    assert.deepEqual(outcomes.at(-1)?.status, { kind: 'status', generation: 3, policyHash: hashOf(A), state: 'effective', credentialsHash: 'c0' });
    const loaded = events.find((e) => e.class === 'CONFIG' && e.activity === 'LOADED' && e.policyHash !== undefined);
    assert.equal(loaded?.generation, 3);
    assert.equal(loaded?.unmapped?.controlGeneration, 3);
    assert.deepEqual(applier.held(), { heldPolicyHash: hashOf(A), heldGeneration: 3, heldCredentialsHash: 'c0' });
    assert.equal(applier.state().effective, true);
  });

  it('applies only strictly newer pushes, in generation order (CP-08)', async () => {
    const { store, applier } = setup();
    await applier.applyAdmitted(admitted(3, A));
    assert.equal((await applier.applyPolicy({ kind: 'policy', generation: 3, policyHash: hashOf(B), policy: B })).result, 'ignored');
    assert.equal((await applier.applyPolicy({ kind: 'policy', generation: 2, policyHash: hashOf(B), policy: B })).result, 'ignored');
    assert.equal(store.current().hash, hashOf(A));
    const newer = await applier.applyPolicy({ kind: 'policy', generation: 4, policyHash: hashOf(B), policy: B });
    assert.equal(newer.result, 'applied');
    assert.equal(newer.status?.generation, 4);
    assert.equal(store.current().hash, hashOf(B));
    assert.equal(store.current().generation, 4);
  });

  it('acknowledges a newer generation with an identical hash without re-applying (CP-06)', async () => {
    const { store, applier } = setup();
    await applier.applyAdmitted(admitted(3, A));
    const outcome = await applier.applyPolicy({ kind: 'policy', generation: 5, policyHash: hashOf(A), policy: A });
    assert.equal(outcome.result, 'unchanged');
    assert.equal(outcome.status?.state, 'effective');
    assert.equal(outcome.status?.generation, 5);
    // Re-stamped, not re-applied: the policy in force is the supervisor's generation 5 too.
    assert.equal(store.current().generation, 5);
    assert.equal(store.current().hash, hashOf(A));
  });

  it('accepts an admission that omits the policy when the held hash matches, re-applying nothing', async () => {
    const { store, applier } = setup();
    await applier.applyAdmitted(admitted(3, A));
    const outcomes = await applier.applyAdmitted(admitted(7, undefined, { credentials: undefined }));
    assert.equal(outcomes.at(-1)?.result, 'unchanged');
    assert.equal(store.current().generation, 7);
    assert.equal(applier.held().heldGeneration, 7);
  });

  it('treats an admission that omits a policy it does not hold as a protocol error', async () => {
    const { applier } = setup();
    await assert.rejects(applier.applyAdmitted(admitted(3, undefined)), { code: 'CONTROL_MESSAGE_INVALID' });
  });

  it('publishes a deny-all quarantine and acks FAILED when a push is invalid in fail_closed mode (CP-03)', async () => {
    const { store, events, applier } = setup();
    await applier.applyAdmitted(admitted(3, A));
    const outcome = await applier.applyPolicy({ kind: 'policy', generation: 4, policyHash: 'bad', policy: BAD });
    assert.equal(outcome.result, 'failed');
    assert.equal(outcome.status?.state, 'failed');
    assert.equal(outcome.status?.error?.code, 'POLICY_INVALID');
    assert.equal(store.current().endpoints.length, 0);
    assert.equal(store.current().hash, emptyPolicy().hash);
    assert.equal(store.current().generation, 4);
    assert.equal(applier.state().quarantined, true);
    assert.equal(applier.state().effective, false);
    assert.ok(events.some((e) => e.class === 'CONFIG' && e.activity === 'FAILED'));
  });

  it('keeps the previous policy when a push is invalid in retain_last_valid mode (CP-04)', async () => {
    const { store, applier } = setup();
    await applier.applyAdmitted(admitted(3, A, { settings: { failureMode: 'retain_last_valid' } }));
    const outcome = await applier.applyPolicy({ kind: 'policy', generation: 4, policyHash: 'bad', policy: BAD });
    assert.equal(outcome.status?.state, 'failed');
    assert.equal(store.current().hash, hashOf(A));
    assert.equal(applier.state().effective, true);
    assert.equal(applier.state().lastError?.kind, 'policy');
  });

  it('fails closed on an invalid first policy even when retaining is configured', async () => {
    const { store, applier } = setup();
    const outcomes = await applier.applyAdmitted(admitted(1, BAD, { policyHash: 'bad', settings: { failureMode: 'retain_last_valid' } }));
    assert.equal(outcomes.at(-1)?.status?.state, 'failed');
    assert.equal(store.current().endpoints.length, 0);
    assert.equal(applier.state().effective, false);
  });

  it('applies credentials before the policy, skips an unchanged set and reports a bad one as failed', async () => {
    const { applier, replaced, events } = setup();
    await applier.applyAdmitted(admitted(1, A, { credentialsHash: 'c1', credentials: [{ name: 'api', env: { KEY: 'v' } }] }));
    assert.equal(replaced.length, 1);
    assert.equal((await applier.applyCredentials({ kind: 'credentials', generation: 2, credentialsHash: 'c1', credentials: [] })).result, 'unchanged');
    assert.equal((await applier.applyCredentials({ kind: 'credentials', generation: 2, credentialsHash: 'c2', credentials: [] })).result, 'ignored');
    const failed = await applier.applyCredentials({ kind: 'credentials', generation: 3, credentialsHash: 'c3', credentials: [{ name: 'broken', env: {} }] });
    assert.equal(failed.result, 'failed');
    assert.equal(failed.status?.error?.kind, 'credentials');
    assert.equal(replaced.length, 1);
    assert.ok(!JSON.stringify(events).includes('"v"'), 'no credential value in any event');
  });

  it('fails a candidate that the reload preflight rejects, as standalone mode would', async () => {
    const store = createPolicyStore();
    const applier = createControlApplier({
      store,
      parsePolicy,
      emptyPolicy,
      sink: { emit() {} },
      now: () => 0,
      preflight: () => [{ code: 'POLICY_TCP_RELOAD', path: 'network_policies.api', message: 'restart needed' }],
    });
    const outcomes = await applier.applyAdmitted(admitted(1, A));
    assert.equal(outcomes.at(-1)?.status?.error?.code, 'POLICY_INVALID');
  });

  it('converges when driven by an NDJSON stream of pushes, the last generation winning', async () => {
    const { store, applier } = setup();
    await applier.applyAdmitted(admitted(1, A));
    const pushes: PushMessage[] = [
      { kind: 'policy', generation: 2, policyHash: hashOf(B), policy: B },
      { kind: 'settings', generation: 3, settings: { failureMode: 'retain_last_valid' } },
      { kind: 'policy', generation: 2, policyHash: hashOf(A), policy: A },
      { kind: 'policy', generation: 4, policyHash: hashOf(A), policy: A },
    ];
    const results: string[] = [];
    for await (const push of decodeMessages(Readable.from(pushes.map(encodeMessage)), { expect: ['policy', 'settings'] })) {
      results.push(push.kind === 'policy' ? (await applier.applyPolicy(push)).result : (await applier.applySettings(push)).result);
    }
    assert.deepEqual(results, ['applied', 'applied', 'ignored', 'applied']);
    assert.equal(store.current().hash, hashOf(A));
    assert.equal(applier.state().settings.failureMode, 'retain_last_valid');
  });
});
