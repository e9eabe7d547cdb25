import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { HEALTHY_SESSION_MIN_MS, type ReconnectReason } from '../../src/control/backoff.js';
import type { ControlState } from '../../src/control/client.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { makeTestPki, type Pem, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, type TestClient } from '../harness/control.js';
import { type SupervisorThread, startSupervisorThread } from '../harness/supervisor-thread.js';

// `npm test` runs 500 clients; BOUNDARY_SCALE_CLIENTS=2000 runs the issue-12 size. Both ends of every
// handshake run in this process: a restart of 2,000 costs about 14 s of CPU over both threads (7 ms per
// re-attach: handshake, HTTP/2 session, attach, watch and ack at both ends, and the old session's teardown), so
// on a 2-core machine it cannot finish inside the 5 s budget however the work is split between threads: a
// measurement of this machine, not of the schedule (see the diagnostics; `restart itself` is the closed-port gap).
const CLIENTS = positiveInt(process.env.BOUNDARY_SCALE_CLIENTS, 500);
const RESTART_CYCLES = positiveInt(process.env.BOUNDARY_SCALE_CYCLES, 20);
const SANDBOXES = 50;
/** Issue 12: after a supervisor restart every boundary is attached again within this. */
const REATTACH_BUDGET_MS = 5_000;
/** How long a restart is waited for: past the budget, so a slow machine yields a figure and not just a timeout. */
const REATTACH_WAIT_LIMIT_MS = 60_000;
/** The cadence under test: the next restart comes this long after the fleet is back, not a wait for an event. */
const CYCLE_GAP_MS = 1_000;
const PUSH_BUDGET_MS = 5_000;
/** The cold start is one burst of CLIENTS handshakes with no spread; only the re-attach has a budget under test. */
const ATTACH_BUDGET_MS = 30_000 + CLIENTS * 30;

