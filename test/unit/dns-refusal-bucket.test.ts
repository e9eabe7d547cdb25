// The refused-name bucket shared by policy DNS's threads (net/token-bucket.ts createSharedTokenBucket): the same
// answers as the one-thread bucket on the same clock, exactly its burst across real threads taking at once, and the
// rate limit's reports of refusals a worker answered (dns/rate-limit.ts answeredElsewhere).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { createRefusalLimit } from '../../src/dns/rate-limit.js';
import { LIMIT_REPORT_INTERVAL_MS } from '../../src/net/lookup-tally.js';
import { createSharedTokenBucket, createTokenBucket, SHARED_BUCKET_BYTES } from '../../src/net/token-bucket.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { testClock } from '../harness/clock.js';
import { stubPolicy } from '../harness/dns-policy.js';

/**
 * Steps of the test clock, in ms: whole and half tokens at 20 a second, so both buckets' arithmetic is exact; mostly
 * none, so that takes outrun the rate and the bucket runs dry as often as it refills.
 */
const STEPS_MS = [...new Array<number>(40).fill(0), 25, 50, 75, 100, 500, 2_000];
const SEQUENCE_LENGTH = 2_000;
/** Threads taking from one bucket at once, and how many takes each tries: more than the whole burst. */
const THREADS = 3;
const BURST = 1_000_000;

describe('createSharedTokenBucket', () => {
  it('answers every take as the one-thread bucket does on the same clock', () => {
    const clock = testClock();
    const limits = { perSecond: 20, burst: 20 };
    const shared = createSharedTokenBucket(new SharedArrayBuffer(SHARED_BUCKET_BYTES), limits, clock.now);
    const own = createTokenBucket({ ...limits, now: clock.now });
    // A fixed walk (Park and Miller's sequence): bursts, waits shorter and longer than a token, long idles.
    let seed = 7;
    let admitted = 0;
    for (let i = 0; i < SEQUENCE_LENGTH; i++) {
      seed = (seed * 48_271) % 2_147_483_647;
      clock.advance(STEPS_MS[seed % STEPS_MS.length] as number);
      const expected = own.take();
      assert.equal(shared.take(), expected, `take ${i} at ${clock.now()} ms`);
      if (expected) admitted++;
    }
    // The walk went both ways: neither always admitted nor always refused.
    assert.ok(admitted > 0 && admitted < SEQUENCE_LENGTH);
  });

  it('takes a rate of 0 as the one-thread bucket does: its burst, then nothing, however long the wait', () => {
    const clock = testClock();
    for (const limits of [
      { perSecond: 0, burst: 3 },
      { perSecond: 1e-9, burst: 2 },
    ]) {
      const shared = createSharedTokenBucket(new SharedArrayBuffer(SHARED_BUCKET_BYTES), limits, clock.now);
      const own = createTokenBucket({ ...limits, now: clock.now });
      for (let i = 0; i < 5; i++) assert.equal(shared.take(), own.take());
      clock.advance(10 * 365 * 86_400_000);
      for (let i = 0; i < 5; i++) assert.equal(shared.take(), own.take(), `after ten years, take ${i} of ${JSON.stringify(limits)}`);
    }
  });

  it('admits exactly its burst to threads taking at once, when it does not refill meanwhile', async () => {
    const state = new SharedArrayBuffer(SHARED_BUCKET_BYTES);
    // One token in about 17 minutes: none comes back while the threads run.
    const limits = { perSecond: 0.001, burst: BURST };
    const source = new URL('../../src/net/token-bucket.ts', import.meta.url).href;
    // tsx's hooks do not reach a worker through execArgv on Node 20: registered inside, as dns/workers.ts does.
    const code = `
      const { parentPort, workerData } = await import('node:worker_threads');
      (await import('tsx/esm/api')).register();
      const { createSharedTokenBucket } = await import(workerData.source);
      const bucket = createSharedTokenBucket(workerData.state, workerData.limits, () => performance.timeOrigin + performance.now());
      const start = new Int32Array(workerData.start);
      Atomics.wait(start, 0, 0);
      let admitted = 0;
      for (let i = 0; i < workerData.takes; i++) if (bucket.take()) admitted++;
      parentPort.postMessage(admitted);`;
    const start = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
    const threads = Array.from({ length: THREADS }, () => new Worker(code, { eval: true, workerData: { source, state, limits, start, takes: BURST } }));
    const results = threads.map(
      (thread) =>
        new Promise<number>((resolve, reject) => {
          thread.once('message', resolve);
          thread.once('error', reject);
        }),
    );
    try {
      // Every thread waits on the same word, so their takes overlap.
      await new Promise((resolve) => setTimeout(resolve, 200));
      Atomics.store(new Int32Array(start), 0, 1);
      Atomics.notify(new Int32Array(start), 0);
      const admitted = await Promise.all(results);
      assert.equal(
        admitted.reduce((a, b) => a + b, 0),
        BURST,
        `admitted per thread: ${admitted.join(', ')}`,
      );
    } finally {
      await Promise.all(threads.map((thread) => thread.terminate()));
    }
  });
});

describe('the refusal limit, with refusals answered by a worker', () => {
  it('counts them and reports them on the next tick, naming the name when one was refused', () => {
    const clock = testClock();
    const events: AuditEvent[] = [];
    const policy = stubPolicy([]);
    const limit = createRefusalLimit({ sink: { emit: (event) => void events.push(event) }, now: clock.now, limits: { perSecond: 1, burst: 1 } });
    limit.answeredElsewhere(1, 'one.example.test');
    limit.tick(policy);
    assert.equal(events.length, 1);
    assert.equal(events[0]?.dst?.host, 'one.example.test');
    assert.equal(events[0]?.unmapped?.queries, 1);
    limit.answeredElsewhere(3, 'first.example.test');
    limit.answeredElsewhere(2, 'second.example.test');
    limit.tick(policy);
    assert.equal(events.length, 1, 'one report per interval');
    clock.advance(LIMIT_REPORT_INTERVAL_MS);
    limit.tick(policy);
    assert.equal(events.length, 2);
    assert.equal(events[1]?.dst, undefined, 'several refusals: no one name');
    assert.equal(events[1]?.unmapped?.queries, 5);
    assert.equal(limit.total(), 6);
  });
});
