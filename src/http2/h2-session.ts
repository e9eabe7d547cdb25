// One HTTP/2 connection to an origin, client side (RFC 9113): the preface and SETTINGS, stream ids, HPACK both
// ways, flow control both ways, and every frame the origin sends checked before it moves a stream. What a stream
// carries goes to its UpstreamStream (h2-call.ts), which speaks to the proxy; this file speaks only HTTP/2.
// Written for the relay's hot path: node:http2's client costs about 125 µs a request on Node 20, mostly in its
// per-stream JS objects; this one keeps a record per stream and batches its writes per tick.

import type { Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { H2Connection } from './connection.js';
import type { FloodKind } from './flood-guard.js';
import { Flag, FrameReader, FrameType, H2_DEFAULT_WINDOW, H2_FRAME_BYTES, H2_MAX_31_BIT, H2Error, PREFACE, Setting, frame32, goawayFrame, readPeerSettings, settingsFrame } from './frames.js';
import { FrameWriter } from './frame-writer.js';
import { readSocket } from './socket-reads.js';
import { BodySender, type FlowStream, H2_UPSTREAM_CONNECTION_WINDOW, ReceiveWindows } from './flow-control.js';
import { H2_UPSTREAM_MAX_HEADER_LIST_BYTES, HeaderBlocks, UPSTREAM_HEADER_LIMITS } from './header-blocks.js';
import { type StreamOwner, UpstreamResetError, type UpstreamStream } from './upstream-stream.js';
import { StreamTable } from './stream-table.js';

/** Streams opened at once before the origin's first SETTINGS says how many it takes (nghttp2's and Go's assumption too). */
export const H2_UPSTREAM_ASSUMED_MAX_STREAMS = 100;
/** Streams opened at once when the origin's first SETTINGS names no SETTINGS_MAX_CONCURRENT_STREAMS: RFC 9113 sets
 *  no limit then, and a bound stays (Go's HTTP/2 client takes the same figure). */
export const H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS = 1000;

export interface H2SessionOptions {
  /** The connection is gone; every stream has failed or ended. */
  readonly onClose: (session: H2Session) => void;
  /** The origin's GOAWAY: no new stream may start here. */
  readonly onGoaway: (session: H2Session) => void;
  /** With no stream open for this long (no byte either way), the session closes. */
  readonly idleMs: number;
}

export class H2Session extends H2Connection implements StreamOwner {
  protected readonly peer = 'origin';
  peerInitialWindow = H2_DEFAULT_WINDOW;
  /** No new stream: GOAWAY either way, ids exhausted, or closed. */
  goneAway = false;
  closed = false;
  private peerMaxStreams = H2_UPSTREAM_ASSUMED_MAX_STREAMS;
  private nextId = 1;
  private readonly streams = new StreamTable<UpstreamStream>();
  /** Open streams whose consumer paused them: each holds its slot for as long as its client does not read. */
  private heldStreams = 0;
  private readonly waiting: UpstreamStream[] = [];
  /** The socket's last error, the cause of the close that follows it. */
  private socketError: Error | undefined;
  protected readonly blocks = new HeaderBlocks({ block: (id, end, list) => this.onBlock(id, end, list), error: (code, message) => this.fail(code, message) }, UPSTREAM_HEADER_LIMITS);
  private readonly reader: FrameReader;

  private readonly socket: Socket;
  protected readonly out: FrameWriter;
  protected readonly body: BodySender;
  private readonly windows: ReceiveWindows;
  private readonly options: H2SessionOptions;

  constructor(socket: Socket, options: H2SessionOptions) {
    super();
    this.socket = socket;
    this.out = new FrameWriter(socket);
    this.body = new BodySender(this.out, (stream) => {
      if (stream.remoteEnded) this.forget(stream as UpstreamStream);
    });
    this.windows = new ReceiveWindows(this.out, H2_UPSTREAM_CONNECTION_WINDOW);
    this.options = options;
    this.reader = new FrameReader(H2_FRAME_BYTES, (t, f, id, p) => this.onFrame(t, f, id, p), () => this.fail(H2Error.FRAME_SIZE_ERROR, 'a frame larger than SETTINGS_MAX_FRAME_SIZE'));
    readSocket(socket, (chunk) => this.reader.push(chunk));
    socket.on('drain', () => {
      this.out.needDrain = false;
      this.flushBodies();
    });
    // Kept as the cause of the close: a TLS alert (a refused client certificate) is told apart by it.
    socket.on('error', (err: Error) => {
      this.socketError = err;
    });
    socket.on('close', () => this.onSocketClose());
    socket.on('timeout', () => {
      if (this.load === 0) this.close();
    });
    socket.setTimeout(options.idleMs);
    this.out.send(PREFACE);
    this.out.send(settingsFrame([[Setting.ENABLE_PUSH, 0], [Setting.MAX_CONCURRENT_STREAMS, 0], [Setting.MAX_HEADER_LIST_SIZE, H2_UPSTREAM_MAX_HEADER_LIST_BYTES]]));
    this.windows.open();
  }

  /** Streams open or waiting for a slot. */
  get load(): number {
    return this.streams.size + this.waiting.length;
  }

  /** Streams the origin takes at once: its SETTINGS_MAX_CONCURRENT_STREAMS, the assumption until its first SETTINGS,
   *  or H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS when that names none. */
  get maxStreams(): number {
    return this.peerMaxStreams;
  }

  /** Open streams whose consumer paused them. */
  get held(): number {
    return this.heldStreams;
  }

  /** Starts a request stream now, or when the origin's concurrency limit leaves room. */
  open(stream: UpstreamStream): void {
    if (this.closed || this.goneAway) {
      stream.state = 'gone';
      stream.events.failed(new UpstreamResetError(H2Error.REFUSED_STREAM, 'the upstream session no longer takes streams'));
      return;
    }
    if (this.streams.size >= this.peerMaxStreams) this.waiting.push(stream);
    else this.start(stream);
  }

  /** Graceful: GOAWAY, running streams finish, then the socket ends. */
  close(): void {
    if (this.closed) return;
    if (!this.goneAway) this.out.send(goawayFrame(0, H2Error.NO_ERROR));
    this.goneAway = true;
    this.failWaiting();
    if (this.streams.size === 0) this.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  writeBody(stream: UpstreamStream, chunk: Buffer): boolean {
    return this.body.write(stream, chunk);
  }

  endBody(stream: UpstreamStream, trailers: string[] | null): void {
    this.body.end(stream, trailers);
  }

  consumed(stream: UpstreamStream, n: number): void {
    this.windows.consumed(stream, n);
  }

  hold(stream: UpstreamStream, held: boolean): void {
    if (stream.state !== 'open' || stream.held === held) return;
    stream.held = held;
    this.heldStreams += held ? 1 : -1;
  }

  reset(stream: UpstreamStream, code: number): void {
    if (stream.state === 'waiting') {
      const at = this.waiting.indexOf(stream);
      if (at >= 0) this.waiting.splice(at, 1);
      stream.state = 'gone';
      return;
    }
    if (stream.state === 'gone') return;
    this.out.send(frame32(FrameType.RST_STREAM, stream.id, code));
    this.forget(stream);
  }

  private start(stream: UpstreamStream): void {
    if (this.nextId > H2_MAX_31_BIT) {
      this.goneAway = true;
      this.options.onGoaway(this);
      stream.state = 'gone';
      stream.events.failed(new UpstreamResetError(H2Error.REFUSED_STREAM, 'the upstream session ran out of stream ids'));
      return;
    }
    stream.id = this.nextId;
    this.nextId += 2;
    stream.sendWindow = this.peerInitialWindow;
    if (this.streams.size === 0) this.socket.setTimeout(0);
    this.streams.set(stream.id, stream);
    stream.state = 'open';
    this.out.headers(stream.id, stream.fields, stream.endStream);
    stream.localEnded = stream.endStream;
    if (stream.queued > 0 || stream.ending !== undefined) this.body.flush(stream);
  }

  /** A stream id the origin may name: one of ours, opened already (ids of closed streams included). */
  private known(id: number): boolean {
    return id % 2 === 1 && id < this.nextId;
  }

  protected onData(flags: number, id: number, payload: Buffer): undefined {
    if (id === 0 || !this.known(id)) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA on a stream that was never opened');
    // Every DATA octet counts against the connection window, on closed streams too (RFC 9113 §6.9).
    if (!this.windows.received(payload.length)) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'DATA past the connection window');
    const data = this.unpadded(flags, payload, false);
    if (data === undefined) return;
    const stream = this.streams.get(id);
    const end = (flags & Flag.END_STREAM) !== 0;
    const problem = stream === undefined ? undefined : stream.readData(payload.length, data.length, end);
    // What is not handed to the proxy (padding, a closed stream's data, a refused frame) is given back at once; the
    // data waits until the proxy has passed it on (consumed()).
    if (stream === undefined || problem !== undefined) {
      this.windows.giveBack(payload.length);
      if (stream !== undefined && problem !== undefined) this.streamError(stream, problem[0], problem[1]);
      return;
    }
    // Padding is done with at once: both windows get it back now, so a padded response never stalls its stream.
    if (payload.length > data.length) this.windows.consumed(stream, payload.length - data.length);
    if (data.length > 0) stream.events.data(data);
    if (end) this.remoteEnd(stream);
  }

  protected onHeaders(flags: number, id: number, payload: Buffer): undefined {
    if (id === 0 || !this.known(id)) return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS on a stream boundary did not open');
    const fragment = this.unpadded(flags, payload, (flags & Flag.PRIORITY) !== 0);
    if (fragment !== undefined) this.blocks.headers(id, (flags & Flag.END_STREAM) !== 0, (flags & Flag.END_HEADERS) !== 0, fragment);
  }

  /** A decoded header block: the response head, an informational head, or trailers. */
  private onBlock(id: number, endStream: boolean, list: string[] | undefined): undefined {
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    const read = stream.readBlock(list, endStream);
    if ('kind' in read) {
      if (read.kind === 'error') return this.streamError(stream, read.code, read.message);
      return;
    }
    if (read.status === 0) {
      stream.events.trailers(read.headers);
      return this.remoteEnd(stream);
    }
    this.guard.request();
    stream.events.head(read, endStream);
    if (endStream) this.remoteEnd(stream);
  }

  protected onReset(id: number, payload: Buffer): undefined {
    if (payload.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM of the wrong size');
    if (id === 0 || !this.known(id)) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on a stream that was never opened');
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    const code = payload.readUInt32BE(0);
    this.forget(stream);
    if (stream.remoteEnded) {
      // The response was complete: the reset only stops the upload, and the response stands (RFC 9113 §8.1).
      stream.events.writable();
      return;
    }
    stream.events.failed(new UpstreamResetError(code === H2Error.NO_ERROR ? H2Error.CANCEL : code, `the origin reset the stream (code ${code})`));
  }

  protected onSettings(flags: number, id: number, payload: Buffer): undefined {
    if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if ((flags & Flag.ACK) !== 0) {
      if (payload.length !== 0) this.fail(H2Error.FRAME_SIZE_ERROR, 'a SETTINGS ACK with a payload');
      return;
    }
    const settings = readPeerSettings(payload, 'server');
    if (Array.isArray(settings)) return this.fail(settings[0], settings[1]);
    const first = !this.gotSettings;
    if (!first && this.flood(this.guard.settings())) return;
    this.gotSettings = true;
    // A SETTINGS frame changes only the parameters it names (RFC 9113 §6.5): a later one without it changes nothing.
    if (settings.maxStreams !== undefined) this.peerMaxStreams = settings.maxStreams;
    else if (first) this.peerMaxStreams = H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS;
    const initial = this.applySettings(settings, this.peerInitialWindow);
    if (initial === undefined) return;
    this.peerInitialWindow = initial;
    while (this.waiting.length > 0 && this.streams.size < this.peerMaxStreams && !this.goneAway) this.start(this.waiting.shift()!);
  }

  protected onGoaway(id: number, payload: Buffer): undefined {
    if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
    if (payload.length < 8) return this.fail(H2Error.FRAME_SIZE_ERROR, 'GOAWAY of the wrong size');
    const last = payload.readUInt32BE(0) & H2_MAX_31_BIT;
    const code = payload.readUInt32BE(4);
    this.goneAway = true;
    this.options.onGoaway(this);
    this.failWaiting();
    // Streams past the last one the origin will process were never acted on; with an error, none will finish.
    for (const stream of this.streams.values()) {
      if (stream.id <= last && code === H2Error.NO_ERROR) continue;
      this.forget(stream);
      stream.events.failed(new UpstreamResetError(stream.id > last ? H2Error.REFUSED_STREAM : code, `the origin went away (code ${code})`));
    }
    if (this.streams.size === 0) this.end();
  }

  protected onStreamWindow(id: number, increment: number): undefined {
    if (!this.known(id)) return this.fail(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE on a stream that was never opened');
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    if (increment === 0) return this.streamError(stream, H2Error.PROTOCOL_ERROR, 'a zero WINDOW_UPDATE');
    stream.sendWindow += increment;
    if (stream.sendWindow > H2_MAX_31_BIT) return this.streamError(stream, H2Error.FLOW_CONTROL_ERROR, 'a stream window past 2^31-1');
    this.body.flush(stream);
  }

  protected openStreams(): Iterable<FlowStream> {
    return this.streams.values();
  }

  private remoteEnd(stream: UpstreamStream): undefined {
    stream.remoteEnded = true;
    if (stream.localEnded) this.forget(stream);
    stream.events.end();
  }

  /** The stream is gone from the connection: its slot goes to a waiting one, and an idle session may time out. */
  private forget(stream: UpstreamStream): void {
    if (stream.state !== 'open') return;
    stream.state = 'gone';
    if (stream.held) this.heldStreams--;
    this.streams.delete(stream.id);
    if (this.waiting.length > 0 && !this.goneAway && this.streams.size < this.peerMaxStreams) this.start(this.waiting.shift()!);
    if (this.streams.size === 0) {
      if (this.goneAway) this.end();
      else this.socket.setTimeout(this.options.idleMs);
    }
  }

  private streamError(stream: UpstreamStream, code: number, message: string): undefined {
    this.reset(stream, code);
    stream.events.failed(new BoundaryError('UPSTREAM_PROTOCOL_ERROR', `HTTP/2 stream from the origin: ${message}`));
  }

  protected flood(kind: FloodKind | undefined): boolean {
    if (kind === undefined) return false;
    this.fail(H2Error.ENHANCE_YOUR_CALM, `a ${kind} from the origin`);
    return true;
  }

  /** A connection error (RFC 9113 §5.4.1): GOAWAY with the code, every stream fails, the socket closes. */
  protected fail(code: number, message: string): undefined {
    if (this.closed) return;
    this.reader.stop();
    this.out.send(goawayFrame(0, code));
    this.closeWith(new BoundaryError('UPSTREAM_PROTOCOL_ERROR', `HTTP/2 connection from the origin: ${message}`));
    this.socket.end();
  }

  private failWaiting(): void {
    for (const stream of this.waiting.splice(0)) {
      stream.state = 'gone';
      stream.events.failed(new UpstreamResetError(H2Error.REFUSED_STREAM, 'the upstream session went away before the stream started'));
    }
  }

  private closeWith(err: Error): void {
    this.closed = true;
    this.out.stop();
    this.goneAway = true;
    const all = [...this.waiting.splice(0), ...this.streams.values()];
    this.streams.clear();
    this.heldStreams = 0;
    for (const stream of all) {
      stream.state = 'gone';
      stream.events.failed(err);
    }
    this.options.onClose(this);
  }

  private end(): void {
    if (this.closed) return;
    this.closeWith(new UpstreamResetError(H2Error.CANCEL, 'the upstream session closed'));
    this.socket.end();
  }

  private onSocketClose(): void {
    this.reader.stop();
    const cause = this.socketError === undefined ? undefined : { cause: this.socketError };
    if (!this.closed) this.closeWith(new UpstreamResetError(H2Error.CANCEL, 'upstream stream closed before the response ended', cause));
  }
}
