// StallWatch (src/http2/stall-watch.ts) on a fake clock: an answer whose writer waits is reset once it has moved
// nothing for the limit; progress starts its clock again; a writer that may go on, or a stream gone, is forgotten;
// one timer serves every stream and none is left once nothing is watched.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StallWatch } from '../../src/http2/stall-watch.js';
import { testTimers } from '../harness/clock.js';

const LIMIT_MS = 1_000;

interface Item {
  readonly name: string;
  queued: number;
  quietSince: number;
  stallQueued: number;
}

const item = (name: string, queued: number): Item => ({ name, queued, quietSince: 0, stallQueued: 0 });

function setup(): { timers: ReturnType<typeof testTimers>; watch: StallWatch<Item>; stalled: string[] } {
  const timers = testTimers();
  const stalled: string[] = [];
  const watch = new StallWatch<Item>(timers, LIMIT_MS, (s) => stalled.push(s.name));
  return { timers, watch, stalled };
}

describe('StallWatch', () => {
  it('reports a stream that moved nothing for the limit, once, and then holds no timer', () => {
    const { timers, watch, stalled } = setup();
    watch.add(item('a', 100));
    timers.advance(LIMIT_MS - 1);
    assert.deepEqual(stalled, []);
    timers.advance(1);
    assert.deepEqual(stalled, ['a']);
    timers.advance(10 * LIMIT_MS);
    assert.deepEqual(stalled, ['a']);
    assert.equal(timers.pending, 0);
  });

  it('starts the clock again for a stream that sent part of its answer meanwhile', () => {
    const { timers, watch, stalled } = setup();
    const a = item('a', 100);
    watch.add(a);
    timers.advance(LIMIT_MS / 2);
    a.queued = 40;
    timers.advance(LIMIT_MS / 2);
    assert.deepEqual(stalled, [], 'progress since it was marked');
    timers.advance(LIMIT_MS - 1);
    assert.deepEqual(stalled, []);
    timers.advance(1);
    assert.deepEqual(stalled, ['a']);
  });

  it('keeps the first mark when a waiting writer is told to wait again', () => {
    const { timers, watch, stalled } = setup();
    const a = item('a', 100);
    watch.add(a);
    timers.advance(LIMIT_MS / 2);
    watch.add(a);
    timers.advance(LIMIT_MS / 2);
    assert.deepEqual(stalled, ['a']);
  });

  it('forgets a stream whose writer may go on, and reports each of several in the order they stalled', () => {
    const { timers, watch, stalled } = setup();
    const a = item('a', 1);
    const b = item('b', 1);
    const c = item('c', 1);
    watch.add(a);
    timers.advance(100);
    watch.add(b);
    timers.advance(100);
    watch.add(c);
    watch.delete(b);
    timers.advance(LIMIT_MS);
    assert.deepEqual(stalled, ['a', 'c']);
    assert.equal(timers.pending, 0);
  });

  it('holds no timer once cleared', () => {
    const { timers, watch, stalled } = setup();
    watch.add(item('a', 1));
    watch.clear();
    assert.equal(timers.pending, 0);
    timers.advance(2 * LIMIT_MS);
    assert.deepEqual(stalled, []);
  });
});
