// Log batches to stdout or stderr when it is a pipe or a socket (a container's stdout is a pipe to its runtime),
// through the stream Node already keeps on that descriptor. Node makes it non-blocking, so each write is tried at
// once from the event loop and waits for the reader only while the pipe is full: no thread-pool hop per write
// (docs/benchmarks.md#the-audit-log-through-a-pipe), and a reader that stops reading never blocks the proxy.
import type { Writable } from 'node:stream';

/** What the buffered destination hands its batches to: sonic-boom, or the stream writer below. */
export interface ChunkWriter {
  write(chunk: Buffer): boolean;
  /** 'write': `n` more bytes of what it was given went out, in the order given. */
  on(event: 'write', listener: (n: number) => void): void;
  /** Calls back once everything given so far is written (or can never be). */
  flush(callback?: ((err?: Error | null) => void) | null): void;
  /** At exit, with no event loop left: what can still be written now. */
  flushSync(): void;
}

interface Waiter {
  readonly until: number;
  readonly callback: (err?: Error | null) => void;
}

/** Streams with the one 'error' listener every stream written here needs (else an EPIPE would be thrown). */
const guarded = new WeakSet<Writable>();

function guard(stream: Writable): void {
  if (guarded.has(stream)) return;
  guarded.add(stream);
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}

/**
 * A ChunkWriter on `stream` (process.stdout or process.stderr on a pipe or socket). It keeps no timer: each chunk is
 * tried at once, and what the pipe could not take goes out as the reader drains it.
 * A write the stream could not finish by exit is lost, as for any asynchronous stdout; boundary's shutdown waits
 * for flush() instead. A reader that goes away (EPIPE) ends logging, as pino does; any other write error is thrown.
 */
export function createStreamWriter(stream: Writable): ChunkWriter {
  let given = 0;
  let done = 0;
  let broken = false;
  let onWrite: (n: number) => void = () => {};
  const waiters: Waiter[] = [];

  function settle(): void {
    while (waiters.length > 0 && (broken || (waiters[0] as Waiter).until <= done)) (waiters.shift() as Waiter).callback(null);
  }

  const writer: ChunkWriter = {
    write(chunk) {
      if (broken) return true;
      const n = chunk.length;
      given += n;
      stream.write(chunk, (err) => {
        if (err) broken = true;
        else {
          done += n;
          onWrite(n);
        }
        settle();
      });
      return true;
    },
    on(_event, listener) {
      onWrite = listener;
    },
    flush(callback) {
      if (callback === undefined || callback === null) return;
      if (broken || done >= given) process.nextTick(callback, null);
      else waiters.push({ until: given, callback });
    },
    // Handing a batch over (what a caller's wrapper does first) already tries the write at once; nothing is left
    // that could be written without the loop.
    flushSync() {},
  };

  guard(stream);
  return writer;
}
