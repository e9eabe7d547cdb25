// Counters made by telemetry/metrics.ts count in plain numbers and hand them to prom-client when it collects
// (issue 33: prom-client's label checks and hashing were about a third of a policy-DNS answer's CPU). What a
// scrape shows must be what prom-client alone would have shown.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { createCounter, type MetricSpec } from '../../src/telemetry/metrics.js';

const CLOSED = {
  name: 'test_tally_total',
  help: 'closed labels',
  type: 'counter',
  unit: '',
  labels: { rcode: ['NOERROR', 'NXDOMAIN'], outcome: ['mapped', 'refused'] },
  scope: 'boundary',
} as const satisfies MetricSpec;

const RUNTIME = {
  name: 'test_tally_runtime_total',
  help: 'a runtime label',
  type: 'counter',
  unit: '',
  labels: { verdict: ['allow', 'deny'] },
  runtimeLabels: { policy: 'the loaded policy names' },
  scope: 'boundary',
} as const satisfies MetricSpec;

const PLAIN = { name: 'test_tally_plain_total', help: 'no labels', type: 'counter', unit: '', labels: {}, scope: 'boundary' } as const satisfies MetricSpec;

describe('counter tallies', () => {
  it('shows every increment at the next scrape, values outside a closed set as other, presets at zero', async () => {
    const registry = new Registry();
    const counter = createCounter(registry, CLOSED);
    for (let i = 0; i < 3; i++) counter.inc({ rcode: 'NOERROR', outcome: 'mapped' });
    counter.inc({ rcode: 'NXDOMAIN', outcome: 'refused' }, 5);
    counter.inc({ rcode: 'SERVFAIL' as 'NOERROR', outcome: 'mapped' });
    let text = await registry.metrics();
    assert.match(text, /^test_tally_total\{rcode="NOERROR",outcome="mapped"\} 3$/m);
    assert.match(text, /^test_tally_total\{rcode="NXDOMAIN",outcome="refused"\} 5$/m);
    assert.match(text, /^test_tally_total\{rcode="NXDOMAIN",outcome="mapped"\} 0$/m);
    assert.match(text, /^test_tally_total\{rcode="other",outcome="mapped"\} 1$/m);
    counter.inc({ rcode: 'NOERROR', outcome: 'mapped' });
    text = await registry.metrics();
    assert.match(text, /^test_tally_total\{rcode="NOERROR",outcome="mapped"\} 4$/m, 'a second scrape adds only what came since');
  });

  it('creates a runtime-labelled series on an increment by zero, and counts a label-free counter', async () => {
    const registry = new Registry();
    const runtime = createCounter(registry, RUNTIME);
    const plain = createCounter(registry, PLAIN);
    runtime.inc({ verdict: 'deny', policy: 'pypi' }, 0);
    runtime.inc({ verdict: 'allow', policy: 'github' });
    plain.inc({});
    plain.inc({}, 2);
    const text = await registry.metrics();
    assert.match(text, /^test_tally_runtime_total\{verdict="deny",policy="pypi"\} 0$/m);
    assert.match(text, /^test_tally_runtime_total\{verdict="allow",policy="github"\} 1$/m);
    assert.match(text, /^test_tally_plain_total 3$/m);
  });

  it('counts a bound series as inc counts it, a value outside its closed set as other', async () => {
    const registry = new Registry();
    const counter = createCounter(registry, CLOSED);
    const mapped = counter.bind({ rcode: 'NOERROR', outcome: 'mapped' });
    const other = counter.bind({ rcode: 'SERVFAIL' as 'NOERROR', outcome: 'refused' });
    mapped.inc();
    counter.inc({ rcode: 'NOERROR', outcome: 'mapped' });
    mapped.inc(3);
    other.inc();
    let text = await registry.metrics();
    assert.match(text, /^test_tally_total\{rcode="NOERROR",outcome="mapped"\} 5$/m);
    assert.match(text, /^test_tally_total\{rcode="other",outcome="refused"\} 1$/m);
    mapped.inc();
    text = await registry.metrics();
    assert.match(text, /^test_tally_total\{rcode="NOERROR",outcome="mapped"\} 6$/m, 'a bound series keeps counting after a scrape');
    const plain = createCounter(registry, PLAIN).bind({});
    plain.inc(2);
    assert.match(await registry.metrics(), /^test_tally_plain_total 2$/m);
  });

  it('includes what a collect hook adds at scrape time, and is read the same through getSingleMetric', async () => {
    const registry = new Registry();
    let offPath = 7;
    createCounter(registry, PLAIN, {
      collect(counter) {
        counter.inc({}, offPath);
        offPath = 0;
      },
    });
    const values = (await registry.getSingleMetric(PLAIN.name)?.get())?.values ?? [];
    assert.equal(values[0]?.value, 7);
  });
});