function positiveInt(text: string | undefined, fallback: number): number {
  const n = text === undefined ? fallback : Number(text);
  assert.ok(Number.isInteger(n) && n > 0, `expected a positive integer, got ${text}`);
  return n;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

interface Restart {
  readonly allMs: number;
  readonly p50Ms: number;
  readonly maxMs: number;
  /** How long the supervisor took to close and listen again: the port is closed for about this long. */
  readonly restartMs: number;
  /** Clients whose first wait after the restart was not the quick one (they hit a failure first). */
  readonly slowStarts: number;
}

describe('control channel at scale', () => {
  let pki: TestPki;
  let sup: SupervisorThread;
  const clients: TestClient[] = [];
  /** Per client: the reason of each wait (phase `waiting`), in order. */
  const waits: ReconnectReason[][] = [];
  const A = policyYaml('a.example.test');
  const B = policyYaml('b.example.test');

  before(async () => {
    pki = await makeTestPki();
    const identities: Pem[] = [];
    for (let i = 0; i < SANDBOXES; i += 1) {
      identities.push(await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId: `sb-${i}`, trustDomain: pki.trustDomain, now: Date.now }));
    }
    // One process plays both sides of every handshake on a shared test machine: a handshake can wait
    // seconds for the CPU, so the handshake deadlines (10 s in production) are raised, not the budgets.
    // The supervisor gets its own thread, as it has its own process in production.
    sup = await startSupervisorThread(pki, { policies: { default: A }, config: { handshakeTimeoutMs: 30_000 } });
    for (let i = 0; i < CLIENTS; i += 1) {
      const sandbox = i % SANDBOXES;
      const reasons: ReconnectReason[] = [];
      waits.push(reasons);
      clients.push(
        makeTestClient(pki, {
          port: sup.port,
          identity: identities[sandbox] ?? pki.client,
          sandboxId: `sb-${sandbox}`,
          instanceId: `pod-${i}`,
          // The production schedule (backoff.ts), not the harness's fast one: it is what the budgets test.
          backoff: {},
          timeouts: { handshakeMs: 30_000 },
          onState(state) {
            if (state.phase === 'waiting' && state.nextAttemptReason !== undefined) reasons.push(state.nextAttemptReason);
          },
        }),
      );
    }
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.client.close()));
    await sup.close();
  });

  /** Restarts the supervisor and times every client back to attached on a new session; bounded by the budget. */
  async function restartAndTime(): Promise<Restart> {
    const sessions = clients.map((c) => c.client.state().sessionId);
    const waitsBefore = waits.map((w) => w.length);
    const started = Date.now();
    const back = clients.map((c, i) =>
      c.waitState((s: ControlState) => s.phase === 'attached' && s.sessionId !== undefined && s.sessionId !== sessions[i], REATTACH_WAIT_LIMIT_MS).then(() => Date.now() - started),
    );
    await sup.restart();
    const restartMs = Date.now() - started;
    const times = (await Promise.all(back)).sort((a, b) => a - b);
    const slowStarts = waits.filter((w, i) => w[waitsBefore[i] ?? 0] !== 'after-healthy-session').length;
    return { allMs: Date.now() - started, p50Ms: percentile(times, 50), maxMs: percentile(times, 100), restartMs, slowStarts };
  }

  it(`attaches ${CLIENTS} mTLS boundaries (${SANDBOXES} sandboxes)`, async (t) => {
    const attachStart = Date.now();
    await Promise.all(clients.map((c) => c.client.start()));
    await Promise.all(clients.map((c) => c.waitState((s) => s.policy.effective && s.phase === 'attached', ATTACH_BUDGET_MS)));
    assert.equal(await sup.attachedCount(), CLIENTS);
    t.diagnostic(`cold attach of ${CLIENTS}: ${Date.now() - attachStart} ms`);
  });

  it(`re-attaches all ${CLIENTS} within 5 s of a supervisor restart, re-applies nothing, and pushes to all within 5 s`, async (t) => {
    // A session counts as healthy once attached for HEALTHY_SESSION_MIN_MS: time has to pass, no event says so.
    assert.ok(CYCLE_GAP_MS > HEALTHY_SESSION_MIN_MS);
    await delay(CYCLE_GAP_MS);
    const generations = clients.map((c) => c.store.current().generation);
    const restart = await restartAndTime();
    const figures = `re-attach after restart all ${restart.allMs} ms (per client p50 ${restart.p50Ms}, max ${restart.maxMs}; the restart itself ${restart.restartMs} ms)`;
    process.stdout.write(`# scale: ${CLIENTS} clients: ${figures}\n`);
    t.diagnostic(figures);
    assert.ok(restart.allMs < REATTACH_BUDGET_MS, `all re-attached after ${restart.allMs} ms`);
    assert.equal(restart.slowStarts, 0, 'every client waited the after-healthy-session delay first');
    assert.deepEqual(
      clients.map((c) => c.store.current().generation),
      generations,
      'the held hash matched after the restart: nothing re-applied',
    );
    assert.equal(await sup.attachedCount(), CLIENTS);

    const hashB = parsePolicy(B).hash;
    const pushStart = Date.now();
    await sup.writePolicy('default', B);
    await Promise.all(clients.map((c) => c.waitState((s) => s.policy.policyHash === hashB, PUSH_BUDGET_MS)));
    t.diagnostic(`push fan-out ${Date.now() - pushStart} ms`);
  });

  it(`re-attaches all ${CLIENTS} within 5 s in each of ${RESTART_CYCLES} restarts 1 s apart`, async (t) => {
    const cycles: Restart[] = [];
    for (let cycle = 0; cycle < RESTART_CYCLES; cycle += 1) {
      await delay(CYCLE_GAP_MS);
      cycles.push(await restartAndTime());
    }
    const all = cycles.map((c) => c.allMs).sort((a, b) => a - b);
    const slow = cycles.reduce((n, c) => n + c.slowStarts, 0);
    const restarts = cycles.map((c) => c.restartMs).sort((a, b) => a - b);
    const summary = `${RESTART_CYCLES} restarts of ${CLIENTS}: time to all re-attached p50 ${percentile(all, 50)} ms, max ${percentile(all, 100)} ms; restart itself p50 ${percentile(restarts, 50)} ms; per-client p50 of p50s ${percentile(
      cycles.map((c) => c.p50Ms).sort((a, b) => a - b),
      50,
    )} ms, worst client ${Math.max(...cycles.map((c) => c.maxMs))} ms; ${slow} client-restarts hit a failed attempt first`;
    process.stdout.write(`# scale: ${summary}\n`);
    t.diagnostic(summary);
    for (const [cycle, restart] of cycles.entries()) {
      assert.ok(restart.allMs < REATTACH_BUDGET_MS, `cycle ${cycle}: all re-attached after ${restart.allMs} ms`);
    }
  });
});
