import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { HEALTHY_SESSION_MIN_MS, type ReconnectReason } from '../../src/control/backoff.js';
import type { ControlState } from '../../src/control/client.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { makeTestPki, type Pem, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, type TestClient } from '../harness/control.js';
import { measureControlFloor } from '../harness/control-floor.js';
import { type SupervisorThread, startSupervisorThread } from '../harness/supervisor-thread.js';

// `npm test` runs 500 clients; BOUNDARY_SCALE_CLIENTS=2000 runs the issue-12 size. Both ends of every
// handshake run in this process (the supervisor on its own thread): a re-attach costs both ends together 7 ms of
// CPU on the machine of issue 12 and 13-20 ms on slower ones (handshake, HTTP/2 session, attach, watch and ack at
// both ends, and the old session's teardown), so 2,000 on 2 cores cannot finish inside the 5 s budget however
// the work is split between threads: a measurement of the machine, not of the schedule (`restart itself` in the
// diagnostics is the closed-port gap).
//
// The 5 s budget is a wall-clock figure for the machine it was set on, and most of a re-attach is node's TLS and
// HTTP/2 work, whose cost differs several times between machines and from one minute to the next on a shared one.
// So before every restart the test measures the floor (harness/control-floor.ts: bare node:tls and node:http2,
// one mTLS handshake, session and three requests, no boundary code) and holds boundary to two things:
// - its CPU per re-attach stays within MAX_FLOOR_RATIO of that floor (median over restarts): a regression in
//   boundary's own work fails on any machine;
// - all clients are back within the 5 s budget, stretched in proportion where the floor costs more than it did on
//   the machine the budget was set on (REFERENCE_FLOOR_MS), and by the CPU other processes took meanwhile.
// A restart during which other processes left the test too little of the machine says nothing about time: its
// figures are reported and its time and schedule are not held to anything; what does not depend on speed (every
// client back, nothing re-applied, the CPU ratio) is asserted for every restart.
const CLIENTS = positiveInt(process.env.BOUNDARY_SCALE_CLIENTS, 500);
const RESTART_CYCLES = positiveInt(process.env.BOUNDARY_SCALE_CYCLES, 20);
const SANDBOXES = 50;
/** Issue 12: after a supervisor restart every boundary is attached again within this. */
const REATTACH_BUDGET_MS = 5_000;
/**
 * The budget is for this process on otherwise idle cores. CPU that other processes took during a restart
 * (measured from /proc/stat minus this process's own CPU time) stretches it in proportion, down to this share
 * of the machine left to the test; below that the restart is not measurable: its time is reported, not held.
 */
const MIN_FREE_SHARE = 0.25;
/** Restarts that were not measurable are repeated, at most this many times per test, hoping for a quieter moment. */
const MAX_UNMEASURABLE = 5;
/** /proc/stat counts in USER_HZ ticks, 100 per second on Linux. */
const TICK_MS = 10;
/** The cadence under test: the next restart comes this long after the fleet is back, not a wait for an event. */
const CYCLE_GAP_MS = 1_000;
/**
 * CPU of one bare exchange (the floor) on the 2-core machine where issue 12 set the 5 s budget: its closing note
 * measured 4.7 ms per mTLS handshake + HTTP/2 session + 3 requests on Node 20 and OpenSSL 3.0.
 */
const REFERENCE_FLOOR_MS = 4.7;
/** Past this many times the reference floor, a machine is too slow for the budget to say anything: not measurable. */
const MAX_HOST_FACTOR = 8;
/**
 * Bounds a hang only: how long every client is waited for after a restart (or a push). On a host loaded enough that
 * a handshake overruns its 30 s deadline, that client backs off on the production schedule and tries again; what
 * is asserted is that it comes back, and the restart's time only where the restart was measurable.
 */
