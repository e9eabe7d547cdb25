// Issue 12, "no flapping": two live boundary processes with one (sandbox, instance) identity. The newer attach
// wins, the older is told `superseded`, reports it on readiness and stops re-attaching; a plain restart
// (old process gone, new boot id) is not a conflict. Real mTLS HTTP/2 on loopback; no sleeps.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { controlReadiness } from '../../src/control/readiness.js';
import type { SupervisorEvent } from '../../src/supervisor/supervisor.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor, type TestSupervisor } from '../harness/control.js';

/** Two attaches in a fight: the first process's and the one that took over. More means they flap. */
const MAX_ATTACHES = 3;
const CONFLICT_LOG = 'two live boundary processes attached as one instance';
const WARN = 40;

function record(sup: TestSupervisor): SupervisorEvent[] {
  const events: SupervisorEvent[] = [];
  sup.supervisor.subscribe((event) => events.push(event));
  return events;
}

function conflictWarnings(sup: TestSupervisor): { level: number; bootId: string; supersededBootId: string; remote: string; supersededRemote: string }[] {
  return sup.logs
    .map((line) => JSON.parse(line) as { level: number; msg: string; bootId: string; supersededBootId: string; remote: string; supersededRemote: string })
    .filter((line) => line.msg.startsWith(CONFLICT_LOG));
}

describe('two live boundaries with one identity (issue 12)', () => {
  let pki: TestPki;
  before(async () => {
    pki = await makeTestPki();
  });

  it('supersedes the older process once: it reports superseded on readiness, keeps its policy and stops re-attaching', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { [pki.sandboxId]: policyYaml('a.example.test') } });
    t.after(() => sup.close());
    const events = record(sup);
    const older = makeTestClient(pki, { port: sup.port(), instanceId: 'pod-1', bootId: 'boot-a' });
    t.after(() => older.client.close());
    await older.client.start();
    await sup.waitFor((e) => e.type === 'status' && e.instanceId === 'pod-1');
    await older.waitState((s) => s.policy.effective);
    const heldHash = older.store.current().hash;

    const newer = makeTestClient(pki, { port: sup.port(), instanceId: 'pod-1', bootId: 'boot-b' });
    t.after(() => newer.client.close());
    await newer.client.start();
    const superseded = await older.waitState((s) => s.phase === 'superseded');
    assert.deepEqual(
      { bootId: superseded.superseded?.bootId, sandboxId: superseded.superseded?.sandboxId, instanceId: superseded.superseded?.instanceId },
      { bootId: 'boot-b', sandboxId: pki.sandboxId, instanceId: 'pod-1' },
    );
    const readiness = controlReadiness(older.client.state());
    assert.equal(readiness.ready, false);
    assert.ok(
      readiness.reasons.includes(`control-superseded: another boundary process (boot boot-b) attached as sandbox ${pki.sandboxId} instance pod-1`),
      readiness.reasons.join('; '),
    );
    assert.equal(older.client.state().nextAttemptAt, undefined, 'no re-attach is scheduled');
    assert.equal(older.store.current().hash, heldHash, 'the superseded boundary keeps enforcing what it had');

    // A round trip through the winner after the takeover: a new policy reaches it and is acknowledged. The
    // loser's backoff (20-200 ms in the harness) would have re-attached many times over by then if it still tried.
    await newer.waitState((s) => s.policy.effective);
    await sup.writePolicy(pki.sandboxId, policyYaml('b.example.test'));
    await sup.supervisor.reload();
    await newer.waitState((s) => s.policy.effective && s.policy.policyHash !== heldHash);
    const acked = await sup.waitFor((e) => e.type === 'status' && e.detail === 'effective' && (e.generation ?? 0) >= 2);
    assert.ok(acked);

    const attaches = events.filter((e) => e.type === 'attached' && e.instanceId === 'pod-1');
    assert.ok(attaches.length <= MAX_ATTACHES, `${attaches.length} attaches`);
    assert.equal(attaches.length, 2);
    assert.equal(events.filter((e) => e.type === 'superseded').length, 1);
    assert.equal(older.client.state().phase, 'superseded');
    assert.equal(newer.client.state().superseded, undefined);
    const warnings = conflictWarnings(sup);
    assert.equal(warnings.length, 1);
    const [warning] = warnings;
    assert.equal(warning?.level, WARN);
    assert.equal(warning?.bootId, 'boot-b');
    assert.equal(warning?.supersededBootId, 'boot-a');
    assert.ok(warning?.remote.startsWith('127.0.0.1') && warning.supersededRemote.startsWith('127.0.0.1'), JSON.stringify(warning));
  });

  it('does not call a plain restart (old process closed, new boot id, same instance) superseded', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { [pki.sandboxId]: policyYaml('a.example.test') } });
    t.after(() => sup.close());
    const events = record(sup);
    const first = makeTestClient(pki, { port: sup.port(), instanceId: 'pod-2', bootId: 'boot-c' });
    await first.client.start();
    await sup.waitFor((e) => e.type === 'status' && e.instanceId === 'pod-2');
    await first.client.close();
    await sup.waitFor((e) => e.type === 'detached' && e.instanceId === 'pod-2');

    const restarted = makeTestClient(pki, { port: sup.port(), instanceId: 'pod-2', bootId: 'boot-d' });
    t.after(() => restarted.client.close());
    await restarted.client.start();
    await restarted.waitState((s) => s.policy.effective);
    await sup.waitFor((e) => e.type === 'status' && e.instanceId === 'pod-2' && events.filter((x) => x.type === 'attached').length === 2);
    assert.equal(controlReadiness(restarted.client.state()).ready, true);
    assert.equal(restarted.client.state().superseded, undefined);
    assert.equal(events.filter((e) => e.type === 'superseded').length, 0);
    assert.equal(conflictWarnings(sup).length, 0);
    assert.deepEqual(
      sup.supervisor.sandboxes().map((row) => [row.instanceId, row.bootId, row.attached]),
      [['pod-2', 'boot-d', true]],
    );
  });

  it('does not call a second attach of the same process superseded, even while its old session is open', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { [pki.sandboxId]: policyYaml('a.example.test') } });
    t.after(() => sup.close());
    const one = makeTestClient(pki, { port: sup.port(), instanceId: 'pod-3', bootId: 'boot-e' });
    t.after(() => one.client.close());
    await one.client.start();
    await sup.waitFor((e) => e.type === 'status' && e.instanceId === 'pod-3');
    // Same boot id, other connection: what one process does when it gave up on a session the supervisor still holds.
    const again = makeTestClient(pki, { port: sup.port(), instanceId: 'pod-3', bootId: 'boot-e' });
    t.after(() => again.client.close());
    await again.client.start();
    await again.waitState((s) => s.policy.effective);
    await one.waitState((s) => s.phase === 'waiting');
    assert.equal(one.client.state().superseded, undefined);
    assert.equal(conflictWarnings(sup).length, 0);
  });
});
