import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { beginOutcome, emitOutcome, outcomeEvent, type ReasonCode, settle } from '../../src/chain/events.js';
import { createProxyMetrics } from '../../src/proxy/metrics.js';
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
    for (let i = 0; i < 3; i++) metrics.countDecision('forward', 'allow', 'endpoint-allowed');
    metrics.countDecision('connect', 'deny', 'no-rule-matched');
    metrics.countDecision('forward', 'allow', 'endpoint-allowed');
    assert.deepEqual(await decisionValues(registry), { 'forward/allow/endpoint-allowed': 4, 'connect/deny/no-rule-matched': 1 });
    // Collected counts are not added twice; later ones are added on the next collection.
    metrics.countDecision('forward', 'allow', 'endpoint-allowed');
    assert.deepEqual(await decisionValues(registry), { 'forward/allow/endpoint-allowed': 5, 'connect/deny/no-rule-matched': 1 });
    const text = await registry.metrics();
    assert.match(text, /boundary_proxy_decisions_total\{adapter="forward",verdict="allow",reason="endpoint-allowed"\} 5/);
    assert.match(text, /boundary_proxy_decisions_total\{adapter="connect",verdict="deny",reason="no-rule-matched"\} 1/);
  });

  it('counts each emitted outcome once and emits its event', async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    const seen: AuditEvent[] = [];
    const o = beginOutcome('forward', 'http', { remoteAddress: '127.0.0.1', remotePort: 1 });
    settle(o, 'deny', 'no-rule-matched', 'no rule allows it', 403);
    emitOutcome({ emit: (event) => seen.push(event) }, metrics, o);
    emitOutcome({ emit: (event) => seen.push(event) }, metrics, o);
    assert.equal(seen.length, 2);
    assert.deepEqual(await decisionValues(registry), { 'forward/deny/no-rule-matched': 2 });
  });

  it('counts a bound DNS decision on every increment, across collections, under the policy label known at each', async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    const allowed = metrics.bindDns('allow', 'endpoint-allowed', 'github');
    const refused = metrics.bindDns('deny', 'no-endpoint-matched', undefined);
    allowed.inc();
    allowed.inc();
    refused.inc();
    assert.deepEqual(await decisionValues(registry), { 'dns/allow/endpoint-allowed': 2, 'dns/deny/no-endpoint-matched': 1 });
    // A collection resets what it added; the bound counts go on from there.
    allowed.inc();
    assert.deepEqual(await decisionValues(registry), { 'dns/allow/endpoint-allowed': 3, 'dns/deny/no-endpoint-matched': 1 });
    // 'github' was no policy label when bound (other); once the policy names it, the same bound count goes to it.
    metrics.setPolicies(['github']);
    allowed.inc();
    const text = await registry.metrics();
    assert.match(text, /boundary_policy_decisions_total\{verdict="allow",policy="other"\} 3/);
    assert.match(text, /boundary_policy_decisions_total\{verdict="allow",policy="github"\} 1/);
    assert.match(text, /boundary_policy_decisions_total\{verdict="deny",policy="none"\} 1/);
  });

  it('records a label value outside its closed set as other, never as given', async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    metrics.countDecision('forward', 'deny', 'api.attacker.example' as ReasonCode);
    metrics.clientErrors.inc({ reason: 'api.attacker.example' as 'malformed' });
    const text = await registry.metrics();
    assert.match(text, /boundary_proxy_decisions_total\{adapter="forward",verdict="deny",reason="other"\} 1/);
    assert.match(text, /boundary_proxy_client_errors_total\{reason="other"\} 1/);
    assert.match(text, /boundary_proxy_client_errors_total\{reason="head-too-large"\} 0/);
    assert.equal(text.includes('attacker'), false);
  });
});

describe('settle', () => {
  it('sets verdict, reason, detail and status together, and the event carries them under their names', () => {
    const o = beginOutcome('connect', 'net', {});
    settle(o, 'fail', 'dial-failed', 'api.example.test:443: refused: connect ECONNREFUSED', 502);
    assert.equal(o.verdict, 'fail');
    assert.equal(o.reason, 'dial-failed');
    assert.equal(o.detail, 'api.example.test:443: refused: connect ECONNREFUSED');
    assert.equal(o.status, 502);
    const event: AuditEvent = outcomeEvent(o);
    assert.equal(event.detail, 'api.example.test:443: refused: connect ECONNREFUSED');
    assert.equal(event.unmapped?.reason_code, 'dial-failed');
    assert.equal(event.unmapped?.status_code, 502);
  });

  it('clears the status when given undefined', () => {
    const o = beginOutcome('l7', 'http', {});
    settle(o, 'deny', 'no-rule-matched', 'first', 403);
    settle(o, 'deny', 'websocket-binary-credentialed', 'after the 101', undefined);
    assert.equal(o.status, undefined);
    assert.equal('status_code' in (outcomeEvent(o).unmapped ?? {}), false);
  });
});

