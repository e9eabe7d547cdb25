// Perf guard: decide() on a 10,000-endpoint policy stays within 3x of a 10-endpoint one, because host lookup
// is indexed (exact map + wildcard suffix buckets), not a scan. Medians of bounded, timed batches.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { compileGlob, compilePathSelector, compileValueGlob } from '../../src/policy/glob.js';
import { compileHostPattern } from '../../src/policy/match.js';
import { parsePolicy } from '../../src/policy/parse.js';
import type { EgressIntent, Policy } from '../../src/policy/types.js';

const LARGE_ENDPOINTS = 10_000;
const SMALL_ENDPOINTS = 10;
const MAX_RATIO = 3;
const ROUNDS = 41;
const WARMUP_ROUNDS = 5;
const DECIDES_PER_ROUND = 2_000;
/** One match of an adversarial input against a many-wildcard glob; a backtracking regex took seconds here. */
const MAX_ADVERSARIAL_MATCH_MS = 50;

/** Five endpoint shapes per entry: exact L4, exact REST, one-label wildcard, ** wildcard, first-label glob. */
function policyText(endpoints: number): string {
  const lines = ['version: 1', 'network_policies:'];
  for (let i = 0; i < endpoints / 5; i++) {
    lines.push(
      `  svc_${i}:`,
      '    endpoints:',
      `      - { host: api${i}.example.com, port: 443 }`,
      `      - { host: rest${i}.example.com, port: 443, protocol: rest, enforcement: enforce, rules: [{ allow: { method: GET, path: "/v1/**" } }] }`,
      `      - { host: "*.cdn${i}.example.net", port: 443 }`,
      `      - { host: "**.pkg${i}.example.org", ports: [443, 8443] }`,
      `      - { host: "*-ai.region${i}.example.io", port: 443 }`,
      '    binaries: [{ path: "/**" }]',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Hits on every shape, an L7 request, and misses (unknown name, wrong port), spread over the policy. */
function intents(entries: number): EgressIntent[] {
  const out: EgressIntent[] = [];
  for (let k = 0; k < 20; k++) {
    const i = (k * 7919) % entries;
    out.push(
      { adapter: 'connect', host: `api${i}.example.com`, port: 443 },
      { adapter: 'l7', host: `rest${i}.example.com`, port: 443, method: 'GET', path: '/v1/items/1', query: 'a=1' },
      { adapter: 'connect', host: `img.cdn${i}.example.net`, port: 443 },
      { adapter: 'connect', host: `a.b.c.pkg${i}.example.org`, port: 8443 },
      { adapter: 'connect', host: `us-ai.region${i}.example.io`, port: 443 },
      { adapter: 'connect', host: `unknown${i}.example.com`, port: 443 },
      { adapter: 'connect', host: `api${i}.example.com`, port: 22 },
    );
  }
  return out;
}

function medianNsPerDecide(policy: Policy, batch: readonly EgressIntent[]): number {
  const samples: number[] = [];
  let sink = 0;
  for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
    const start = process.hrtime.bigint();
    for (let n = 0; n < DECIDES_PER_ROUND; n++) {
      if (decide(policy, batch[n % batch.length] as EgressIntent).verdict === 'allow') sink++;
    }
    const elapsed = Number(process.hrtime.bigint() - start);
    if (round >= WARMUP_ROUNDS) samples.push(elapsed / DECIDES_PER_ROUND);
  }
  assert.ok(sink > 0);
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)] as number;
}

describe('decide performance', () => {
  it(`decides on ${LARGE_ENDPOINTS} endpoints within ${MAX_RATIO}x of ${SMALL_ENDPOINTS}`, (t) => {
    const large = parsePolicy(policyText(LARGE_ENDPOINTS));
    const small = parsePolicy(policyText(SMALL_ENDPOINTS));
    assert.equal(large.endpoints.length, LARGE_ENDPOINTS);
    assert.equal(small.endpoints.length, SMALL_ENDPOINTS);
    const largeBatch = intents(LARGE_ENDPOINTS / 5);
    const smallBatch = intents(SMALL_ENDPOINTS / 5);
    // The batches must exercise the same branches on both policies.
    const verdicts = (p: Policy, b: readonly EgressIntent[]): string[] => b.slice(0, 7).map((i) => decide(p, i).reason);
    assert.deepEqual(verdicts(large, largeBatch), verdicts(small, smallBatch));
    assert.deepEqual(verdicts(small, smallBatch), [
      'endpoint-allowed', 'rule-allowed', 'endpoint-allowed', 'endpoint-allowed', 'endpoint-allowed',
      'no-endpoint-matched', 'no-endpoint-matched',
    ]);
    const smallNs = medianNsPerDecide(small, smallBatch);
    const largeNs = medianNsPerDecide(large, largeBatch);
    t.diagnostic(`median decide: ${SMALL_ENDPOINTS} endpoints ${smallNs.toFixed(0)} ns, ${LARGE_ENDPOINTS} endpoints ${largeNs.toFixed(0)} ns`);
    assert.ok(largeNs <= smallNs * MAX_RATIO, `10k median ${largeNs.toFixed(0)} ns vs 10 median ${smallNs.toFixed(0)} ns`);
  });
});

describe('glob matching cost', () => {
  // The workload picks the path, query and host; the policy author picks the globs. A regex with several `*`
  // backtracks polynomially in the input (`/*a*a*b` against 4 KiB of `a` took 44 s), stalling every tunnel.
  const cases: [string, () => boolean][] = [
    ['rule path /*a*a*b against a 1.5 KiB segment', () => compileGlob('/*a*a*b').matches(`/${'a'.repeat(1_500)}`)],
    ['rule path /**/a/**/a/**/z against 400 segments', () => compileGlob('/**/a/**/a/**/z').matches('/a'.repeat(400))],
    ['path selector /*a*a*a*b against 300 characters', () => compilePathSelector('/*a*a*a*b').matches(`/${'a'.repeat(300)}`)],
    ['query value *a*a*a*b against 300 characters', () => compileValueGlob('*a*a*a*b').matches('a'.repeat(300))],
    ['host label *a*a*a*a*a*b against a 63-character label', () =>
      compileHostPattern('*a*a*a*a*a*b.example.com', 'wildcard').matches(`${'a'.repeat(63)}.example.com`)],
  ];
  for (const [label, run] of cases) {
    it(`matches ${label} in under ${MAX_ADVERSARIAL_MATCH_MS} ms`, () => {
      const start = process.hrtime.bigint();
      assert.equal(run(), false);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      assert.ok(ms < MAX_ADVERSARIAL_MATCH_MS, `took ${ms.toFixed(1)} ms`);
    });
  }

  it('decides an adversarial path against a many-wildcard rule quickly and still by the rules', () => {
    const policy = parsePolicy(`version: 1
network_policies:
  globs:
    endpoints:
      - host: api.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/*a*a*b" }
`);
    const intent: EgressIntent = { adapter: 'l7', host: 'api.example.com', port: 443, method: 'GET', path: `/${'a'.repeat(1_500)}` };
    const start = process.hrtime.bigint();
    assert.equal(decide(policy, intent).verdict, 'deny');
    assert.ok(Number(process.hrtime.bigint() - start) / 1e6 < MAX_ADVERSARIAL_MATCH_MS);
    assert.equal(decide(policy, { ...intent, path: '/xaya-ab' }).verdict, 'allow');
  });
});
