// StallWatch (src/http2/stall-watch.ts) on a fake clock: an answer whose writer waits is reset once it has moved
// nothing for the limit; progress starts its clock again; a writer that may go on, or a stream gone, is forgotten;
// one timer serves every stream and none is left once nothing is watched; a stream that leaves the watch keeps no link
// to another.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Stalling, StallWatch } from '../../src/http2/stall-watch.js';
import { testTimers } from '../harness/clock.js';

const LIMIT_MS = 1_000;

interface Item extends Stalling {
  readonly name: string;
  queued: number;
}

const item = (name: string, queued: number): Item => ({ name, queued, quietSince: 0, stallQueued: 0, quietPrev: undefined, quietNext: undefined, quietWatched: false });

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

  it('leaves no link on a stream that is no longer watched, so none keeps a later one alive', () => {
    const { timers, watch, stalled } = setup();
    const items = ['a', 'b', 'c', 'd'].map((name) => item(name, 1));
    for (const i of items) watch.add(i);
    const [a, b, c, d] = items as [Item, Item, Item, Item];
    assert.equal(b.quietPrev, a);
    assert.equal(b.quietNext, c);
    watch.delete(b);
    watch.delete(d);
    for (const gone of [b, d]) assert.deepEqual([gone.quietPrev, gone.quietNext, gone.quietWatched], [undefined, undefined, false]);
    assert.equal(a.quietNext, c);
    assert.equal(c.quietPrev, a);
    timers.advance(LIMIT_MS);
    assert.deepEqual(stalled, ['a', 'c']);
    for (const i of items) assert.deepEqual([i.quietPrev, i.quietNext, i.quietWatched], [undefined, undefined, false]);
    watch.add(b);
    watch.add(c);
    watch.clear();
    for (const i of [b, c]) assert.deepEqual([i.quietPrev, i.quietNext, i.quietWatched], [undefined, undefined, false]);
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
