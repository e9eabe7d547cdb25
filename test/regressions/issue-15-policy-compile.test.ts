// Regression of issue 15, "A large policy blocks the event loop" (`issues show 15`): the V13 ambiguity check
// compared endpoint pairs, so endpoints sharing one host cost quadratic time (`policy check` took 4.2 s at 10k
// endpoints), and a reload compiled on the event loop, so /readyz went unanswered while it ran. Compile time is
// now linear, and a reload compiles off the event loop while the old generation keeps serving.

import assert from 'node:assert/strict';
import { get } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { LineCounter, parseDocument } from 'yaml';
import { MAX_POLICY_ENDPOINTS } from '../../src/policy/limits.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { largePolicyText } from '../harness/large-policy.js';
import { cpuMs } from '../harness/cpu-growth.js';
import { withinDeadline } from '../harness/waiters.js';

/**
 * parsePolicy's CPU time against the YAML parse's of the same text, both measured here and now, so a loaded machine
 * changes neither. Linear code measured about 2x on a quiet and on a loaded 2-core machine; the pairwise check 6-13x.
 */
const MAX_PARSE_TO_YAML_RATIO = 5;
const TIMING_RUNS = 3;
/**
 * Longest a /readyz answer or an event-loop turn may take while a reload at the limit compiles, as a share of that
 * reload (its start to the new generation answering), not in milliseconds: a loaded machine stretches both. Slices
 * are POLICY_COMPILE_SLICE_MS; the old in-loop compile blocked for the whole compile (2-30 s here), nearly all of it.
 */
const MAX_BLOCK_SHARE_OF_RELOAD = 1 / 3;
/** Bounds the /readyz polling loop in count as well as in time (the reload's deadline). */
const MAX_POLLS = 100_000;
const RELOAD_DEADLINE_MS = 120_000;

/** The median CPU time of TIMING_RUNS runs. */
function median(run: () => void): number {
  const times: number[] = [];
  for (let i = 0; i < TIMING_RUNS; i++) times.push(cpuMs(run));
  return times.sort((a, b) => a - b)[Math.floor(TIMING_RUNS / 2)] as number;
}

/** The longest gap between consecutive timer turns until stopped: what the event loop was blocked for at most. */
function loopGapProbe(): { stop(): number } {
  let last = performance.now();
  let worst = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = (): void => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
    timer = setTimeout(tick, 1).unref();
  };
  // Unref'd: a failed assertion before stop() must not keep the test process alive.
  timer = setTimeout(tick, 1).unref();
  return {
    stop() {
      clearTimeout(timer);
      return Math.max(worst, performance.now() - last);
    },
  };
}

function readyz(port: number): Promise<{ status: number; generation: number }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/readyz', agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, generation: (JSON.parse(text) as { generation: number }).generation }));
    }).on('error', reject);
  });
}

describe('issue 15: policy compile time and reloads', () => {
  it(`compiles ${MAX_POLICY_ENDPOINTS} endpoints, thousands on one shared host, in time linear with the YAML parse`, (t) => {
    const text = largePolicyText({ endpoints: MAX_POLICY_ENDPOINTS });
    const yaml = median(() => parseDocument(text, { lineCounter: new LineCounter(), uniqueKeys: true }));
    const policy = median(() => parsePolicy(text));
    t.diagnostic(`parsePolicy ${Math.round(policy)} ms CPU, YAML parse ${Math.round(yaml)} ms CPU`);
    assert.ok(policy <= MAX_PARSE_TO_YAML_RATIO * yaml,
      `parsePolicy took ${Math.round(policy)} ms CPU, the YAML parse ${Math.round(yaml)} ms (limit ${MAX_PARSE_TO_YAML_RATIO}x)`);
  });

  describe('a reload at the endpoint limit', () => {
    let b: RunningBoundary;
    before(async () => {
      b = await startBoundary({ policy: largePolicyText({ endpoints: MAX_POLICY_ENDPOINTS, salt: 'old' }) });
    });
    after(() => b.close());

    it('keeps /readyz answered by the old generation until the new one is ready', async (t) => {
      const first = await readyz(b.adminPort);
      assert.equal(first.status, 200);
      await b.writePolicy(largePolicyText({ endpoints: MAX_POLICY_ENDPOINTS, salt: 'new' }));
      const delay = monitorEventLoopDelay({ resolution: 5 });
      delay.enable();
      const gaps = loopGapProbe();
      const reloadStarted = performance.now();
      let done = false;
      const reload = b.boundary.reloadPolicy().finally(() => {
        done = true;
      });
      let slowest = 0;
      let polls = 0;
      let fromOld = 0;
      // Polls one at a time while the reload runs: the old generation answers until the swap, then the new one.
      for (; !done && polls < MAX_POLLS; polls++) {
        const start = performance.now();
        const answer = await readyz(b.adminPort);
        slowest = Math.max(slowest, performance.now() - start);
        assert.equal(answer.status, 200);
        if (answer.generation === first.generation) {
          assert.equal(fromOld, polls, 'the old generation answered after the new one');
          fromOld++;
        } else assert.equal(answer.generation, first.generation + 1);
      }
      await withinDeadline(reload, 'reload at the limit', RELOAD_DEADLINE_MS);
      const reloadMs = performance.now() - reloadStarted;
      delay.disable();
      const maxDelayMs = Math.max(delay.max / 1e6, gaps.stop());
      const limitMs = reloadMs * MAX_BLOCK_SHARE_OF_RELOAD;
      t.diagnostic(`${fromOld} answers from the old generation; reload ${Math.round(reloadMs)} ms; slowest /readyz ${Math.round(slowest)} ms; max event-loop delay ${Math.round(maxDelayMs)} ms`);
      assert.ok(fromOld >= 3, `only ${fromOld} /readyz answers from the old generation while the reload ran`);
      assert.ok(slowest <= limitMs, `slowest /readyz during the ${Math.round(reloadMs)} ms reload took ${Math.round(slowest)} ms`);
      assert.ok(maxDelayMs <= limitMs, `the event loop was blocked for ${Math.round(maxDelayMs)} ms of a ${Math.round(reloadMs)} ms reload`);
      assert.equal((await readyz(b.adminPort)).generation, first.generation + 1);
    });
  });
});
