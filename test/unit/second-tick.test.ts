// shared/timers.ts's SecondTick: one timer for every owner of once-a-second housekeeping, armed only while it has
// one, so that an idle sidecar wakes once a second for all of them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSecondTick, SECOND_TICK_MS } from '../../src/shared/timers.js';
import { startEventLoopSampler } from '../../src/telemetry/event-loop-lag.js';
import { testTimers } from '../harness/clock.js';

describe('the shared second tick', () => {
  it('runs every owner on one timer, with the time it was due, and keeps no timer once none is left', () => {
    const timers = testTimers();
    const tick = createSecondTick(timers);
    assert.equal(timers.pending, 0, 'no owner, no timer');
    const start = timers.now();
    const calls: string[] = [];
    const leaveA = tick.add((due) => calls.push(`a ${due - start}`));
    const leaveB = tick.add((due) => calls.push(`b ${due - start}`));
    assert.equal(timers.pending, 1, 'two owners, one timer');
    timers.advance(2 * SECOND_TICK_MS);
    assert.deepEqual(calls, ['a 1000', 'b 1000', 'a 2000', 'b 2000']);
    leaveA();
    timers.advance(SECOND_TICK_MS);
    assert.deepEqual(calls.slice(4), ['b 3000']);
    assert.equal(timers.pending, 1);
    leaveB();
    assert.equal(timers.pending, 0, 'the last owner gone, the timer too');
  });

  it('skips an owner another removed in the same second, and goes on after an owner throws', () => {
    const timers = testTimers();
    const tick = createSecondTick(timers);
    const calls: string[] = [];
    let leaveC: () => void = () => {};
    tick.add(() => {
      calls.push('a');
      leaveC();
    });
    const leaveThrower = tick.add(() => {
      throw new Error('an owner that does not catch');
    });
    leaveC = tick.add(() => calls.push('c'));
    assert.throws(() => timers.advance(SECOND_TICK_MS), /does not catch/);
    assert.deepEqual(calls, ['a'], 'c was removed by a before its turn');
    assert.equal(timers.pending, 1, 'armed before the owners ran: the next second still comes');
    leaveThrower();
    timers.advance(SECOND_TICK_MS);
    assert.deepEqual(calls, ['a', 'a']);
  });

  it('carries an idle loop sampler without a timer of its own, and lets it go while the loop is busy', () => {
    const timers = testTimers();
    const second = createSecondTick(timers);
    let utilization = 0;
    second.add(() => {});
    const sampler = startEventLoopSampler({ ...timers, utilization: () => utilization, second });
    assert.equal(timers.pending, 1, 'the sampler rides the tick the other owner already runs');
    timers.advance(3 * SECOND_TICK_MS);
    assert.equal(sampler.take().count, 3);
    assert.equal(timers.pending, 1);
    utilization = 1;
    timers.advance(SECOND_TICK_MS);
    assert.equal(timers.pending, 2, 'busy: its own 10 ms timer beside the tick');
    utilization = 0;
    timers.advance(SECOND_TICK_MS);
    assert.equal(timers.pending, 1, 'idle again: back on the tick');
  });
});
