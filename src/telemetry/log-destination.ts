// The default log destination: lines batched into a byte slab and written to a file descriptor (stdout). A regular
// file is written from the event loop by sonic-boom (pino.destination); a pipe or socket through Node's own
// non-blocking stream on it (log-stream.ts); anything else asynchronously by sonic-boom, which keeps its EAGAIN
// retry, EPIPE handling and exit flush.
import { fstatSync } from 'node:fs';
import { createStreamWriter, type ChunkWriter } from './log-stream.js';
import { pino } from './pino.js';
import type { LinePart, LogDestination } from './logger.js';

/** Pending lines are handed to an asynchronous writer once they reach this many bytes. Each asynchronous write(2)
 *  is a hop (~15 µs of CPU on the proxy's one core), and the pool thread's copy into the kernel runs on that same core,
 *  where the event loop waits for it: measured forward-proxy p99 was 8.8 ms with 64 KB batches, 9.3 ms with
 *  256 KB and 3.0–5.0 ms with 16 KB (squid 2.5–2.9 ms), for about 1–3 µs more CPU per request... */
const LOG_BATCH_BYTES = 16_384;
/** The batch for a regular file, written from the loop (writeMode): no hop, and a write's cost is mostly per
 *  call, so larger batches; lines still go out within LOG_FLUSH_INTERVAL_MS when traffic is light. */
export const LOG_FILE_BATCH_BYTES = 65_536;
/** The batch for stdout on a pipe or socket, written from the loop while the reader keeps up: a pipe holds 64 KB by
 *  default, and larger batches measured no better (docs/benchmarks.md#the-audit-log-through-a-pipe). */
export const LOG_STREAM_BATCH_BYTES = 16_384;
/** ...queued batches are joined into one write(2) up to this many bytes when the fd is slower than we are... */
const LOG_MAX_WRITE_BYTES = 262_144;
/** ...and pending lines are handed over at most this long after the first of them, so a line is out within it when
 *  traffic is light. Its one-shot timer runs only while lines are pending: an idle sidecar is never woken by its log. */
const LOG_FLUSH_INTERVAL_MS = 200;
/** Lines are encoded straight into slabs of this size (no Buffer per line); another slab when one fills up. */
export const LOG_SLAB_BYTES = 262_144;
/** Bytes handed to the writer and not yet written past which new lines are dropped (and counted) rather than held:
 *  a reader of stdout that stops reading must not grow the sidecar's memory without bound. */
export const LOG_PENDING_MAX_BYTES = 16 * 1_048_576;
/** Once dropping, lines are taken again when the writer is down to this many pending bytes. */
const LOG_PENDING_RESUME_BYTES = LOG_PENDING_MAX_BYTES / 2;
/** Slabs whose every batch was handed over, kept to be filled again once the writer has written them all. */
const MAX_SPARE_SLABS = 2;
/** UTF-8 needs at most 3 bytes per UTF-16 code unit (a surrogate pair: 4 bytes for 2 units). */
const MAX_UTF8_BYTES_PER_UNIT = 3;
/** Text parts up to this long are copied by a character loop when ASCII; longer ones by the encoder. */
const MAX_LOOP_COPY_CHARS = 64;
/** Decimal digits of the largest safe integer, the most a number part writes. */
const MAX_SAFE_INTEGER_DIGITS = 16;
const DIGIT_ZERO = 0x30;

/** Writes the non-negative safe integer `value` at `at` in decimal; returns the bytes written. */
function putInteger(slab: Buffer, at: number, value: number): number {
  let digits = 1;
  for (let power = 10; power <= value; power *= 10) digits++;
  let rest = value;
  for (let i = at + digits - 1; i >= at; i--) {
    const quotient = Math.floor(rest / 10);
    slab[i] = DIGIT_ZERO + (rest - quotient * 10);
    rest = quotient;
  }
  return digits;
}

/**
 * Writes `text` at `at` as UTF-8; returns the bytes written, or -1 when `text` ends in the high half of a
 * surrogate pair (encoded alone, it would not join the low half that may start the next part, as it does in
 * the line encoded whole). Short ASCII text is copied by a loop (a native write costs more than its bytes);
 * anything else is written by the encoder, over what the loop wrote.
 */
function putText(slab: Buffer, at: number, text: string): number {
  const length = text.length;
  if (length <= MAX_LOOP_COPY_CHARS) {
    let i = 0;
    for (; i < length; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0x80) break;
      slab[at + i] = c;
    }
    if (i === length) return length;
  }
  const last = text.charCodeAt(length - 1);
  if (last >= 0xd800 && last <= 0xdbff) return -1;
  return slab.write(text, at);
}

