import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refusal, runStages, type Stage, type StageResult } from '../../src/chain/stage.js';

type Log = string[];

function stage(name: string, answer: (log: Log) => StageResult): Stage<Log> {
  return { name, run: (log) => { log.push(name); return answer(log); } };
}

const cont = (): StageResult => undefined;
const refuse = refusal('deny', 'bad-request', 'refused', 400);

describe('runStages', () => {
  it('runs every stage in the same turn when none waits, and makes no promise', () => {
    const log: Log = [];
    const out = runStages([stage('a', cont), stage('b', cont), stage('c', cont)], log);
    assert.equal(out, undefined);
    assert.deepEqual(log, ['a', 'b', 'c']);
  });

  it('stops at the first refusal', () => {
    const log: Log = [];
    assert.equal(runStages([stage('a', cont), stage('b', () => refuse), stage('c', cont)], log), refuse);
    assert.deepEqual(log, ['a', 'b']);
  });

  it('goes on after a stage that waited and continued, from the stage after it', async () => {
    const log: Log = [];
    const out = runStages([stage('a', cont), stage('b', async () => undefined), stage('c', cont), stage('d', async () => undefined), stage('e', cont)], log);
    assert.ok(out instanceof Promise);
    assert.deepEqual(log, ['a', 'b']);
    assert.equal(await out, undefined);
    assert.deepEqual(log, ['a', 'b', 'c', 'd', 'e']);
  });

  it('ends with the refusal a waiting stage answered, running nothing after it', async () => {
    const log: Log = [];
    const out = runStages([stage('a', async () => undefined), stage('b', async () => refuse), stage('c', cont)], log);
    assert.equal(await out, refuse);
    assert.deepEqual(log, ['a', 'b']);
  });

  it('starts from the stage it is given', () => {
    const log: Log = [];
    runStages([stage('a', cont), stage('b', cont), stage('c', cont)], log, 1);
    assert.deepEqual(log, ['b', 'c']);
  });
});
