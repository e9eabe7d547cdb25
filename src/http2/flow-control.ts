// HTTP/2 flow control on one connection (RFC 9113 §6.9), both ways, for either end: the upstream client sends request
// bodies and receives responses, the workload-facing server the other way round. Out: each stream's queued body goes
// as DATA frames as far as its window and the connection's allow, END_STREAM (or trailers) once the queue is empty,
// and a writer told to wait (queue past the high-water mark, or the socket full) is woken when it may go on. In:
// received DATA is given back to the peer as window only once the proxy is done with it, so a slow reader holds at
// most a window of each stream and of the connection.

import type { FrameWriter } from './frame-writer.js';
import { Flag, FrameType, H2_DEFAULT_WINDOW, H2_FRAME_BYTES, frame32 } from './frames.js';

/** Body bytes queued on a stream beyond its send window before the body's source is asked to wait. */
export const H2_UPSTREAM_BODY_HIGH_WATER_BYTES = 65_536;
/** The connection-level receive window toward an origin: 100 streams can each fill their default window at once. */
export const H2_UPSTREAM_CONNECTION_WINDOW = 16 * 1024 * 1024;

/** What flow control reads and moves on a stream (upstream-stream.ts UpstreamStream, request-stream.ts RequestStream). */
export interface FlowStream {
  readonly id: number;
  /** open: frames may go out; gone: reset, failed or both sides ended (waiting: not started, upstream only). */
  readonly state: 'waiting' | 'open' | 'gone';
  sendWindow: number;
  recvWindow: number;
  /** Received octets handed on (or padding) and not yet given back to the peer as stream window. */
  unacked: number;
  localEnded: boolean;
  readonly remoteEnded: boolean;
  /** Body octets waiting for window, and their total. */
  readonly queue: Buffer[];
  queued: number;
  /** END_STREAM waits behind the queue: trailers (a list) or an empty DATA (null). */
  ending: string[] | null | undefined;
  /** A write returned false: events.writable() is owed. */
  blocked: boolean;
  readonly events: { writable(): void };
}

/** What the peer may still send: the connection window, and each stream's. */
export class ReceiveWindows {
  /** DATA octets received and not yet returned to the origin as connection window. */
  private outstanding = 0;
  /** Of those, octets the proxy is done with, waiting to be returned in one WINDOW_UPDATE. */
  private free = 0;
  private readonly out: FrameWriter;
  private readonly size: number;

  /** `size`: the connection window this end grants, past the default 65,535 (open() announces it). */
  constructor(out: FrameWriter, size: number) {
    this.out = out;
    this.size = size;
  }

  /** The first WINDOW_UPDATE: the connection window from the default to its size. */
  open(): void {
    this.out.send(frame32(FrameType.WINDOW_UPDATE, 0, this.size - H2_DEFAULT_WINDOW));
  }

  /** A DATA frame of `n` octets arrived; false: past the connection window (a FLOW_CONTROL_ERROR). */
  received(n: number): boolean {
    this.outstanding += n;
    return this.outstanding <= this.size;
  }

  /** `n` received octets are no longer held: the connection window gets them back, half a window at a time. */
  giveBack(n: number): void {
    this.free += n;
    if (this.free < this.size / 2) return;
    this.out.send(frame32(FrameType.WINDOW_UPDATE, 0, this.free));
    this.outstanding -= this.free;
    this.free = 0;
  }

  /** The proxy handed on `n` octets of a stream's data: both windows get them back. */
  consumed(stream: FlowStream, n: number): void {
    this.giveBack(n);
    stream.unacked += n;
    if (stream.state !== 'open' || stream.remoteEnded || stream.unacked < H2_DEFAULT_WINDOW / 2) return;
    this.out.send(frame32(FrameType.WINDOW_UPDATE, stream.id, stream.unacked));
    stream.recvWindow += stream.unacked;
    stream.unacked = 0;
  }
}

export class BodySender {
  /** The connection's send window (WINDOW_UPDATE on stream 0 grows it). */
  window = H2_DEFAULT_WINDOW;
  private readonly out: FrameWriter;
  /** END_STREAM went out on a stream (the stream is done if the peer's side had ended too). */
  private readonly ended: (stream: FlowStream) => void;

  constructor(out: FrameWriter, ended: (stream: FlowStream) => void) {
    this.out = out;
    this.ended = ended;
  }

  /** Queues body octets; false asks the writer to wait for events.writable(). */
  write(stream: FlowStream, chunk: Buffer): boolean {
    if (stream.state === 'gone' || stream.localEnded) return true;
    const n = chunk.length;
    if (stream.state === 'open' && stream.queued === 0 && !stream.blocked && stream.ending === undefined && n > 0 && n <= H2_FRAME_BYTES && n <= stream.sendWindow && n <= this.window) {
      // Nothing waits before it and the windows take it all: one DATA frame now, without a turn through the queue.
      this.out.data(stream.id, 0, chunk);
      stream.sendWindow -= n;
      this.window -= n;
      if (!this.out.needDrain) return true;
      stream.blocked = true;
      return false;
    }
    stream.queue.push(chunk);
    stream.queued += n;
    if (stream.state === 'open') this.flush(stream);
    const ok = stream.queued < H2_UPSTREAM_BODY_HIGH_WATER_BYTES && !this.out.needDrain;
    if (!ok) stream.blocked = true;
    return ok;
  }

  /** The body ends after what is queued: trailers (a list) or an empty DATA frame (null). */
  end(stream: FlowStream, trailers: string[] | null): void {
    if (stream.state === 'gone' || stream.localEnded || stream.ending !== undefined) return;
    stream.ending = trailers;
    if (stream.state === 'open') this.flush(stream);
  }

  /** Sends what the windows allow of a stream's queued body, then its END_STREAM once the queue is empty. */
  flush(stream: FlowStream): void {
    while (stream.queue.length > 0) {
      const room = Math.min(stream.sendWindow, this.window, H2_FRAME_BYTES);
      if (room <= 0) return;
      const head = stream.queue[0]!;
      const n = Math.min(room, head.length);
      this.out.data(stream.id, 0, head, 0, n);
      stream.sendWindow -= n;
      this.window -= n;
      stream.queued -= n;
      if (n === head.length) stream.queue.shift();
      else stream.queue[0] = head.subarray(n);
    }
    if (stream.ending !== undefined && !stream.localEnded) {
      stream.localEnded = true;
      if (stream.ending === null || stream.ending.length === 0) {
        if (!this.out.endOnLastData(stream.id)) this.out.data(stream.id, Flag.END_STREAM);
      }
      else this.out.headers(stream.id, stream.ending, true);
      this.ended(stream);
    }
    if (stream.blocked && stream.queued < H2_UPSTREAM_BODY_HIGH_WATER_BYTES && !this.out.needDrain) {
      stream.blocked = false;
      stream.events.writable();
    }
  }

  /**
   * A window grew or the socket drained: every stream with something to send tries again. `streams` is taken before
   * the walk (stream-table.ts values()), so one that went during it is passed over here.
   */
  flushAll(streams: Iterable<FlowStream>): void {
    for (const stream of streams) {
      if (stream.state === 'open' && (stream.queued > 0 || stream.blocked || (stream.ending !== undefined && !stream.localEnded))) this.flush(stream);
    }
  }
}
