import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { ControlState } from '../../src/control/client.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { makeTestPki, type Pem, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor, type TestClient } from '../harness/control.js';

const CLIENTS = 500;
const SANDBOXES = 50;
const REATTACH_BUDGET_MS = 20_000;
const PUSH_BUDGET_MS = 5_000;
const ATTACH_BUDGET_MS = 30_000;

/** Resolves when every client's state satisfies `done`, checking on each state change; bounded by `budgetMs`. */
function allReach(clients: TestClient[], done: (state: ControlState, index: number) => boolean, budgetMs: number): Promise<number> {
  const started = Date.now();
  return Promise.all(clients.map((c, i) => c.waitState((s) => done(s, i), budgetMs))).then(() => Date.now() - started);
}

describe('control channel at scale', () => {
  let pki: TestPki;
  const identities: Pem[] = [];
  before(async () => {
    pki = await makeTestPki();
    for (let i = 0; i < SANDBOXES; i += 1) {
      identities.push(await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId: `sb-${i}`, trustDomain: pki.trustDomain, now: Date.now }));
    }
  });

  it(`attaches ${CLIENTS} mTLS boundaries, re-attaches them all after a supervisor restart within 20 s, and pushes to all within 5 s`, async (t) => {
    const A = policyYaml('a.example.test');
    const B = policyYaml('b.example.test');
    // One process plays both sides of 500 handshakes on a shared test machine: a handshake can wait
    // seconds for the CPU, so the handshake deadlines (10 s in production) are raised, not the budgets.
    const sup = await startTestSupervisor(pki, { policies: { default: A }, config: { handshakeTimeoutMs: 30_000 } });
    t.after(() => sup.close());
    const clients: TestClient[] = [];
    for (let i = 0; i < CLIENTS; i += 1) {
      const sandbox = i % SANDBOXES;
      clients.push(
        makeTestClient(pki, {
          port: sup.port(),
          identity: identities[sandbox] ?? pki.client,
          sandboxId: `sb-${sandbox}`,
          instanceId: `pod-${i}`,
          // Lowered for the test only; production stays 2 s doubling to 30 s.
          backoff: { baseMs: 200, capMs: 2_000 },
          timeouts: { handshakeMs: 30_000 },
        }),
      );
    }
    t.after(() => Promise.all(clients.map((c) => c.client.close())));

    const attachStart = Date.now();
    await Promise.all(clients.map((c) => c.client.start()));
    await allReach(clients, (s) => s.policy.effective && s.phase === 'attached', ATTACH_BUDGET_MS);
    const attachMs = Date.now() - attachStart;
    assert.equal(sup.supervisor.sandboxes().filter((r) => r.attached).length, CLIENTS);

    const sessions = clients.map((c) => c.client.state().sessionId);
    const generations = clients.map((c) => c.store.current().generation);
    const restartStart = Date.now();
    await sup.restart();
    await allReach(clients, (s, i) => s.phase === 'attached' && s.sessionId !== sessions[i], REATTACH_BUDGET_MS);
    const reattachMs = Date.now() - restartStart;
    assert.ok(reattachMs < REATTACH_BUDGET_MS);
    assert.deepEqual(
      clients.map((c) => c.store.current().generation),
      generations,
      'the held hash matched after the restart: nothing re-applied',
    );
    assert.equal(sup.supervisor.sandboxes().filter((r) => r.attached).length, CLIENTS);

    const hashB = parsePolicy(B).hash;
    const pushStart = Date.now();
    await sup.writePolicy('default', B);
    await allReach(clients, (s) => s.policy.policyHash === hashB, PUSH_BUDGET_MS);
    const pushMs = Date.now() - pushStart;
    assert.ok(pushMs < PUSH_BUDGET_MS);

    process.stdout.write(
      `# scale: ${CLIENTS} clients (${SANDBOXES} sandboxes): attach ${attachMs} ms, re-attach after restart ${reattachMs} ms, push fan-out ${pushMs} ms\n`,
    );
    t.diagnostic(`attach ${attachMs} ms; re-attach after restart ${reattachMs} ms; push fan-out ${pushMs} ms`);
  });
});
