import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { createBoundaryMetrics } from '../../src/app/boundary-metrics.js';
import type { ControlState } from '../../src/control/client.js';
import { catalogueEntries, METRICS } from '../../src/app/metric-catalogue.js';
import { createProxyMetrics } from '../../src/proxy/metrics.js';
import { METRIC_TABLE_END, METRIC_TABLE_START, renderMetricTable } from '../../src/telemetry/metric-table.js';
import { createCounter, MetricsOffRegistry } from '../../src/telemetry/metrics.js';

describe('metric catalogue', () => {
  it('names every entry by its key and follows the Prometheus naming conventions', () => {
    for (const [key, spec] of Object.entries(METRICS)) {
      assert.equal(spec.name, key);
      assert.match(spec.name, /^boundary_[a-z0-9_]+$/);
      if (spec.type === 'counter') assert.ok(spec.name.endsWith('_total'), `${spec.name}: a counter ends in _total`);
      else assert.ok(!spec.name.endsWith('_total'), `${spec.name}: only counters end in _total`);
      if (spec.unit === 'seconds') assert.match(spec.name, /_seconds(_total)?$/);
      if (spec.unit === 'bytes') assert.match(spec.name, /_bytes(_total)?$/);
      if (spec.unit === 'info') assert.match(spec.name, /_info$/);
      assert.ok(spec.help.length > 0);
    }
  });

  it('gives every label a non-empty closed set without duplicates, and every histogram sorted buckets', () => {
    for (const spec of catalogueEntries()) {
      for (const [label, values] of Object.entries(spec.labels)) {
        assert.ok(values.length > 0, `${spec.name}{${label}}`);
        assert.equal(new Set(values).size, values.length, `${spec.name}{${label}} has duplicates`);
      }
      if (spec.type !== 'histogram') continue;
      const buckets = spec.buckets ?? [];
      assert.ok(buckets.length > 0, spec.name);
      assert.deepEqual([...buckets].sort((a, b) => a - b), [...buckets]);
    }
  });

  it('is what the metric table of docs/metrics.md shows (regenerate with npm run docs:metrics)', async () => {
    const doc = await readFile(new URL('../../docs/metrics.md', import.meta.url), 'utf8');
    const inDoc = doc.split(METRIC_TABLE_START)[1]?.split(METRIC_TABLE_END)[0]?.trim();
    assert.equal(inDoc, renderMetricTable(catalogueEntries()));
  });
});

describe('metric helpers', () => {
  it('pre-creates every series of a closed-label counter at zero and records an unknown value as other', async () => {
    const registry = new Registry();
    const counter = createCounter(registry, METRICS.boundary_decisions_total);
    counter.inc({ adapter: 'forward', verdict: 'allow' });
    counter.inc({ adapter: 'api.attacker.example' as 'dns', verdict: 'deny' });
    const text = await registry.metrics();
    assert.match(text, /^boundary_decisions_total\{adapter="forward",verdict="allow"\} 1$/m);
    assert.match(text, /^boundary_decisions_total\{adapter="dns",verdict="audit"\} 0$/m);
    assert.match(text, /^boundary_decisions_total\{adapter="other",verdict="deny"\} 1$/m);
    assert.equal(text.includes('attacker'), false);
  });

  it('counts decisions per policy name up to its bound, the rest as other, and decisions of no policy as none', async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    metrics.setPolicies(['github', 'pypi']);
    const outcome = { adapter: 'forward', verdict: 'audit', reason: 'endpoint-allowed', policy: 'github', extra: undefined } as never;
    metrics.countOutcome(outcome);
    metrics.countOutcome({ adapter: 'capture', verdict: 'deny', reason: 'no-endpoint-matched', policy: undefined, extra: undefined } as never);
    metrics.countOutcome({ adapter: 'connect', verdict: 'allow', reason: 'endpoint-allowed', policy: 'not-loaded', extra: undefined } as never);
    const text = await registry.metrics();
    assert.match(text, /^boundary_policy_decisions_total\{verdict="audit",policy="github"\} 1$/m);
    assert.match(text, /^boundary_policy_decisions_total\{verdict="deny",policy="pypi"\} 0$/m);
    assert.match(text, /^boundary_policy_decisions_total\{verdict="deny",policy="none"\} 1$/m);
    assert.match(text, /^boundary_policy_decisions_total\{verdict="allow",policy="other"\} 1$/m);
    assert.match(text, /^boundary_decisions_total\{adapter="transparent",verdict="deny"\} 1$/m);
    assert.match(text, /^boundary_denials_total\{reason="no-endpoint-matched"\} 1$/m);
  });

  it('registers nothing on a metrics-off registry', async () => {
    const registry = new MetricsOffRegistry();
    const metrics = createProxyMetrics(registry);
    metrics.countDecision('forward', 'allow', 'endpoint-allowed');
    metrics.decisionSeconds.observe(0.001);
    assert.equal((await registry.metrics()).trim(), '');
    assert.equal(metrics.now(), 0);
  });
});

