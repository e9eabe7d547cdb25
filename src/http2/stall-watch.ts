// The answer streams of one workload connection whose writer was told to wait (the client's window at zero, or its
// socket full), on a QuietWatch: one that sent nothing of its answer for the stall limit is handed over to be reset.
// A stalled answer holds its upstream stream, and so a slot of the origin's concurrency, while the client reads none.

import type { Timers } from '../shared/timers.js';
import { QuietWatch, type Watched } from './quiet-watch.js';

/** docs/destinations.md#http2: an answer that sends nothing for this long while its writer waits is reset (as nginx's send_timeout). */
export const H2_STREAM_STALL_TIMEOUT_MS = 60_000;

/** What the watch reads and marks on a stream. */
export interface Stalling extends Watched {
  /** Answer octets still queued: while its writer waits they only shrink, as frames go out. */
  readonly queued: number;
  /** `queued` when the stream was last seen to move. */
  stallQueued: number;
}

export class StallWatch<S extends Stalling> {
  private readonly watch: QuietWatch<S>;

  /** `stalled`: the stream sent nothing for `limitMs` while its writer waited; it is no longer watched. */
  constructor(timers: Timers, limitMs: number, stalled: (stream: S) => void) {
    this.watch = new QuietWatch<S>(timers, limitMs, (stream) => {
      if (stream.queued < stream.stallQueued) {
        // Part of its answer went out since: its clock starts again.
        stream.stallQueued = stream.queued;
        return false;
      }
      stalled(stream);
      return true;
    });
  }

  /** The stream's writer was told to wait: its clock starts, unless it is already running. */
  add(stream: S): void {
    if (this.watch.has(stream)) return;
    stream.stallQueued = stream.queued;
    this.watch.add(stream);
  }

  /** The writer may go on, or the stream is gone. */
  delete(stream: S): void {
    this.watch.delete(stream);
  }

  /** The connection is gone: nothing is watched any more. */
  clear(): void {
    this.watch.clear();
  }
}
