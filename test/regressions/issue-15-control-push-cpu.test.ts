// Regression of issue 15, "Holds against a hostile workload" (`issues show 15`): a policy pushed by the supervisor
// was parsed on the event loop (control/apply.ts called parsePolicy synchronously), so a large push froze request
// serving, /readyz and the control channel's own pings for the whole parse, up to 1.5 s for 2,000 endpoints.
// Pushes now compile off the event loop as file reloads do (policy/parse-off-thread.ts), one at a time in
// generation order: the old generation serves until the new one swaps in, and every generation gets its ack.

import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { OFF_THREAD_MIN_BYTES, POLICY_COMPILE_SLICE_MS } from '../../src/policy/parse-off-thread.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { MAX_POLICY_FILE_BYTES } from '../../src/supervisor/library.js';
import { type AttachedBoundary, httpGet, restPolicy, startAttached } from '../harness/attached-boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { startTestSupervisor, type TestSupervisor } from '../harness/control.js';
import { largePolicyText } from '../harness/large-policy.js';
import { sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

/**
 * 0.4-1.5 s of parse on the event loop, in a file below the supervisor's MAX_POLICY_FILE_BYTES (256 KiB, which
 * also keeps the push below MAX_CONTROL_MESSAGE_BYTES): 10,000 endpoints would be 1.1 MB and refused there.
 */
const ENDPOINTS = 2_000;
/**
 * The longest event-loop stall while a push compiles, as a share of the whole compile (push to swap). A share, not
 * milliseconds: on two cores shared with other work the OS alone stalls the loop for 100-400 ms now and then, and
 * the compile stretches with it. With the fix the longest stall was 3-12 % of the compile (the worker parses while
 * the loop serves; the main thread rebuilds in slices); before it, one stall was most of the compile (82-91 %).
 */
const MAX_STALL_SHARE = 1 / 3;
/** /readyz answers from the old generation while the new one compiles: 400-570 with the fix; 4 before it. */
const MIN_ANSWERS_WHILE_COMPILING = 20;
/**
 * close() abandons the compile (1.5-2 s on a worker and in slices) instead of waiting for it; it took 2-5 ms. It is
 * held to a share of the same policy's parse on this thread, measured here and now, not to milliseconds: a loaded
 * machine stretches both alike, and waiting for the compile would take longer than the parse alone.
 */
const MAX_CLOSE_SHARE_OF_PARSE = 1 / 2;
/** Parse on a worker and rebuild in slices, on two noisy cores; far above the ~2 s it takes. */
const COMPILE_DEADLINE_MS = 30_000;
/** Bound on /readyz probes while one push compiles (the loop normally ends when the new generation is in force). */
const MAX_PROBES = 2_000;

/** A policy of ENDPOINTS endpoints that also lets GET `path` through to the origin: its decisions show it is in force. */
function largePolicy(port: number, path: string, salt: string): string {
  const text = `${largePolicyText({ endpoints: ENDPOINTS, salt })}${restPolicy(port, path).replace(/^version: 1\nnetwork_policies:\n/, '').replace('  api:', '  origin:')}`;
  assert.ok(Buffer.byteLength(text) > OFF_THREAD_MIN_BYTES && Buffer.byteLength(text) < MAX_POLICY_FILE_BYTES);
  return text;
}

async function statusOfGet(b: AttachedBoundary, origin: Origin, path: string): Promise<number> {
  return (await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}${path}` })).status;
}

/** The supervisor's row for sb-1: what the boundary last acknowledged. */
async function ackedRow(sup: TestSupervisor): Promise<Record<string, unknown> | undefined> {
  const admin = sup.supervisor.adminAddress();
  assert.ok(admin);
  const { body } = await httpGet(admin.port, '/v1/sandboxes', sup.adminHeaders);
  return (body.sandboxes as Record<string, unknown>[]).find((r) => r.sandboxId === 'sb-1');
}

describe('issue 15: a large policy pushed by the supervisor', () => {
  let pki: TestPki;
  let origin: Origin;
  before(async () => {
    pki = await makeTestPki();
    origin = await httpOrigin();
  });
  after(() => origin.close());

  it('compiles without stalling the event loop; the old generation answers until the new one is acknowledged', async (t) => {
    const small = restPolicy(origin.port, '/v1/**');
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': small } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    const first = await b.waitState((s) => s.policy.effective);
    assert.equal(await statusOfGet(b, origin, '/v2/a'), 403);

    const large = largePolicy(origin.port, '/v2/**', 'push');
    const largeHash = parsePolicy(large).hash;
    const pushed = sup.waitFor((e) => e.type === 'pushed' && (e.generation ?? 0) > (first.policy.generation ?? 0));
    await sup.writePolicy('sb-1', large);
    const { generation } = await pushed;
    // From the push on: the supervisor parsed its copy before pushing, so what stalls now is the boundary.
    const pushedAt = performance.now();
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    let servedOld = 0;
    const effective = b.waitState((s) => s.policy.policyHash === largeHash, COMPILE_DEADLINE_MS);
    let done = false;
    void effective.finally(() => {
      done = true;
    });
    for (let i = 0; i < MAX_PROBES && !done; i++) {
      const ready = await b.get('/readyz');
      if (!done && ready.body.policyHash === first.policy.policyHash && ready.status === 200) servedOld++;
    }
    await effective;
    const compileMs = performance.now() - pushedAt;
    delay.disable();
    const stallMs = delay.max / 1e6;
    const share = stallMs / compileMs;
    t.diagnostic(
      `compile ${Math.round(compileMs)} ms, longest event-loop stall ${stallMs.toFixed(1)} ms (${(share * 100).toFixed(0)} %); /readyz answered ${servedOld} times meanwhile`,
    );
    assert.ok(share < MAX_STALL_SHARE, `event loop stalled ${stallMs.toFixed(1)} ms of a ${Math.round(compileMs)} ms compile (slices of ${POLICY_COMPILE_SLICE_MS} ms)`);
    assert.ok(servedOld >= MIN_ANSWERS_WHILE_COMPILING, `/readyz answered ${servedOld} times with the old generation while the new one compiled`);

    await withinDeadline(sup.waitFor((e) => e.type === 'status' && e.generation === generation && e.detail === 'effective'), 'the ack of the large push');
    const row = await ackedRow(sup);
    assert.equal(row?.policyHash, largeHash);
    assert.equal(row?.effectiveGeneration, generation);
    assert.equal(await statusOfGet(b, origin, '/v2/a'), 200);
    assert.equal(await statusOfGet(b, origin, '/v1/a'), 403);
  });

  it('applies and acknowledges two quick pushes in generation order, the second queued behind the first compile', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(origin.port, '/v1/**') } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    const first = await b.waitState((s) => s.policy.effective);
    const large = largePolicy(origin.port, '/v2/**', 'first');
    const next = restPolicy(origin.port, '/v3/**');
    const pushedLarge = sup.waitFor((e) => e.type === 'pushed' && (e.generation ?? 0) > (first.policy.generation ?? 0));
    await sup.writePolicy('sb-1', large);
    const g1 = (await pushedLarge).generation ?? 0;
    // The large one compiles for about a second: this push arrives while it does.
    const pushedNext = sup.waitFor((e) => e.type === 'pushed' && (e.generation ?? 0) > g1);
    await sup.writePolicy('sb-1', next);
    const g2 = (await pushedNext).generation ?? 0;
    assert.equal(b.state()?.policy.policyHash, first.policy.policyHash, 'the second push came while the first still compiled');

    const acked: number[] = [];
    // Each event is offered to the predicate once, in order: it records every ack up to the second push's.
    await sup.waitFor((e) => {
      if (e.type === 'status' && (e.generation ?? 0) >= g1) acked.push(e.generation ?? 0);
      return e.type === 'status' && e.generation === g2;
    }, COMPILE_DEADLINE_MS);
    assert.deepEqual(acked, [g1, g2], 'each generation acknowledged, in order');
    const loaded = b.log.events().flatMap((e) => {
      const match = /^policy generation (\d+) from supervisor .* is effective$/.exec(e.message ?? '');
      return match === null || Number(match[1]) < g1 ? [] : [Number(match[1])];
    });
    assert.deepEqual(loaded, [g1, g2], 'each generation applied, in order');
    const row = await ackedRow(sup);
    assert.equal(row?.effectiveGeneration, g2);
    assert.equal(row?.policyHash, parsePolicy(next).hash);
    assert.equal(await statusOfGet(b, origin, '/v3/a'), 200);
    assert.equal(await statusOfGet(b, origin, '/v2/a'), 403);
  });

  it('drains at once when closed while a push compiles: nothing swapped, quarantined or acknowledged', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(origin.port, '/v1/**') } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    const first = await b.waitState((s) => s.policy.effective);
    const text = largePolicy(origin.port, '/v2/**', 'closing');
    const parseStarted = performance.now();
    parsePolicy(text);
    const parseMs = performance.now() - parseStarted;
    const pushed = sup.waitFor((e) => e.type === 'pushed' && (e.generation ?? 0) > (first.policy.generation ?? 0));
    await sup.writePolicy('sb-1', text);
    await pushed;
    const kept = b.boundary.store.current();
    const started = performance.now();
    const outcome = await withinDeadline(b.boundary.close(), 'close() while a push compiles', COMPILE_DEADLINE_MS);
    const tookMs = performance.now() - started;
    t.diagnostic(`close() ${outcome} after ${Math.round(tookMs)} ms; the policy's parse alone takes ${Math.round(parseMs)} ms here`);
    assert.equal(outcome, 'clean');
    assert.ok(tookMs < parseMs * MAX_CLOSE_SHARE_OF_PARSE, `close() took ${Math.round(tookMs)} ms, the parse alone ${Math.round(parseMs)} ms`);
    assert.equal(b.boundary.store.current(), kept, 'the compiling push was abandoned, not swapped in or quarantined');
  });
});
