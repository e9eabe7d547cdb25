// Regression of issue 15 (WebSocket frame parsing was quadratic): `issues show 15`. When a client frame's
// first read was shorter than the 14-byte maximal header, the byte queue's peek(14) concatenated the whole
// chunk list on every later push, so a frame arriving in small chunks cost O(chunks²) (128/256/512 KiB took
// 156/540/2,019 ms). The parser's work must grow linearly with its input.
//
// No absolute time is asserted: each size is 4x the previous and must take less than GROWTH_LIMIT times the CPU
// (linear gives ~4, quadratic ~16). CPU time, not the wall clock, which a loaded machine stretches at random. A run
// that overshoots its budget is abandoned mid-stream, so the quadratic parser fails in a few seconds rather than
// running for minutes on 16 MiB.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ClientEvent, createClientFrameParser, encodeFrame, MAX_FRAME_PAYLOAD_BYTES, OPCODES } from '../../src/websocket/ws-frames.js';

const KEY = Buffer.from([0x12, 0x34, 0x56, 0x78]);
/** The frame arrives as one byte, then chunks of this size (a slow, chatty client). */
const CHUNK_BYTES = 64;
/** 4x the bytes may take at most this many times as long: linear work gives ~4, quadratic ~16. */
const GROWTH_LIMIT = 6;
/** CPU times below this are timer and GC noise: a budget is never smaller than GROWTH_LIMIT times this. */
const NOISE_FLOOR_MS = 20;
/** CPU time is read once per this many pushes while a run is checked against its budget. */
const PUSHES_PER_CLOCK_READ = 256;
/** Each size is 4x the previous, ending at the largest frame the parser accepts (16 MiB). */
const SIZES = [64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024, MAX_FRAME_PAYLOAD_BYTES] as const;

function patterned(length: number): Buffer {
  const out = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + (i >>> 8)) & 0xff;
  return out;
}

interface Run {
  readonly ms: number;
  /** Undefined when the run went over its budget and was abandoned. */
  readonly events: ClientEvent[] | undefined;
}

/** This process's CPU time (every thread), in ms. */
function cpuNow(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1_000;
}

/** Feeds `raw` to a fresh parser as 1 byte then CHUNK_BYTES chunks; gives up once `budgetMs` of CPU is spent. */
function feed(raw: Buffer, budgetMs: number): Run {
  const parser = createClientFrameParser();
  const events: ClientEvent[] = [];
  const start = cpuNow();
  let pushes = 0;
  for (let at = 0; at < raw.length; at = at === 0 ? 1 : at + CHUNK_BYTES) {
    const result = parser.push(raw.subarray(at, at === 0 ? 1 : at + CHUNK_BYTES));
    assert.equal(result.error, undefined);
    events.push(...result.events);
    if (++pushes % PUSHES_PER_CLOCK_READ === 0 && cpuNow() - start > budgetMs) {
      return { ms: cpuNow() - start, events: undefined };
    }
  }
  return { ms: cpuNow() - start, events };
}

describe('issue 15: WebSocket frame parsing in linear time', () => {
  it('parses a 16 MiB masked frame delivered as 1 byte then 64-byte chunks in linear time', () => {
    const payload = patterned(MAX_FRAME_PAYLOAD_BYTES);
    // Warm the JIT so the first timed size is not charged for compilation.
    feed(encodeFrame({ opcode: OPCODES.binary, payload: payload.subarray(0, SIZES[0]), maskKey: KEY }), Number.POSITIVE_INFINITY);
    let previousMs: number | undefined;
    let previousSize = 0;
    for (const size of SIZES) {
      const raw = encodeFrame({ opcode: OPCODES.binary, payload: payload.subarray(0, size), maskKey: KEY });
      const budgetMs = previousMs === undefined ? Number.POSITIVE_INFINITY : GROWTH_LIMIT * Math.max(previousMs, NOISE_FLOOR_MS);
      const run = feed(raw, budgetMs);
      const growth = previousMs === undefined ? '' : ` (${(run.ms / previousMs).toFixed(1)}x the ${previousSize / 1024} KiB run)`;
      const took = `${size / 1024} KiB took ${run.ms.toFixed(0)} ms${growth}`;
      assert.ok(run.events !== undefined, `${took}, over the budget of ${budgetMs.toFixed(0)} ms: parsing is not linear`);
      assert.equal(run.events.length, 1, took);
      const event = run.events[0];
      assert.ok(event?.kind === 'binary', took);
      assert.equal(event.frame.payload.length, size, took);
      assert.ok(event.frame.payload.equals(payload.subarray(0, size)), `${took}: payload content`);
      assert.ok(event.frame.raw.equals(raw), `${took}: raw frame`);
      previousMs = run.ms;
      previousSize = size;
    }
  });
});
