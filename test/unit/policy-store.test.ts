// The policy store: fail-closed start, generation stamping on swap, subscribers, withGeneration, the empty
// policy, and the V15 reload check.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore, emptyPolicy, reloadIssues, withGeneration } from '../../src/policy/store.js';
import type { Policy } from '../../src/policy/types.js';

const API = 'version: 1\nnetwork_policies:\n  api:\n    endpoints: [{ host: api.example.com, port: 443 }]\n';
const DB = 'version: 1\nnetwork_policies:\n  db:\n    endpoints: [{ host: db.example.com, port: 5432, protocol: tcp }]\n';

describe('emptyPolicy', () => {
  it('denies everything with reason no-policy at generation 0', () => {
    const policy = emptyPolicy();
    assert.equal(policy.generation, 0);
    assert.deepEqual(policy.endpointsForHost('api.example.com'), []);
    const decision = decide(policy, { adapter: 'connect', host: 'api.example.com', port: 443 });
    assert.equal(decision.verdict, 'deny');
    assert.equal(decision.reason, 'no-policy');
    assert.ok(Object.isFrozen(policy));
  });

  it('has the hash of a policy without network rules, since both deny everything', () => {
    assert.equal(emptyPolicy().hash, parsePolicy('version: 1\n').hash);
    assert.notEqual(emptyPolicy().hash, parsePolicy(API).hash);
  });
});

describe('withGeneration', () => {
  it('returns a frozen copy with the new generation and leaves the original alone', () => {
    const policy = parsePolicy(API);
    const stamped = withGeneration(policy, 5);
    assert.equal(stamped.generation, 5);
    assert.equal(policy.generation, 0);
    assert.equal(stamped.hash, policy.hash);
    assert.equal(stamped.endpoints, policy.endpoints);
    assert.ok(Object.isFrozen(stamped));
    assert.equal(stamped.endpointsForHost('api.example.com').length, 1);
  });

  it('refuses a negative or fractional generation', () => {
    assert.throws(() => withGeneration(emptyPolicy(), -1), RangeError);
    assert.throws(() => withGeneration(emptyPolicy(), 1.5), RangeError);
  });
});

describe('createPolicyStore', () => {
  it('starts fail-closed with the empty policy and no policy loaded', () => {
    const store = createPolicyStore();
    assert.equal(store.hasPolicy(), false);
    assert.equal(store.current().generation, 0);
    assert.equal(decide(store.current(), { adapter: 'dns', host: 'api.example.com', port: 443 }).reason, 'no-policy');
  });

  it('stamps generation previous + 1 on every swap and makes it current', () => {
    const store = createPolicyStore();
    const first = store.swap(parsePolicy(API));
    assert.equal(first.generation, 1);
    assert.equal(store.hasPolicy(), true);
    assert.equal(store.current(), first);
    const second = store.swap(parsePolicy(API));
    assert.equal(second.generation, 2);
    assert.equal(decide(store.current(), { adapter: 'connect', host: 'api.example.com', port: 443 }).generation, 2);
  });

  it('stamps a given generation when it is newer, and previous + 1 otherwise: generations never repeat or go back', () => {
    const store = createPolicyStore();
    assert.equal(store.swap(parsePolicy(API), 5).generation, 5);
    assert.equal(store.swap(parsePolicy(DB), 5).generation, 6);
    assert.equal(store.swap(parsePolicy(API), 3).generation, 7);
    assert.equal(store.swap(parsePolicy(API), 9).generation, 9);
    assert.equal(store.swap(parsePolicy(API), 1.5).generation, 10);
    assert.equal(store.swap(parsePolicy(API)).generation, 11);
  });

  it('tells subscribers the next and previous policy, until they unsubscribe', () => {
    const store = createPolicyStore();
    const seen: [number, number][] = [];
    const unsubscribe = store.subscribe((next: Policy, previous: Policy) => seen.push([next.generation, previous.generation]));
    store.swap(parsePolicy(API));
    store.swap(parsePolicy(DB));
    unsubscribe();
    unsubscribe();
    store.swap(parsePolicy(API));
    assert.deepEqual(seen, [
      [1, 0],
      [2, 1],
    ]);
  });

  it('still swaps and notifies every subscriber when one of them throws', () => {
    const store = createPolicyStore();
    let later = 0;
    store.subscribe(() => {
      throw new Error('listener broke');
    });
    store.subscribe(() => {
      later++;
    });
    assert.throws(() => store.swap(parsePolicy(API)), AggregateError);
    assert.equal(store.current().generation, 1);
    assert.equal(later, 1);
  });

  it('keeps separate stores independent', () => {
    const a = createPolicyStore();
    const b = createPolicyStore();
    a.swap(parsePolicy(API));
    assert.equal(b.hasPolicy(), false);
    assert.equal(b.current().generation, 0);
  });
});

describe('reloadIssues (V15)', () => {
  it('rejects the first protocol tcp endpoint on a running boundary without live capture', () => {
    const issues = reloadIssues(parsePolicy(API), parsePolicy(DB), { liveCapture: false });
    assert.equal(issues[0]?.code, 'POLICY_TCP_RELOAD');
    assert.equal(issues[0]?.path, 'network_policies.db.endpoints[0]');
  });

  it('accepts it when capture can be installed live, or when tcp was there from the start', () => {
    assert.deepEqual(reloadIssues(parsePolicy(API), parsePolicy(DB), { liveCapture: true }), []);
    assert.deepEqual(reloadIssues(parsePolicy(DB), parsePolicy(DB), { liveCapture: false }), []);
    assert.deepEqual(reloadIssues(parsePolicy(DB), parsePolicy(API), { liveCapture: false }), []);
  });
});