/** How lines reach `fd`: see the file's head. */
export type WriteMode = 'file' | 'stream' | 'pool';

/**
 * A regular file only copies into the page cache: written from the event loop, as Node writes its own stdout to
 * a file (through the thread pool, the hop costs more CPU than the copy:
 * docs/benchmarks.md#fourth-pass-the-audit-log-written-from-the-loop). stdout or stderr on a pipe or socket is
 * Node's non-blocking stream: tried from the loop, queued while the reader is behind. Anything else (a terminal,
 * another descriptor) goes through the thread pool: a reader that stops reading must never stop the proxy.
 */
export function writeMode(fd: number): WriteMode {
  try {
    const stat = fstatSync(fd);
    if (stat.isFile()) return 'file';
    if ((fd === 1 || fd === 2) && (stat.isFIFO() || stat.isSocket())) return 'stream';
  } catch {
    // Not open, or not ours to stat: the thread pool's writer reports what goes wrong.
  }
  return 'pool';
}

/** Destinations whose writer pino does not flush at exit (it hooks only the asynchronous sonic-boom). */
const flushedAtExit = new Set<ChunkWriter>();

function flushAllAtExit(): void {
  for (const writer of flushedAtExit) writer.flushSync();
}

function chunkWriter(fd: number, mode: WriteMode): ChunkWriter {
  if (mode === 'stream') return createStreamWriter(fd === 1 ? process.stdout : process.stderr);
  // No periodicFlush: sonic-boom writes what it is given at once, or as soon as the write before it completes; what
  // it holds back is at most minLength bytes (never a line), so its timer would only make empty writes.
  return pino.destination({
    dest: fd,
    sync: mode === 'file',
    contentMode: 'buffer',
    // Batching happens here; sonic-boom writes whatever it is given as soon as it is not already writing.
    // (minLength 0 would make flush(callback) return before the bytes are written.)
    minLength: 1,
    maxWrite: LOG_MAX_WRITE_BYTES,
  }) as unknown as ChunkWriter;
}

const BATCH_BYTES: Readonly<Record<WriteMode, number>> = { file: LOG_FILE_BATCH_BYTES, stream: LOG_STREAM_BATCH_BYTES, pool: LOG_BATCH_BYTES };

export interface BufferedDestinationOptions {
  /** Called when lines are taken again after some were dropped (LOG_PENDING_MAX_BYTES), with how many were. */
  readonly onResume?: (dropped: number) => void;
}

/**
 * A destination on `fd`, written as writeMode says. Each line is UTF-8 encoded once, into the free tail of a slab; a
 * batch (a view of the slab, never written to again) goes to the writer as one chunk. Lines not yet handed over
 * live only here: a one-shot timer, armed when a line stays pending and none is armed, hands them over within
 * LOG_FLUSH_INTERVAL_MS, and every way the writer is told to flush (the exit hook (pino's, or this file's for the
 * writers pino does not hook), `logger.flush()`) hands them over first. While the writer is more than
 * LOG_PENDING_MAX_BYTES behind, new lines are dropped and counted, until it is down to LOG_PENDING_RESUME_BYTES.
 */