describe('boundary-wide metrics', () => {
  it('counts reloads and reconnects from events, and moves event totals up to the control state at each scrape', async () => {
    const registry = new Registry();
    let control = { phase: 'waiting', events: { buffered: 0, sent: 5, dropped: 1 } } as unknown as ControlState;
    const seen: unknown[] = [];
    let logDropped = 0;
    const metrics = createBoundaryMetrics({ registry, version: '9.9.9', ready: () => false, generation: () => 3, control: () => control, logLinesDropped: () => logDropped });
    const sink = metrics.meter({ emit: (event) => seen.push(event) });
    sink.emit({ class: 'CONFIG', activity: 'LOADED', severity: 'INFO', engine: 'control', message: 'policy generation 3 from x is effective' });
    sink.emit({ class: 'CONFIG', activity: 'FAILED', severity: 'MED', message: 'policy /p refused; keeping the last good policy' });
    sink.emit({ class: 'CONFIG', activity: 'LOADED', severity: 'INFO', engine: 'control', message: 'credentials generation 2 applied' });
    sink.emit({ class: 'NET', activity: 'FAIL', severity: 'MED', engine: 'control', message: 'attach failed', unmapped: { error: { kind: 'tls-auth' } } });
    sink.emit({ class: 'NET', activity: 'CLOSE', severity: 'LOW', engine: 'control', message: 'supervisor session ended' });
    assert.equal(seen.length, 5);
    let text = await registry.metrics();
    assert.match(text, /^boundary_policy_reloads_total\{source="control",outcome="loaded"\} 1$/m);
    assert.match(text, /^boundary_policy_reloads_total\{source="file",outcome="refused"\} 1$/m);
    assert.match(text, /^boundary_control_reconnects_total\{kind="tls-auth"\} 1$/m);
    assert.match(text, /^boundary_control_reconnects_total\{kind="session-ended"\} 1$/m);
    assert.match(text, /^boundary_control_state\{state="waiting"\} 1$/m);
    assert.match(text, /^boundary_control_events_total\{outcome="forwarded"\} 5$/m);
    assert.match(text, /^boundary_ready 0$/m);
    assert.match(text, /^boundary_policy_generation 3$/m);
    assert.match(text, /^boundary_build_info\{version="9.9.9",node="v[^"]+"\} 1$/m);
    assert.match(text, /^boundary_log_lines_dropped_total 0$/m);
    logDropped = 12;
    control = { phase: 'attached', events: { buffered: 0, sent: 7, dropped: 1 } } as unknown as ControlState;
    text = await registry.metrics();
    assert.match(text, /^boundary_control_events_total\{outcome="forwarded"\} 7$/m);
    assert.match(text, /^boundary_control_events_total\{outcome="dropped"\} 1$/m);
    assert.match(text, /^boundary_log_lines_dropped_total 12$/m);
  });
});