const REATTACH_HANG_BOUND_MS = 300_000;
/** Bounds a hang only: a test's whole run, its restarts each waited for up to REATTACH_HANG_BOUND_MS plus a gap. */
const restartsHangBoundMs = (restarts: number): number => restarts * (REATTACH_HANG_BOUND_MS + 60_000);
/** Boundary's CPU per re-attach (both ends, every thread) against the floor's per exchange; measured at 0.84-1.30. */
const MAX_FLOOR_RATIO = 1.6;
/** Exchanges per floor measurement, and how many at once: about a second on a slow 2-core machine, run in the gap. */
const FLOOR_EXCHANGES = 80;
const FLOOR_CONCURRENCY = 20;
/** Issue 12: a push reaches every boundary within this, stretched like the re-attach budget. */
const PUSH_BUDGET_MS = 5_000;
/** Bounds a hang only: the cold start is one burst of CLIENTS handshakes with no spread, not under test. */
const ATTACH_HANG_BOUND_MS = 600_000;

function positiveInt(text: string | undefined, fallback: number): number {
  const n = text === undefined ? fallback : Number(text);
  assert.ok(Number.isInteger(n) && n > 0, `expected a positive integer, got ${text}`);
  return n;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

/**
 * Runs `work` and says how much of the machine other processes left it: the share of the cores not used by others
 * (CPU time of the host from /proc/stat minus this process's own, over the wall time).
 */
async function freeShareDuring<T>(work: () => Promise<T>): Promise<{ result: T; ms: number; ownMs: number; noiseCores: number; freeShare: number }> {
  const hostBefore = hostBusyMs();
  const ownBefore = ownCpuMs();
  const started = Date.now();
  const result = await work();
  const ms = Date.now() - started;
  const ownMs = ownCpuMs() - ownBefore;
  const noiseCores = Math.max(0, hostBusyMs() - hostBefore - ownMs) / Math.max(1, ms);
  const cores = availableParallelism();
  return { result, ms, ownMs, noiseCores, freeShare: Math.max(0, cores - noiseCores) / cores };
}

/** CPU time used by every process on the host, in ms (Linux /proc/stat; 0 elsewhere, so no noise is seen). */
function hostBusyMs(): number {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
    // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) * TICK_MS;
  } catch {
    return 0;
  }
}

function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

interface Restart {
  readonly allMs: number;
  /** The budget for this restart: REATTACH_BUDGET_MS stretched by the CPU other processes took meanwhile. */
  readonly budgetMs: number;
  /** Cores' worth of CPU that processes other than this one used during the restart. */
  readonly noiseCores: number;
  /** False when other processes left the test less than MIN_FREE_SHARE of the machine: the figure says nothing. */
  readonly measurable: boolean;
  readonly p50Ms: number;
  readonly maxMs: number;
  /** How long the supervisor took to close and listen again: the port is closed for about this long. */
  readonly restartMs: number;
  /** Clients whose first wait after the restart was not the quick one (they hit a failure first). */
  readonly slowStarts: number;
  /** CPU this process (both ends, every thread) spent per re-attached client. */
  readonly cpuPerClientMs: number;
  /** The floor measured just before the restart: CPU per bare exchange. */
  readonly floorMs: number;
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

  function unmeasurableWhy(restart: Restart): string {
    return `other processes used ${restart.noiseCores.toFixed(2)} cores; the floor cost ${restart.floorMs.toFixed(1)} ms, ${(restart.floorMs / REFERENCE_FLOOR_MS).toFixed(1)} times the reference (at most ${MAX_HOST_FACTOR})`;
  }

  /**
   * The gap before a restart: the floor is measured in it (in a child process, so the fleet's own work meanwhile
   * is not counted), then the rest of CYCLE_GAP_MS passes. Returns the floor.
   */
  async function gap(): Promise<number> {
    const started = Date.now();
    const floorMs = await measureControlFloor(pki, pki.client, FLOOR_EXCHANGES, FLOOR_CONCURRENCY);
    const rest = CYCLE_GAP_MS - (Date.now() - started);
    if (rest > 0) await delay(rest);
    return floorMs;
  }

