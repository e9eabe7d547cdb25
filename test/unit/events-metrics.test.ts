import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { beginOutcome, createProxyMetrics, emitOutcome } from '../../src/proxy/events.js';
import type { AuditEvent } from '../../src/telemetry/event.js';

async function decisionValues(registry: Registry): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric('boundary_proxy_decisions_total');
  assert.ok(metric !== undefined);
  const { values } = await metric.get();
  return Object.fromEntries(values.map((v) => [`${v.labels.adapter}/${v.labels.verdict}/${v.labels.reason}`, v.value]));
}

describe('proxy decision metrics', () => {
  it('counts decisions per label combination, added to the counter whenever it is collected', async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    for (let i = 0; i < 3; i++) metrics.countDecision('forward', 'allow', 'allowed');
    metrics.countDecision('connect', 'deny', 'no-rule-matched');
    metrics.decisions.inc({ adapter: 'forward', verdict: 'allow', reason: 'allowed' });
    assert.deepEqual(await decisionValues(registry), { 'forward/allow/allowed': 4, 'connect/deny/no-rule-matched': 1 });
    // Collected counts are not added twice; later ones are added on the next collection.
    metrics.countDecision('forward', 'allow', 'allowed');
    assert.deepEqual(await decisionValues(registry), { 'forward/allow/allowed': 5, 'connect/deny/no-rule-matched': 1 });
    const text = await registry.metrics();
    assert.match(text, /boundary_proxy_decisions_total\{adapter="forward",verdict="allow",reason="allowed"\} 5/);
    assert.match(text, /boundary_proxy_decisions_total\{adapter="connect",verdict="deny",reason="no-rule-matched"\} 1/);
  });

  it('counts each emitted outcome once and emits its event', async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    const seen: AuditEvent[] = [];
    const o = beginOutcome('forward', 'http', { remoteAddress: '127.0.0.1', remotePort: 1 });
    o.verdict = 'deny';
    o.reason = 'no-rule-matched';
    emitOutcome({ emit: (event) => seen.push(event) }, metrics, o);
    emitOutcome({ emit: (event) => seen.push(event) }, metrics, o);
    assert.equal(seen.length, 2);
    assert.deepEqual(await decisionValues(registry), { 'forward/deny/no-rule-matched': 2 });
  });
});
