// Frames out to one peer, origin or workload: what a tick produces goes out in writes of up to H2_FRAMES_PER_WRITE
// frames joined into one buffer (one TLS record and one syscall for many frames, where a write per frame cost each),
// and a header block longer than a frame is split into HEADERS and CONTINUATION. Knows nothing of streams or windows.
// The frames of a write are built in place in a batch buffer borrowed for the tick (header blocks encoded into it,
// DATA payloads copied in once), so a frame is no buffer of its own.

import type { Socket } from 'node:net';
import { FRAME_HEADER_BYTES, Flag, FrameType, H2_FRAME_BYTES, frame, writeFrameHeader } from './frames.js';
import { encodeHeaderBlockAfter, encodeHeaderBlockInto, headerBlockBound } from './hpack-encode.js';

/**
 * Frames one write carries at most. A burst of streams read in one tick (100 HEADERS from a client) would otherwise
 * reach the peer only once all of them were handled, so the peer idles while boundary works and boundary idles
 * while the peer does. Writing every 16 frames lets the two overlap: measured with bench/h2.sh (one connection, 100
 * streams at once, 3 interleaved rounds, 6, 16 and 32 tried), +18-30 % req/s for up to 8 % more CPU per request.
 */
export const H2_FRAMES_PER_WRITE = 16;
/**
 * A batch buffer's size: two full frames. A batch is written once the socket's 16 KB high-water mark is reached, so a
 * full DATA frame after smaller ones (a WINDOW_UPDATE) still goes in the same write; a frame larger than what is left
 * starts a new one.
 */
export const H2_WRITE_BATCH_BYTES = 2 * (FRAME_HEADER_BYTES + H2_FRAME_BYTES);
/**
 * Batch buffers kept for reuse between ticks: as many as connections written in one tick (one origin's answers go to
 * every tunnel sharing its session), up to this many; past it, a batch is let go once written.
 */
export const H2_WRITE_BATCHES_KEPT = 32;

/** Batches no writer holds now. One is held only from a tick's first frame to its write, then given back here. */
const spareBatches: Buffer[] = [];

export class FrameWriter {
  /** socket.write asked to wait: request bodies hold until the socket drains. */
  needDrain = false;
  /**
   * The peer sent SETTINGS_HEADER_TABLE_SIZE: the next header block starts with a dynamic table size update to 0
   * (RFC 7541 §4.2, RFC 9113 §4.3.1), which any setting allows since the encoder never indexes. nghttp2 peers treat
   * a block without it as a COMPRESSION_ERROR once they lowered the size.
   */
  tableSizeUpdate = false;
  /**
   * Frames of this tick not yet written, back to back from 0 to `used`. Joined here rather than corked in the socket:
   * a corked socket keeps a record per write and hands the TLS layer a list, which cost more than one copy.
   */
  private batch: Buffer | undefined = undefined;
  private used = 0;
  private frames = 0;
  /** Where the last frame of the batch starts (-1: none). */
  private lastAt = -1;
  /** A flush is due at the end of this tick. */
  private scheduled = false;
  private stopped = false;
  private readonly socket: Socket;
  /** Made once per connection: a closure per tick would be garbage per tick. */
  private readonly flushAtTickEnd = (): void => {
    this.scheduled = false;
    this.flush();
  };

  constructor(socket: Socket) {
    this.socket = socket;
  }

  /** Nothing more is written (the connection is closed); what was sent already (a GOAWAY above all) goes out now. */
  stop(): void {
    this.flush();
    this.stopped = true;
  }

  /** A whole frame made elsewhere (SETTINGS, PING, WINDOW_UPDATE, RST_STREAM, GOAWAY, the preface). */
  send(buf: Buffer): void {
    if (this.stopped) return;
    const at = this.room(buf.length);
    if (at < 0) {
      this.writeNow(buf);
      return;
    }
    this.batch!.set(buf, at);
    this.added(at, buf.length);
  }

  /** A DATA frame of `payload` from `from` to `to`, copied once, into the batch. */
  data(id: number, flags: number, payload?: Buffer, from = 0, to = payload?.length ?? 0): void {
    if (this.stopped) return;
    const length = to - from;
    const n = FRAME_HEADER_BYTES + length;
    // A large frame with nothing batched before it, which would be written at once anyway: copied once, not twice.
    const alone = this.used === 0 && this.socket.writableLength + n >= this.socket.writableHighWaterMark;
    const at = alone ? -1 : this.room(n);
    if (at < 0) {
      this.writeNow(frame(FrameType.DATA, flags, id, payload, from, to));
      return;
    }
    const batch = this.batch!;
    writeFrameHeader(batch, at, length, FrameType.DATA, flags, id);
    if (payload !== undefined && length > 0) batch.set(from === 0 && to === payload.length ? payload : payload.subarray(from, to), at + FRAME_HEADER_BYTES);
    this.added(at, FRAME_HEADER_BYTES + length);
  }

