// Perf guard: decide() on a 10,000-endpoint policy stays within 3x of a 10-endpoint one, because host lookup
// is indexed (exact map + wildcard suffix buckets), not a scan. Medians of bounded, timed batches. Adversarial
// globs cost time linear in their input: 4x the input, at most GROWTH_LIMIT times the CPU.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide } from '../../src/policy/decide.js';
import { compileGlob, compilePathSelector, compileValueGlob } from '../../src/policy/glob.js';
import { compileHostPattern } from '../../src/policy/match.js';
import { parsePolicy } from '../../src/policy/parse.js';
import type { EgressIntent, Policy } from '../../src/policy/types.js';
import { cpuGrowth } from '../harness/cpu-growth.js';

const LARGE_ENDPOINTS = 10_000;
const SMALL_ENDPOINTS = 10;
const MAX_RATIO = 3;
const ROUNDS = 41;
const WARMUP_ROUNDS = 5;
const DECIDES_PER_ROUND = 2_000;
/**
 * CPU for 4x the adversarial input against the CPU for 1x: linear matching gives about 4, a backtracking regex
 * at least 16 (quadratic) and far more with more wildcards (`/*a*a*b` against 4 KiB of `a` took 44 s).
 */
const GROWTH_LIMIT = 8;

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
  // Each case at its largest input size and at a quarter of it.
  const cases: [string, number, (size: number) => boolean][] = [
    ['rule path /*a*a*b against a 1.5 KiB segment', 1_500, (n) => compileGlob('/*a*a*b').matches(`/${'a'.repeat(n)}`)],
    ['rule path /**/a/**/a/**/z against 400 segments', 400, (n) => compileGlob('/**/a/**/a/**/z').matches('/a'.repeat(n))],
    ['path selector /*a*a*a*b against 300 characters', 300, (n) => compilePathSelector('/*a*a*a*b').matches(`/${'a'.repeat(n)}`)],
    ['query value *a*a*a*b against 300 characters', 300, (n) => compileValueGlob('*a*a*a*b').matches('a'.repeat(n))],
    ['host label *a*a*a*a*a*b against a 63-character label', 60, (n) =>
      compileHostPattern('*a*a*a*a*a*b.example.com', 'wildcard').matches(`${'a'.repeat(n)}.example.com`)],
  ];
  for (const [label, size, run] of cases) {
    it(`matches ${label} in time linear with the input`, (t) => {
      assert.equal(run(size), false);
      const growth = cpuGrowth(() => run(size / 4), () => run(size));
      t.diagnostic(`4x the input took ${growth.toFixed(1)}x the CPU`);
      assert.ok(growth < GROWTH_LIMIT, `4x the input took ${growth.toFixed(1)}x the CPU`);
    });
  }

  it('decides an adversarial path against a many-wildcard rule in linear time and still by the rules', (t) => {
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
    const intent = (n: number): EgressIntent => ({ adapter: 'l7', host: 'api.example.com', port: 443, method: 'GET', path: `/${'a'.repeat(n)}` });
    assert.equal(decide(policy, intent(1_500)).verdict, 'deny');
    const growth = cpuGrowth(() => decide(policy, intent(375)), () => decide(policy, intent(1_500)));
    t.diagnostic(`4x the path took ${growth.toFixed(1)}x the CPU`);
    assert.ok(growth < GROWTH_LIMIT, `4x the path took ${growth.toFixed(1)}x the CPU`);
    assert.equal(decide(policy, { ...intent(0), path: '/xaya-ab' }).verdict, 'allow');
  });
});
