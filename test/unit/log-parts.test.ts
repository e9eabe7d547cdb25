import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createBufferedDestination, joinParts, LOG_FILE_BATCH_BYTES, LOG_SLAB_BYTES, writeMode } from '../../src/telemetry/log-destination.js';
import type { LinePart, LogDestination } from '../../src/telemetry/logger.js';
import { seeded } from '../harness/audit-events.js';

const PIECES = ['a', '{"k":1}', '"', '\\', 'é', '日本', '😀', '\ud83d', '\ude00', '\ud800x', 'x\udbff', '\u0000', '\u007f', '\u0080', '\u2028'];

/** Text of `count` pieces: ASCII mostly, now and then anything (lone surrogates included). */
function randomText(random: () => number, count: number): string {
  let out = '';
  for (let i = 0; i < count; i++) out += random() < 0.7 ? String.fromCharCode(32 + Math.floor(random() * 95)) : (PIECES[Math.floor(random() * PIECES.length)] as string);
  return out;
}

/** Either side of each power of ten up to 16 digits, a time in milliseconds, and the largest safe integer. */
const EDGE_INTEGERS = [0, ...Array.from({ length: 15 }, (_, k) => [10 ** (k + 1) - 1, 10 ** (k + 1)]).flat(), 1_796_629_926_963, Number.MAX_SAFE_INTEGER];

/** A non-negative safe integer of any length, edges often. */
function randomInteger(random: () => number): number {
  if (random() < 0.3) return EDGE_INTEGERS[Math.floor(random() * EDGE_INTEGERS.length)] as number;
  return Math.floor(random() * 10 ** Math.floor(random() * 16));
}

/** Bytes parts as their producers make them: UTF-8 of text starting and ending in ASCII; number parts too. */
function randomParts(random: () => number): LinePart[] {
  const parts: LinePart[] = [];
  const count = 1 + Math.floor(random() * 8);
  for (let i = 0; i < count; i++) {
    if (random() < 0.15) {
      parts.push(randomInteger(random));
      continue;
    }
    const roll = random();
    // Some texts cross the copy loop's length limit (64), some are long.
    const length = roll < 0.1 ? 0 : roll < 0.8 ? Math.floor(random() * 80) : 500 + Math.floor(random() * 3000);
    const text = randomText(random, length);
    parts.push(random() < 0.4 ? Buffer.from(`<${text.replace(/[\ud800-\udfff]/g, '?')}>`) : text);
  }
  return parts;
}

/**
 * Runs `use` on a buffered destination writing to a temporary file; resolves the file's bytes. The fd stays
 * open until the process exits: a destination has no close.
 */