  /** After gap(): restarts the supervisor and times every client back to attached on a new session. */
  async function restartAndTime(floorMs: number): Promise<Restart> {
    const sessions = clients.map((c) => c.client.state().sessionId);
    const waitsBefore = waits.map((w) => w.length);
    const timed = await freeShareDuring(async () => {
      const started = Date.now();
      const back = clients.map((c, i) =>
        c.waitState((s: ControlState) => s.phase === 'attached' && s.sessionId !== undefined && s.sessionId !== sessions[i], REATTACH_HANG_BOUND_MS).then(() => Date.now() - started),
      );
      await sup.restart();
      const restartMs = Date.now() - started;
      return { restartMs, times: (await Promise.all(back)).sort((a, b) => a - b) };
    });
    const { result: { restartMs, times }, ms: allMs, ownMs, noiseCores, freeShare } = timed;
    const slowStarts = waits.filter((w, i) => w[waitsBefore[i] ?? 0] !== 'after-healthy-session').length;
    const hostFactor = Math.max(1, floorMs / REFERENCE_FLOOR_MS);
    const budgetMs = Math.round((REATTACH_BUDGET_MS * hostFactor) / Math.max(freeShare, MIN_FREE_SHARE));
    const measurable = freeShare >= MIN_FREE_SHARE && hostFactor <= MAX_HOST_FACTOR;
    return { allMs, budgetMs, noiseCores, measurable, floorMs, p50Ms: percentile(times, 50), maxMs: percentile(times, 100), restartMs, slowStarts, cpuPerClientMs: ownMs / CLIENTS };
  }

  it(`attaches ${CLIENTS} mTLS boundaries (${SANDBOXES} sandboxes)`, { timeout: ATTACH_HANG_BOUND_MS + 60_000 }, async (t) => {
    const attachStart = Date.now();
    await Promise.all(clients.map((c) => c.client.start()));
    await Promise.all(clients.map((c) => c.waitState((s) => s.policy.effective && s.phase === 'attached', ATTACH_HANG_BOUND_MS)));
    assert.equal(await sup.attachedCount(), CLIENTS);
    t.diagnostic(`cold attach of ${CLIENTS}: ${Date.now() - attachStart} ms`);
  });

  it(`re-attaches all ${CLIENTS} within 5 s of a supervisor restart, re-applies nothing, and pushes to all within 5 s`, { timeout: restartsHangBoundMs(MAX_UNMEASURABLE + 2) }, async (t) => {
    // A session counts as healthy once attached for HEALTHY_SESSION_MIN_MS: time has to pass, no event says so.
    assert.ok(CYCLE_GAP_MS > HEALTHY_SESSION_MIN_MS);
    const generations = clients.map((c) => c.store.current().generation);
    let restart = await restartAndTime(await gap());
    for (let retry = 0; !restart.measurable && retry < MAX_UNMEASURABLE; retry += 1) restart = await restartAndTime(await gap());
    const figures = `re-attach after restart all ${restart.allMs} ms (per client p50 ${restart.p50Ms}, max ${restart.maxMs}; the restart itself ${restart.restartMs} ms; CPU ${restart.cpuPerClientMs.toFixed(1)} ms per client, floor ${restart.floorMs.toFixed(1)} ms; other processes ${restart.noiseCores.toFixed(2)} cores; budget ${restart.budgetMs} ms)`;
    process.stdout.write(`# scale: ${CLIENTS} clients: ${figures}\n`);
    t.diagnostic(figures);
    if (restart.measurable) {
      assert.ok(restart.allMs < restart.budgetMs, `all re-attached after ${restart.allMs} ms`);
      assert.equal(restart.slowStarts, 0, 'every client waited the after-healthy-session delay first');
    } else t.diagnostic(`time not measurable in ${MAX_UNMEASURABLE + 1} restarts, not held to the budget: ${unmeasurableWhy(restart)}`);
    assert.deepEqual(
      clients.map((c) => c.store.current().generation),
      generations,
      'the held hash matched after the restart: nothing re-applied',
    );
    assert.equal(await sup.attachedCount(), CLIENTS);

    const hashB = parsePolicy(B).hash;
    const push = await freeShareDuring(async () => {
      await sup.writePolicy('default', B);
      await Promise.all(clients.map((c) => c.waitState((s) => s.policy.policyHash === hashB, REATTACH_HANG_BOUND_MS)));
    });
    const pushBudgetMs = Math.round((PUSH_BUDGET_MS * Math.max(1, restart.floorMs / REFERENCE_FLOOR_MS)) / Math.max(push.freeShare, MIN_FREE_SHARE));
    t.diagnostic(`push fan-out ${push.ms} ms (budget ${pushBudgetMs} ms; other processes ${push.noiseCores.toFixed(2)} cores)`);
    if (push.freeShare >= MIN_FREE_SHARE) assert.ok(push.ms < pushBudgetMs, `push fan-out took ${push.ms} ms`);
  });