export function createBufferedDestination(fd: number, options: BufferedDestinationOptions = {}): LogDestination {
  const mode = writeMode(fd);
  const writer = chunkWriter(fd, mode);
  const batchBytes = BATCH_BYTES[mode];
  let slab: Buffer = Buffer.allocUnsafeSlow(LOG_SLAB_BYTES);
  let batchStart = 0;
  let fill = 0;
  // Bytes handed to the writer and bytes it wrote, since the start: it writes in the order given, so a slab whose
  // batches all end at or before `written` is no longer read, and is filled again rather than a fresh one (fresh
  // memory costs its pages on first touch). A write that never completes (an error) only means fresh slabs again.
  let handed = 0;
  let written = 0;
  const spares: { readonly slab: Buffer; readonly end: number }[] = [];
  let dropping = false;
  let dropped = 0;
  /** `dropped` when dropping began: what the resume reports is the difference. */
  let droppedBefore = 0;
  /** Set while lines may be pending (from the first line that stays in the batch until it fires or a flush). */
  let flushTimer: NodeJS.Timeout | undefined;
  writer.on('write', (n) => {
    written += n;
    if (dropping && handed - written <= LOG_PENDING_RESUME_BYTES) {
      dropping = false;
      options.onResume?.(dropped - droppedBefore);
    }
  });

  function give(chunk: Buffer): boolean {
    handed += chunk.length;
    if (!dropping && handed - written > LOG_PENDING_MAX_BYTES) {
      dropping = true;
      droppedBefore = dropped;
    }
    return writer.write(chunk);
  }

  function drop(): boolean {
    dropped++;
    return true;
  }

  function handOver(): void {
    if (fill === batchStart) return;
    const batch = slab.subarray(batchStart, fill);
    batchStart = fill;
    give(batch);
  }

  // Left to lapse when a full batch goes out (clearing and arming it per batch would cost the busy path), so it may
  // find nothing to hand over.
  function onFlushTimer(): void {
    flushTimer = undefined;
    handOver();
  }

  function armFlush(): void {
    flushTimer = setTimeout(onFlushTimer, LOG_FLUSH_INTERVAL_MS);
    flushTimer.unref();
  }

  /** After a line went into the batch: a full batch goes now, else the timer sees that the line goes in time. */
  function lineAdded(): void {
    if (fill - batchStart >= batchBytes) handOver();
    else if (flushTimer === undefined) armFlush();
  }

  /** For a flush: the batch goes now, and the timer has nothing left to hand over. */
  function handOverNow(): void {
    if (flushTimer !== undefined) {
      clearTimeout(flushTimer);
      flushTimer = undefined;
    }
    handOver();
  }

  /** A slab to fill: a spare the writer has written out, else a new one; the full one becomes a spare. */
  function nextSlab(): Buffer {
    const spare = spares[0];
    const full = slab;
    const reused = spare !== undefined && spare.end <= written ? (spares.shift() as { slab: Buffer }).slab : undefined;
    if (spares.length < MAX_SPARE_SLABS) spares.push({ slab: full, end: handed });
    return reused ?? Buffer.allocUnsafeSlow(LOG_SLAB_BYTES);
  }

  // Instance methods, looked up by the exit hooks at call time: wrap them so lines still in the slab are
  // handed over before the writer flushes. (After EPIPE, pino replaces flushSync and write with no-ops;
  // lines are then dropped, as before.)
  const flush = writer.flush.bind(writer);
  const flushSync = writer.flushSync.bind(writer);
  writer.flush = (callback) => {
    handOverNow();
    flush(callback);
  };
  writer.flushSync = () => {
    handOverNow();
    flushSync();
  };
  if (mode !== 'pool') {
    if (flushedAtExit.size === 0) process.on('exit', flushAllAtExit);
    flushedAtExit.add(writer);
  }

  /** Makes room for `worst` bytes in the slab; false when no slab could hold them. */
  function room(worst: number): boolean {
    if (worst <= slab.length - fill) return true;
    handOver();
    if (worst > LOG_SLAB_BYTES) return false;
    slab = nextSlab();
    batchStart = 0;
    fill = 0;
    return true;
  }

  function write(line: string): boolean {
    if (dropping) return drop();
    if (!room(line.length * MAX_UTF8_BYTES_PER_UNIT)) return give(Buffer.from(line));
    fill += slab.write(line, fill);
    lineAdded();
    return true;
  }

  return {
    write,
    writeParts(parts: readonly LinePart[]): boolean {
      // Each part straight into the slab: the line is never one string (flattening it costs as much as
      // encoding it). Bytes parts are copied as they are.
      if (dropping) return drop();
      let worst = 0;
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i] as LinePart;
        worst += typeof part === 'string' ? part.length * MAX_UTF8_BYTES_PER_UNIT : typeof part === 'number' ? MAX_SAFE_INTEGER_DIGITS : part.length;
      }
      if (!room(worst)) return write(joinParts(parts));
      const lineStart = fill;
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i] as LinePart;
        if (typeof part === 'number') {
          fill += putInteger(slab, fill, part);
          continue;
        }
        if (typeof part !== 'string') {
          slab.set(part, fill);
          fill += part.length;
          continue;
        }
        const written = putText(slab, fill, part);
        if (written < 0) {
          // Nothing of the line was handed over yet: take it back, and write it encoded whole.
          fill = lineStart;
          return write(joinParts(parts));
        }
        fill += written;
      }
      lineAdded();
      return true;
    },
    flush: (callback) => writer.flush(callback),
    droppedLines: () => dropped,
  };
}

/** The line as one string (bytes parts decoded: they are UTF-8 of well-formed text). */
export function joinParts(parts: readonly LinePart[]): string {
  let line = '';
  for (const part of parts) {
    line += typeof part === 'string' || typeof part === 'number' ? `${part}` : Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('utf8');
  }
  return line;
}
