import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createByteQueue } from '../../src/websocket/byte-queue.js';

function bytes(from: number, to: number): Buffer {
  return Buffer.from(Array.from({ length: to - from }, (_, i) => (from + i) & 0xff));
}

describe('WebSocket byte queue', () => {
  it('peeks across chunk boundaries without consuming, and never past what it holds', () => {
    const q = createByteQueue();
    assert.equal(q.peek(14).length, 0);
    q.push(bytes(0, 1));
    q.push(Buffer.alloc(0));
    q.push(bytes(1, 5));
    q.push(bytes(5, 20));
    assert.equal(q.size(), 20);
    assert.deepEqual(q.peek(1), bytes(0, 1));
    assert.deepEqual(q.peek(14), bytes(0, 14));
    assert.deepEqual(q.peek(100), bytes(0, 20));
    assert.equal(q.size(), 20);
  });

  it('takes exactly n bytes, splitting a chunk and leaving the rest in order', () => {
    const q = createByteQueue();
    for (let i = 0; i < 10; i++) q.push(bytes(i * 3, i * 3 + 3));
    assert.deepEqual(q.take(2), bytes(0, 2));
    assert.deepEqual(q.take(7), bytes(2, 9));
    assert.deepEqual(q.take(3), bytes(9, 12));
    assert.equal(q.size(), 18);
    assert.deepEqual(q.peek(4), bytes(12, 16));
    assert.deepEqual(q.take(18), bytes(12, 30));
    assert.equal(q.size(), 0);
    assert.equal(q.peek(14).length, 0);
    q.push(bytes(30, 31));
    assert.deepEqual(q.take(1), bytes(30, 31));
  });

  it('a copied read holds its bytes even when the queue goes on', () => {
    const q = createByteQueue();
    q.push(bytes(0, 2));
    q.push(bytes(2, 4));
    const taken = q.take(3);
    q.push(bytes(4, 8));
    assert.deepEqual(taken, bytes(0, 3));
    assert.deepEqual(q.take(5), bytes(3, 8));
  });

  it('keeps order through many small chunks (the consumed front of the list is dropped as it goes)', () => {
    const q = createByteQueue();
    const total = 50_000;
    for (let i = 0; i < total; i++) q.push(bytes(i, i + 1));
    let at = 0;
    for (const n of [1, 13, 1_000, 2_047, 3, 20_000, 10_000]) {
      assert.deepEqual(q.take(n), bytes(at, at + n), `take(${n}) at ${at}`);
      at += n;
      assert.deepEqual(q.peek(14), bytes(at, at + 14));
    }
    assert.deepEqual(q.take(total - at), bytes(at, total));
    assert.equal(q.size(), 0);
  });
});