  it(`re-attaches all ${CLIENTS} within 5 s in each of ${RESTART_CYCLES} restarts 1 s apart`, { timeout: restartsHangBoundMs(RESTART_CYCLES) }, async (t) => {
    const cycles: Restart[] = [];
    let unmeasurable = 0;
    let lastUnmeasurable = '';
    while (cycles.length < RESTART_CYCLES) {
      const restart = await restartAndTime(await gap());
      cycles.push(restart);
      if (!restart.measurable) {
        unmeasurable += 1;
        lastUnmeasurable = unmeasurableWhy(restart);
      }
      // One restart over budget already fails the test: the rest would only add minutes to the run.
      if (restart.measurable && restart.allMs >= restart.budgetMs) break;
    }
    const measured = cycles.filter((c) => c.measurable);
    const median = (pick: (r: Restart) => number): number => percentile(cycles.map(pick).sort((a, b) => a - b), 50);
    const all = cycles.map((c) => c.allMs).sort((a, b) => a - b);
    const slow = measured.reduce((n, c) => n + c.slowStarts, 0);
    const noise = cycles.map((c) => c.noiseCores).sort((a, b) => a - b);
    const ratio = median((c) => c.cpuPerClientMs / c.floorMs);
    const summary = [
      `${cycles.length} restarts of ${CLIENTS}: time to all re-attached p50 ${percentile(all, 50)} ms, max ${percentile(all, 100)} ms`,
      `budget p50 ${median((c) => c.budgetMs)} ms`,
      `restart itself p50 ${median((c) => c.restartMs)} ms`,
      `CPU per client p50 ${median((c) => c.cpuPerClientMs).toFixed(1)} ms, floor p50 ${median((c) => c.floorMs).toFixed(1)} ms, ratio p50 ${ratio.toFixed(2)}`,
      `per-client p50 of p50s ${median((c) => c.p50Ms)} ms, worst client ${Math.max(...cycles.map((c) => c.maxMs))} ms`,
      `${slow} client-restarts hit a failed attempt first (measurable restarts)`,
      `${unmeasurable} restarts not measurable (time and schedule not held)${unmeasurable > 0 ? `; the last: ${lastUnmeasurable}` : ''}`,
      `other processes p50 ${percentile(noise, 50).toFixed(2)}, max ${percentile(noise, 100).toFixed(2)} cores`,
    ].join('; ');
    process.stdout.write(`# scale: ${summary}\n`);
    t.diagnostic(summary);
    for (const [cycle, restart] of cycles.entries()) {
      if (restart.measurable) assert.ok(restart.allMs < restart.budgetMs, `cycle ${cycle}: all re-attached after ${restart.allMs} ms (budget ${restart.budgetMs} ms)`);
    }
    assert.equal(cycles.length, RESTART_CYCLES);
    assert.equal(slow, 0, 'every client waited the after-healthy-session delay first, in every measurable restart');
    assert.ok(ratio <= MAX_FLOOR_RATIO, `boundary's CPU per re-attach is ${ratio.toFixed(2)} times the floor's (at most ${MAX_FLOOR_RATIO})`);
  });
});