  /**
   * Ends stream `id` on the last frame not yet written, when that is one of its DATA frames: END_STREAM set on it
   * rather than sent in an empty DATA frame of its own. False when it is not (the caller sends that frame).
   */
  endOnLastData(id: number): boolean {
    const { batch, lastAt } = this;
    if (batch === undefined || lastAt < 0 || batch[lastAt + 3] !== FrameType.DATA || batch.readUInt32BE(lastAt + 5) !== id) return false;
    batch[lastAt + 4] = (batch[lastAt + 4] as number) | Flag.END_STREAM;
    return true;
  }

  /** A header list, led by `:status` when `status` is given, as HEADERS and, past one frame, CONTINUATION frames (RFC 9113 §4.3). */
  headers(id: number, fields: readonly string[], endStream: boolean, status = 0): void {
    if (this.stopped) return;
    const end = endStream ? Flag.END_STREAM : 0;
    const bound = headerBlockBound(fields);
    if (bound <= H2_FRAME_BYTES) {
      // The block is encoded in place after room for its frame header; in one frame, it goes as it is.
      const at = this.room(FRAME_HEADER_BYTES + bound);
      if (at >= 0) {
        const batch = this.batch!;
        const to = encodeHeaderBlockInto(batch, at + FRAME_HEADER_BYTES, fields, this.tableSizeUpdate, status);
        this.tableSizeUpdate = false;
        writeFrameHeader(batch, at, to - at - FRAME_HEADER_BYTES, FrameType.HEADERS, end | Flag.END_HEADERS, id);
        this.added(at, to - at);
        return;
      }
    }
    const block = encodeHeaderBlockAfter(fields, 0, this.tableSizeUpdate, status);
    this.tableSizeUpdate = false;
    let at = Math.min(block.length, H2_FRAME_BYTES);
    this.send(frame(FrameType.HEADERS, at === block.length ? end | Flag.END_HEADERS : end, id, block, 0, at));
    while (at < block.length) {
      const to = Math.min(block.length, at + H2_FRAME_BYTES);
      this.send(frame(FrameType.CONTINUATION, to === block.length ? Flag.END_HEADERS : 0, id, block, at, to));
      at = to;
    }
  }

  /** Where `n` more octets go in the batch (a batch borrowed, or the full one written first); -1: larger than any batch. */
  private room(n: number): number {
    if (n > H2_WRITE_BATCH_BYTES) {
      this.flush();
      return -1;
    }
    if (this.batch === undefined) this.batch = spareBatches.pop() ?? Buffer.allocUnsafeSlow(H2_WRITE_BATCH_BYTES);
    else if (this.used + n > H2_WRITE_BATCH_BYTES) {
      this.flush();
      this.batch = spareBatches.pop() ?? Buffer.allocUnsafeSlow(H2_WRITE_BATCH_BYTES);
    }
    return this.used;
  }

  /** A frame of `n` octets was put at `at`; the batch goes now when full enough, else at the end of the tick. */
  private added(at: number, n: number): void {
    this.lastAt = at;
    this.used = at + n;
    this.frames++;
    // Past the socket's high-water mark the write goes now, so that its answer (wait for 'drain') is known at once,
    // as it was for each frame written into a corked socket.
    if (this.frames >= H2_FRAMES_PER_WRITE || this.socket.writableLength + this.used >= this.socket.writableHighWaterMark) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(this.flushAtTickEnd);
    }
  }

  /** A frame too large for a batch: what is batched goes first, then the frame as it is. */
  private writeNow(buf: Buffer): void {
    if (this.socket.destroyed) return;
    if (!this.socket.write(buf)) this.needDrain = true;
  }

  /** Writes the batched frames as one buffer of their size; the batch is given back for the next tick. */
  private flush(): void {
    const { batch, used } = this;
    if (batch === undefined) return;
    this.batch = undefined;
    this.used = 0;
    this.frames = 0;
    this.lastAt = -1;
    if (used > 0 && !this.socket.destroyed) {
      // The socket may hold what it is given until written: a copy of the frames' size, never the batch itself.
      const out = Buffer.allocUnsafe(used);
      out.set(batch.subarray(0, used));
      if (!this.socket.write(out)) this.needDrain = true;
    }
    if (spareBatches.length < H2_WRITE_BATCHES_KEPT) spareBatches.push(batch);
  }
}
