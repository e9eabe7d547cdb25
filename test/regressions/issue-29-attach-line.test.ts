// Issue 29: an attach was invisible when it worked. A real supervisor and an attached boundary over mTLS: the first
// attach, then the supervisor goes away and comes back. Each attach gives exactly one NET:OPEN line, in JSON and in
// shorthand alike, naming the supervisor (as dialled, its address and its certificate), the generation, how long it
// took and after how many failed attempts; and the generation the boundary prints is the supervisor's.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { request } from 'node:http';
import { describe, it } from 'node:test';
import type { AuditSink } from '../../src/telemetry/event.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { restPolicy, startAttached } from '../harness/attached-boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { startTestSupervisor } from '../harness/control.js';
import { logSink } from '../harness/log-sink.js';

const isAttach = (event: OcsfEvent): boolean => event.class_uid === 4001 && event.activity_name === 'Open' && event.firewall_rule?.type === 'control';
const isAttachFailure = (event: OcsfEvent): boolean => event.class_uid === 4001 && event.activity_name === 'Fail' && event.firewall_rule?.type === 'control';

/** One forward-proxy request through the boundary, for the decision event it leaves. */
async function proxyGet(proxyPort: number, url: string): Promise<number> {
  const req = request({ host: '127.0.0.1', port: proxyPort, path: url, headers: { host: new URL(url).host } });
  req.end();
  const [res] = (await once(req, 'response')) as [{ statusCode?: number; resume(): void }];
  res.resume();
  return res.statusCode ?? 0;
}

describe('issue 29: the attach line', () => {
  it('logs one attach line per attach, in JSON and shorthand, with the supervisor, its certificate, the generation, the time and the failed attempts', async (t) => {
    const pki = await makeTestPki();
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(8080, '/a/**') } });
    t.after(() => sup.close());
    // The supervisor is at generation 2 before this boundary exists: a fresh boundary's own count would say 1.
    assert.equal(await sup.supervisor.expect('sb-1', 'operator-expected'), true);
    await sup.writePolicy('sb-1', restPolicy(8080, '/b/**'));
    await sup.waitForLog((line) => line.includes('sandbox configuration changed'));
    assert.equal(sup.supervisor.sandboxes().find((row) => row.sandboxId === 'sb-1')?.generation, 2);

    const json = logSink({ format: 'json' });
    const shorthand = logSink({ format: 'shorthand' });
    const both: AuditSink & { subscribe: typeof json.sink.subscribe } = {
      emit(event) {
        json.sink.emit(event);
        shorthand.sink.emit(event);
      },
      subscribe: (listener) => json.sink.subscribe(listener),
    };
    const boundary = await startAttached(pki, sup, { log: json, audit: both });
    t.after(() => boundary.close());

    const first = await json.waitFor(isAttach, { timeoutMs: 10_000 });
    const served = new X509Certificate(pki.server.certPem);
    assert.equal(first.severity, 'Informational');
    assert.equal(first.unmapped.supervisor, `localhost:${sup.port()}`);
    assert.equal(first.unmapped.supervisor_address, '127.0.0.1');
    const certificate = first.unmapped.supervisor_certificate as { subject: string; san: string; issuer: string; fingerprint256: string };
    assert.equal(certificate.fingerprint256, served.fingerprint256);
    assert.equal(certificate.subject, served.subject);
    assert.equal(certificate.issuer, served.issuer);
    assert.match(certificate.san, /DNS:localhost/);
    assert.equal(first.unmapped.policy_generation, 2);
    assert.equal(first.unmapped.reattach, false);
    assert.equal(first.unmapped.failed_attempts, 0);
    assert.equal(typeof first.unmapped.after_ms, 'number');
    assert.equal(first.unmapped.policy_result, 'applied');

    // The same number on both sides: the policy in force, its CONFIG line and a decision made with it.
    const state = await boundary.waitState((s) => s.phase === 'attached');
    assert.equal(state.policy.localGeneration, 2);
    const loaded = await json.waitFor((e) => e.class_uid === 5019 && e.unmapped.policy_hash !== undefined && e.firewall_rule?.type === 'control');
    assert.equal(loaded.unmapped.policy_generation, 2);
    assert.equal(await proxyGet(boundary.proxyPort, 'http://denied.example.test/'), 403);
    const decision = await json.waitFor((e) => e.action_id !== undefined);
    assert.equal(decision.unmapped.policy_generation, 2);
    await sup.waitFor((event) => event.type === 'status' && event.generation === 2);
    const row = sup.supervisor.sandboxes().find((r) => r.instanceId === 'pod-1');
    assert.equal(row?.generation, 2);
    assert.equal(row?.effectiveGeneration, 2);

    // The supervisor goes away; the boundary fails at least once; then a fresh supervisor on the same port.
    await sup.supervisor.close();
    await json.waitFor(isAttachFailure, { timeoutMs: 10_000 });
    await sup.restart();
    const second = await json.waitFor((e) => isAttach(e) && e.unmapped.reattach === true, { timeoutMs: 15_000 });
    const events = json.events();
    const failures = events.slice(events.indexOf(first), events.indexOf(second)).filter(isAttachFailure).length;
    assert.ok(failures >= 1);
    assert.equal(second.unmapped.failed_attempts, failures);
    assert.equal(second.unmapped.policy_generation, 2);
    assert.equal(second.unmapped.policy_result, 'unchanged');
    assert.ok((second.unmapped.after_ms as number) >= 0);
    assert.equal(sup.supervisor.sandboxes().find((r) => r.instanceId === 'pod-1')?.generation, 2);

    // Exactly one line per attach, in each format; shorthand keeps the message.
    assert.equal(json.events().filter(isAttach).length, 2);
    const lines = shorthand.lines().filter((line) => line.includes('OCSF NET:OPEN [INFO]') && line.includes('engine:control'));
    assert.equal(lines.length, 2, shorthand.text());
    assert.match(lines[0] ?? '', new RegExp(`\\[msg:attached to supervisor localhost:${sup.port()} \\(127\\.0\\.0\\.1\\), certificate CN=127\\.0\\.0\\.1 .*sha256 [0-9A-F]{16}…, at generation 2 .*after 0 failed attempts\\]`));
    assert.match(lines[1] ?? '', new RegExp(`\\[msg:re-attached to supervisor .*at generation 2 .*after ${failures} failed attempts?\\]`));
    const effective = shorthand.lines().find((line) => line.includes('CONFIG:LOADED') && line.includes('is effective'));
    assert.match(effective ?? shorthand.text(), /\[version:2 hash:[0-9a-f]+\] \[msg:policy generation 2 from supervisor .* is effective\]/);
  });
});
