// StreamTable (src/http2/stream-table.ts), a connection's open streams by id, against a Map doing the same: seeded runs
// of sets, gets and deletes over the id shapes HTTP/2 gives it (ids of one parity in order with a window open, ids far
// apart, ids that all land on the same slot), through growth and deletions that wrap around the end of the arrays.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StreamTable } from '../../src/http2/stream-table.js';
import { type Random, seeded } from '../harness/seeded.js';

const MAX_ID = 2 ** 31 - 1;

interface Shape {
  readonly name: string;
  /** The next id to open, given how many were opened so far. */
  readonly next: (opened: number, random: Random) => number;
  /** Streams open at most. */
  readonly window: number;
}

const SHAPES: readonly Shape[] = [
  { name: 'odd ids in order, ten open', next: (n) => 2 * n + 1, window: 10 },
  { name: 'odd ids in order, a hundred open', next: (n) => 2 * n + 1, window: 100 },
  { name: 'even ids in order near the top of the range', next: (n) => MAX_ID - 1 - 2 * n, window: 40 },
  { name: 'ids anywhere in the range', next: (_n, r) => 1 + Math.floor(r() * (MAX_ID - 1)), window: 200 },
  // Every id's home slot is the same in a table of up to 2^12 slots: one long run of collisions.
  { name: 'ids on one slot', next: (n) => 1 + 2 * (n + 1) * 4096, window: 60 },
];

function check(table: StreamTable<string>, model: Map<number, string>, where: string): void {
  assert.equal(table.size, model.size, `${where}: size`);
  for (const [id, item] of model) assert.equal(table.get(id), item, `${where}: get ${id}`);
  assert.deepEqual([...table.values()].sort(), [...model.values()].sort(), `${where}: values`);
}

describe('StreamTable', () => {
  for (const shape of SHAPES) {
    it(`matches a Map: ${shape.name}`, () => {
      for (let seed = 1; seed <= 5; seed++) {
        const random = seeded(seed);
        const table = new StreamTable<string>();
        const model = new Map<number, string>();
        let opened = 0;
        for (let step = 0; step < 3_000; step++) {
          const where = `seed ${seed} step ${step}`;
          const roll = random();
          if (model.size < shape.window && roll < 0.55) {
            const id = shape.next(opened++, random);
            table.set(id, `s${id}`);
            model.set(id, `s${id}`);
          } else if (model.size > 0) {
            // Mostly the oldest, as streams end about in order, else any.
            const ids = [...model.keys()];
            const id = roll < 0.8 ? (ids[0] as number) : (ids[Math.floor(random() * ids.length)] as number);
            assert.equal(table.delete(id), true, `${where}: delete ${id}`);
            model.delete(id);
            assert.equal(table.get(id), undefined, `${where}: ${id} gone`);
            assert.equal(table.delete(id), false, `${where}: delete ${id} again`);
          }
          // An id never opened is not found, and setting an open id again replaces it.
          assert.equal(table.has(shape.next(opened + 1_000_000, random)), false, `${where}: unknown id`);
          if (model.size > 0 && roll > 0.95) {
            const id = [...model.keys()][0] as number;
            table.set(id, `again${id}`);
            model.set(id, `again${id}`);
          }
          if (step % 97 === 0) check(table, model, where);
        }
        check(table, model, `seed ${seed} end`);
        table.clear();
        assert.equal(table.size, 0);
        assert.deepEqual(table.values(), []);
        for (const id of model.keys()) assert.equal(table.get(id), undefined);
      }
    });
  }
});
