import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMappingRefusals, MAPPING_REFUSAL_REPORT_INTERVAL_MS } from '../../src/dns/mapping-refusals.js';
import { testClock } from '../harness/clock.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { collectingSink } from '../harness/dns-stack.js';

describe('mapping refusal findings', () => {
  it('emits the first refusal of each kind at once and the rest once per interval with their count', () => {
    const clock = testClock();
    const sink = collectingSink();
    const refusals = createMappingRefusals({ sink, now: clock.now });
    const policy = stubPolicy([{ host: '*.example.test', ports: [443] }]);
    const outcomes = [];
    // Three intervals of a flood: 1,000 refusals each, 10 ms apart, plus one live-limit refusal in the middle.
    for (let i = 0; i < 3_000; i++) {
      outcomes.push(refusals.refuse('rate-limited', `n${i}.example.test`, 'limited', policy));
      if (i === 1_500) refusals.refuse('live-limit', 'x.example.test', 'full', policy);
      clock.advance(MAPPING_REFUSAL_REPORT_INTERVAL_MS / 1_000);
    }
    refusals.refuse('rate-limited', 'after.example.test', 'limited', policy);
    const findings = sink.events.map((e) => [e.class, e.statusDetail, e.unmapped?.count]);
    assert.deepEqual(findings, [
      ['FINDING', 'policy_dns_mapping_rate', 1],
      ['FINDING', 'policy_dns_mapping_rate', 1_000],
      ['FINDING', 'policy_dns_mapping_limit', 1],
      ['FINDING', 'policy_dns_mapping_rate', 1_000],
      ['FINDING', 'policy_dns_mapping_rate', 1_000],
    ]);
    const total = sink.events.filter((e) => e.statusDetail === 'policy_dns_mapping_rate').reduce((n, e) => n + Number(e.unmapped?.count), 0);
    assert.equal(total, 3_001, 'every refusal is counted in some finding');
    assert.deepEqual(outcomes[0], { rcode: 'SERVFAIL', answers: [], ttlSeconds: undefined, cacheUntil: undefined, statusDetail: 'policy_dns_mapping_rate' });
    assert.equal(refusals.refuse('exhausted', 'y.example.test', 'full', policy).statusDetail, 'policy_dns_pool_exhausted');
  });

  it('reports refusals held back at the first tick after their interval, and nothing when there are none', () => {
    const clock = testClock();
    const sink = collectingSink();
    const refusals = createMappingRefusals({ sink, now: clock.now });
    const policy = stubPolicy([{ host: '*.example.test', ports: [443] }]);
    for (let i = 0; i < 5; i++) refusals.refuse('live-limit', `n${i}.example.test`, 'full', policy);
    refusals.tick(policy);
    assert.equal(sink.events.length, 1, 'within the interval: held');
    clock.advance(MAPPING_REFUSAL_REPORT_INTERVAL_MS);
    refusals.tick(policy);
    refusals.tick(policy);
    assert.deepEqual(sink.events.map((e) => [e.unmapped?.count, e.dst?.host]), [[1, 'n0.example.test'], [4, 'n4.example.test']]);
    clock.advance(MAPPING_REFUSAL_REPORT_INTERVAL_MS);
    refusals.tick(policy);
    assert.equal(sink.events.length, 2);
  });
});