async function writtenBytes(use: (destination: LogDestination) => void): Promise<Buffer> {
  const dir = mkdtempSync(join(tmpdir(), 'boundary-log-parts-'));
  const file = join(dir, 'out.log');
  try {
    const destination = createBufferedDestination(openSync(file, 'w'));
    use(destination);
    await new Promise<void>((resolve, reject) => destination.flush?.((err) => (err ? reject(err) : resolve())));
    return readFileSync(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the buffered destination, a line in parts', () => {
  it('writes exactly the bytes of write(parts joined), for seeded pseudo-random parts', async () => {
    const random = seeded(31);
    const lines = Array.from({ length: 3_000 }, () => randomParts(random));
    const viaParts = await writtenBytes((destination) => {
      for (const parts of lines) destination.writeParts?.(parts);
    });
    const viaWrite = await writtenBytes((destination) => {
      for (const parts of lines) destination.write(joinParts(parts));
    });
    const expected = Buffer.from(lines.map((parts) => joinParts(parts)).join(''));
    assert.ok(viaWrite.equals(expected));
    assert.equal(viaParts.length, expected.length);
    assert.ok(viaParts.equals(expected), 'bytes differ');
  });

  it('writes a number part as JSON writes the number, at every count of digits', async () => {
    const lines: LinePart[][] = EDGE_INTEGERS.map((n) => ['{"n":', n, Buffer.from(',"m":'), n + 1 <= Number.MAX_SAFE_INTEGER ? n + 1 : 0, '}\n']);
    const bytes = await writtenBytes((destination) => {
      for (const parts of lines) destination.writeParts?.(parts);
    });
    const expected = lines.map((parts) => JSON.stringify({ n: parts[1], m: parts[3] })).join('\n');
    assert.equal(bytes.toString(), `${expected}\n`);
  });

  it('joins a surrogate pair split across two text parts as the whole line would', async () => {
    const cases: LinePart[][] = [
      ['a\ud83d', '\ude00b'],
      ['\ud83d', '\ude00', Buffer.from('x')],
      ['\ud83d', Buffer.from('x'), '\ude00'],
      ['x'.repeat(70), '\ud83d', '\ude00'],
    ];
    const bytes = await writtenBytes((destination) => {
      for (const parts of cases) destination.writeParts?.(parts);
    });
    assert.ok(bytes.equals(Buffer.from(cases.map((parts) => joinParts(parts)).join(''))));
  });

  it('keeps lines longer than a slab, in order with the lines around them', async () => {
    const big: LinePart[] = ['start ', Buffer.from('y'.repeat(LOG_SLAB_BYTES)), ' end\n'];
    const lines: LinePart[][] = [['one\n'], big, [Buffer.from('two'), '\n']];
    const bytes = await writtenBytes((destination) => {
      for (const parts of lines) destination.writeParts?.(parts);
    });
    assert.ok(bytes.equals(Buffer.from(lines.map((parts) => joinParts(parts)).join(''))));
  });
});

describe('the buffered destination, slabs filled again', () => {
  it('fills a slab again once it is written, and every line comes out as given, bursts and ticks mixed', async () => {
    const random = seeded(47);
    // About 12 slabs of lines, each line numbered so a slab filled again too early would show as a line out of place.
    const lines: string[] = [];
    for (let bytes = 0, i = 0; bytes < LOG_SLAB_BYTES * 12; i++) {
      const line = `${i} ${randomText(random, Math.floor(random() * 600))}\n`;
      lines.push(line);
      bytes += Buffer.byteLength(line);
    }
    const slabs: number[] = [];
    const alloc = Buffer.allocUnsafeSlow;
    Buffer.allocUnsafeSlow = (size: number) => {
      if (size === LOG_SLAB_BYTES) slabs.push(size);
      return alloc(size);
    };
    let bytes: Buffer;
    try {
      const dir = mkdtempSync(join(tmpdir(), 'boundary-log-slabs-'));
      try {
        const file = join(dir, 'out.log');
        const destination = createBufferedDestination(openSync(file, 'w'));
        let at = 0;
        while (at < lines.length) {
          // A tick of a few lines (their batch is written before the next), or a burst of two slabs' worth in one.
          const burst = random() < 0.2;
          for (let written = 0; at < lines.length && written < (burst ? 2 * LOG_SLAB_BYTES : 20_000); at++) {
            const line = lines[at] as string;
            if (random() < 0.5) destination.write(line);
            else destination.writeParts?.(['', Buffer.from(line.slice(0, 1)), line.slice(1)]);
            written += Buffer.byteLength(line);
          }
          await new Promise<void>((resolve) => destination.flush?.(() => resolve()));
        }
        bytes = readFileSync(file);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      Buffer.allocUnsafeSlow = alloc;
    }
    assert.ok(bytes.equals(Buffer.from(lines.join(''))), 'bytes differ');
    assert.ok(slabs.length < 8, `${slabs.length} slabs made for about 12 filled`);
  });
});

describe('the buffered destination on a regular file', () => {
  it('writes a full batch from the event loop: the file has it before the turn ends', () => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-log-file-'));
    try {
      const file = join(dir, 'out.log');
      const fd = openSync(file, 'w');
      assert.equal(writeMode(fd), 'file');
      const destination = createBufferedDestination(fd);
      // Past one batch: handed over, and written, in this turn.
      const line = `${'x'.repeat(999)}\n`;
      for (let written = 0; written <= LOG_FILE_BATCH_BYTES; written += line.length) destination.write(line);
      const bytes = readFileSync(file);
      assert.ok(bytes.length >= LOG_FILE_BATCH_BYTES && bytes.length % line.length === 0, `${bytes.length} bytes in the file`);
      assert.ok(bytes.equals(Buffer.from(line.repeat(bytes.length / line.length))));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('leaves a pipe on a descriptor other than stdout or stderr to the thread pool', () => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-log-fifo-'));
    try {
      const fifo = join(dir, 'fifo');
      execFileSync('mkfifo', [fifo]);
      // O_RDWR: opens without a reader on the other end.
      const fd = openSync(fifo, 'r+');
      try {
        assert.equal(writeMode(fd), 'pool');
      } finally {
        closeSync(fd);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
