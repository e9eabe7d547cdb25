// The default log destination: lines batched into a byte slab and written to a file descriptor (stdout)
// asynchronously by sonic-boom (pino.destination), which keeps its EAGAIN retry, EPIPE handling and exit flush.
import { pino } from 'pino';
import type { LogDestination } from './logger.js';

/** Pending lines are handed to the writer once they reach this many bytes: each write(2) is a thread-pool
 *  hop (~15 µs of CPU on the proxy's one core), so one per ~45 audit lines rather than one per ~11... */
export const LOG_BATCH_BYTES = 65_536;
/** ...queued batches are joined into one write(2) up to this many bytes when the fd is slower than we are... */
export const LOG_MAX_WRITE_BYTES = 262_144;
/** ...and pending lines are written at least this often when traffic is light, so a line is out within it. */
export const LOG_FLUSH_INTERVAL_MS = 200;
/** Lines are encoded straight into slabs of this size (no Buffer per line); a new slab when one fills up. */
export const LOG_SLAB_BYTES = 262_144;
/** UTF-8 needs at most 3 bytes per UTF-16 code unit (a surrogate pair: 4 bytes for 2 units). */
const MAX_UTF8_BYTES_PER_UNIT = 3;

interface SonicBoomBuffer {
  write(chunk: Buffer): boolean;
  flush(callback?: ((err?: Error | null) => void) | null): void;
  flushSync(): void;
}

/**
 * An asynchronous destination on `fd`. Each line is UTF-8 encoded once, into the free tail of a slab; a
 * batch (a view of the slab, never written to again) goes to sonic-boom's buffer mode as one chunk. Lines
 * not yet handed over live only here, so every way sonic-boom is told to flush (its periodic timer, pino's
 * exit handler calling flushSync, `logger.flush()`) hands them over first.
 */
export function createBufferedDestination(fd: number): LogDestination {
  const boom = pino.destination({
    dest: fd,
    sync: false,
    contentMode: 'buffer',
    // Batching happens here; sonic-boom writes whatever it is given as soon as it is not already writing.
    // (minLength 0 would make flush(callback) return before the bytes are written.)
    minLength: 1,
    maxWrite: LOG_MAX_WRITE_BYTES,
    periodicFlush: LOG_FLUSH_INTERVAL_MS,
  }) as unknown as SonicBoomBuffer;
  let slab = Buffer.allocUnsafeSlow(LOG_SLAB_BYTES);
  let batchStart = 0;
  let fill = 0;

  function handOver(): void {
    if (fill === batchStart) return;
    const batch = slab.subarray(batchStart, fill);
    batchStart = fill;
    boom.write(batch);
  }

  // Instance methods, looked up by sonic-boom's timer and pino's exit handler at call time: wrap them so
  // lines still in the slab are handed over before sonic-boom flushes. (After EPIPE, pino replaces
  // flushSync and write with no-ops; lines are then dropped, as before.)
  const flush = boom.flush.bind(boom);
  const flushSync = boom.flushSync.bind(boom);
  boom.flush = (callback) => {
    handOver();
    flush(callback);
  };
  boom.flushSync = () => {
    handOver();
    flushSync();
  };

  return {
    write(line: string): boolean {
      const worst = line.length * MAX_UTF8_BYTES_PER_UNIT;
      if (worst > slab.length - fill) {
        handOver();
        if (worst > LOG_SLAB_BYTES) return boom.write(Buffer.from(line));
        slab = Buffer.allocUnsafeSlow(LOG_SLAB_BYTES);
        batchStart = 0;
        fill = 0;
      }
      fill += slab.write(line, fill);
      if (fill - batchStart >= LOG_BATCH_BYTES) handOver();
      return true;
    },
    flush: (callback) => boom.flush(callback),
  };
}
