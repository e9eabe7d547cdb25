// One workload's HTTP/2 connection, server side (RFC 9113): the preface and SETTINGS, client stream ids and the
// concurrency limit, HPACK both ways, flow control both ways, the flood budgets, and every frame the client sends
// checked before it moves a stream. Each new stream goes to the proxy as a RequestStream (request-stream.ts), kept
// with the others in server-streams.ts; this file speaks only HTTP/2. It replaces node:http2's server, whose
// per-stream JavaScript objects cost about 45 µs a request on Node 20 (docs/destinations.md#http2 has the figures).

import type { Socket } from 'node:net';
import { MAX_HEADER_COUNT } from '../http1/framing.js';
import { GLOBAL_TIMERS } from '../shared/timers.js';
import { H2Connection } from './connection.js';
import type { FloodKind } from './flood-guard.js';
import type { BodySender, FlowStream } from './flow-control.js';
import { FrameWriter } from './frame-writer.js';
import { readSocket } from './socket-reads.js';
import { Flag, FrameReader, H2_FRAME_BYTES, H2_MAX_31_BIT, H2Error, PREFACE, Setting, goawayFrame, readPeerSettings, settingsFrame } from './frames.js';
import { HeaderBlocks } from './header-blocks.js';
import { wellFormedTrailers } from './request-head.js';
import { RequestStream } from './request-stream.js';
import { type StallLimit, ServerStreams } from './server-streams.js';
import { H2_STREAM_STALL_TIMEOUT_MS } from './stall-watch.js';

export { H2_CLIENT_CONNECTION_WINDOW, H2_REMEMBERED_RESETS } from './server-streams.js';

/** docs/destinations.md#http2: streams one client connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
export const H2_MAX_CONCURRENT_STREAMS = 100;
/** A request header list beyond this (HPACK-decoded, as SETTINGS_MAX_HEADER_LIST_SIZE counts it) resets the stream: as MAX_HEAD_BYTES. */
export const H2_MAX_HEADER_LIST_BYTES = 16_384;
/** A compressed request header block beyond this closes the session: HPACK cannot skip a block it has not decoded. */
export const H2_MAX_HEADER_BLOCK_BYTES = 2 * H2_MAX_HEADER_LIST_BYTES;
/** Header fields per request, pseudo-headers included: MAX_HEADER_COUNT regular ones plus the four pseudo-headers. */
export const H2_MAX_HEADER_PAIRS = MAX_HEADER_COUNT + 4;
/** CONTINUATION frames after one HEADERS frame; past it the session is closed (CVE-2024-27316 class). */
export const H2_MAX_CONTINUATION_FRAMES = 8;
/** Entries one SETTINGS frame may carry: each is work for one frame the client sends cheaply. */
export const H2_MAX_SETTINGS_ENTRIES = 32;

const CONNECTION_PREFACE_BYTES = PREFACE.length;
const DEFAULT_STALL: StallLimit = { ms: H2_STREAM_STALL_TIMEOUT_MS, timers: GLOBAL_TIMERS };

export interface ServerSessionOptions {
  /** A new request stream: its head is `stream.fields`, not yet checked beyond HPACK and the size limits. */
  readonly onStream: (stream: RequestStream) => void;
  /** The session is being closed for a flood (GOAWAY ENHANCE_YOUR_CALM went out). */
  readonly onFlood: (kind: FloodKind) => void;
  /** The session is being closed for any other connection error the client made (GOAWAY with `code` went out). */
  readonly onProtocolError?: (code: number, message: string) => void;
  /** The socket closed; every stream had closed by then. */
  readonly onClose: () => void;
  /** A stream whose answer moved nothing for `stall.ms` while its writer waited was reset ENHANCE_YOUR_CALM. */
  readonly onStall?: () => void;
  /** H2_STREAM_STALL_TIMEOUT_MS on the global timers unless given. */
  readonly stall?: StallLimit;
}

/** What a header block in progress will be once decoded. */
type BlockUse = 'request' | 'trailers' | 'ignore';

export class ServerSession extends H2Connection {
  closed = false;
  protected readonly peer = 'client';
  /** The highest stream id the client has opened (or tried to). */
  private lastId = 0;
  private blockUse: BlockUse = 'ignore';
  private preface: Buffer | undefined = Buffer.alloc(0);
  /** The client acknowledged boundary's SETTINGS: streams past the limit are a protocol error, not a refusal. */
  private settingsAcked = false;
  protected readonly blocks = new HeaderBlocks(
    { block: (id, end, list) => this.onBlock(id, end, list), error: (code, message) => this.fail(code, message) },
    { listBytes: H2_MAX_HEADER_LIST_BYTES, blockBytes: H2_MAX_HEADER_BLOCK_BYTES, continuations: H2_MAX_CONTINUATION_FRAMES },
  );
  private readonly reader: FrameReader;
  private readonly socket: Socket;
  protected readonly out: FrameWriter;
  protected readonly body: BodySender;
  private readonly streams: ServerStreams;
  private readonly options: ServerSessionOptions;

  constructor(socket: Socket, options: ServerSessionOptions) {
    super();
    this.socket = socket;
    this.options = options;
    this.out = new FrameWriter(socket);
    const hooks = { flood: (kind: FloodKind | undefined) => this.flood(kind), drained: () => this.end(), stalled: () => options.onStall?.() };
    this.streams = new ServerStreams(this.out, this.guard, hooks, options.stall ?? DEFAULT_STALL);
    this.body = this.streams.body;
    this.reader = new FrameReader(H2_FRAME_BYTES, (t, f, id, p) => this.onFrame(t, f, id, p), () => this.fail(H2Error.FRAME_SIZE_ERROR, 'a frame larger than SETTINGS_MAX_FRAME_SIZE'));
    readSocket(socket, (chunk) => this.onBytes(chunk));
    socket.on('drain', () => {
      this.out.needDrain = false;
      this.flushBodies();
    });
    socket.on('error', () => undefined);
    // HTTP/2 has no half-closed connection: a client that ended its side (a crashed process does, without GOAWAY)
    // can send no WINDOW_UPDATE or SETTINGS ACK, so nothing more reaches it reliably. Its streams are cut and the
    // socket goes now, as nginx does, instead of holding its slot until the tunnel's idle timeout.
    socket.on('end', () => socket.destroy());
    socket.on('close', () => this.onSocketClose());
    this.out.send(settingsFrame([[Setting.MAX_CONCURRENT_STREAMS, H2_MAX_CONCURRENT_STREAMS], [Setting.MAX_HEADER_LIST_SIZE, H2_MAX_HEADER_LIST_BYTES], [Setting.ENABLE_PUSH, 0]]));
    this.streams.windows.open();
  }

  /** Every stream and the socket, at once (the proxy is closing). */
  destroy(): void {
    this.socket.destroy();
  }

  private onBytes(chunk: Buffer): void {
    const preface = this.preface;
    if (preface === undefined) {
      this.reader.push(chunk);
      return;
    }
    // RFC 9113 §3.4: the client's first 24 octets are the preface, whatever chunks they arrive in.
    const joined = preface.length === 0 ? chunk : Buffer.concat([preface, chunk]);
    const seen = Math.min(joined.length, CONNECTION_PREFACE_BYTES);
    if (joined.compare(PREFACE, 0, seen, 0, seen) !== 0) {
      this.fail(H2Error.PROTOCOL_ERROR, 'not the HTTP/2 connection preface');
      return;
    }
    if (joined.length < CONNECTION_PREFACE_BYTES) {
      this.preface = joined;
      return;
    }
    this.preface = undefined;
    if (joined.length > CONNECTION_PREFACE_BYTES) this.reader.push(joined.subarray(CONNECTION_PREFACE_BYTES));
  }

  protected onData(flags: number, id: number, payload: Buffer): undefined {
    if (id === 0 || id > this.lastId) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA on a stream that was never opened');
    // Every DATA octet counts against the connection window, on closed streams too (RFC 9113 §6.9).
    const { windows } = this.streams;
    if (!windows.received(payload.length)) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'DATA past the connection window');
    const data = this.unpadded(flags, payload, false);
    if (data === undefined) return;
    const end = (flags & Flag.END_STREAM) !== 0;
    if (payload.length === 0 && !end && this.flood(this.guard.empty())) return;
    const stream = this.streams.open.get(id);
    if (stream === undefined) {
      windows.giveBack(payload.length);
      if (!this.streams.wasReset(id)) this.fail(H2Error.STREAM_CLOSED, 'DATA on a closed stream');
      return;
    }
    const problem = readData(stream, payload.length, data.length, end);
    if (problem !== undefined || stream.uploadUnwanted) {
      windows.giveBack(payload.length);
      if (problem !== undefined) this.streams.reset(stream, problem);
      else if (end) this.streams.remoteEnd(stream, undefined);
      return;
    }
    // Padding is done with at once: both windows get it back now; the data waits until the proxy has read it.
    if (payload.length > data.length) windows.consumed(stream, payload.length - data.length);
    if (data.length > 0) stream.deliver(data);
    if (end) this.streams.remoteEnd(stream, undefined);
  }

  protected onHeaders(flags: number, id: number, payload: Buffer): undefined {
    if (id === 0 || id % 2 === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS on a stream id a client may not open');
    const priority = (flags & Flag.PRIORITY) !== 0;
    const fragment = this.unpadded(flags, payload, priority);
    if (fragment === undefined) return;
    if (priority) {
      this.checkPriority(id, payload, (flags & Flag.PADDED) !== 0 ? 1 : 0);
      if (this.closed) return;
    }
    if (this.streams.open.has(id)) this.blockUse = 'trailers';
    else if (id > this.lastId) {
      this.lastId = id;
      this.blockUse = this.streams.goingAway ? 'ignore' : 'request';
    } else if (this.streams.wasReset(id)) this.blockUse = 'ignore';
    // RFC 9113 §5.1.1: a stream id at or below one already used cannot open a stream.
    else return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS on a stream id already used');
    this.blocks.headers(id, (flags & Flag.END_STREAM) !== 0, (flags & Flag.END_HEADERS) !== 0, fragment);
  }

  /** A decoded header block (undefined: past H2_MAX_HEADER_LIST_BYTES): a new request, trailers, or nothing. */
  private onBlock(id: number, endStream: boolean, list: string[] | undefined): undefined {
    const use = this.blockUse;
    this.blockUse = 'ignore';
    const streams = this.streams;
    if (use === 'trailers') {
      const stream = streams.open.get(id);
      if (stream === undefined) return;
      const problem = trailersProblem(stream, endStream, list);
      if (problem !== undefined) return streams.reset(stream, problem);
      return streams.remoteEnd(stream, list);
    }
    if (use === 'ignore') return;
    if (list === undefined || list.length > 2 * H2_MAX_HEADER_PAIRS) return streams.refuse(id, H2Error.ENHANCE_YOUR_CALM);
    if (streams.open.size >= H2_MAX_CONCURRENT_STREAMS) {
      // Before the client has seen the limit it may overshoot in good faith; after, it is breaking the protocol.
      if (this.settingsAcked) return this.fail(H2Error.PROTOCOL_ERROR, `more than ${H2_MAX_CONCURRENT_STREAMS} streams at once`);
      return streams.refuse(id, H2Error.REFUSED_STREAM);
    }
    const stream = new RequestStream(streams, id, list, endStream);
    streams.open.set(id, stream);
    this.options.onStream(stream);
    // A well-formed request renews the budgets; one the proxy found malformed spent the rejected-stream budget.
    if (!stream.rejected) this.guard.request();
  }

  protected onReset(id: number, payload: Buffer): undefined {
    if (payload.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM of the wrong size');
    if (id === 0 || id > this.lastId) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on a stream that was never opened');
    const stream = this.streams.open.get(id);
    if (stream === undefined) return;
    const code = payload.readUInt32BE(0);
    const aborted = !stream.localEnded;
    this.streams.close(stream, aborted, code);
    // Rapid reset (CVE-2023-44487): a stream cancelled before its answer ended has cost a decision, maybe more.
    if (aborted) this.flood(this.guard.reset());
  }

  protected onSettings(flags: number, id: number, payload: Buffer): undefined {
    if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if ((flags & Flag.ACK) !== 0) {
      if (payload.length !== 0) return this.fail(H2Error.FRAME_SIZE_ERROR, 'a SETTINGS ACK with a payload');
      this.settingsAcked = true;
      return;
    }
    if (payload.length > 6 * H2_MAX_SETTINGS_ENTRIES) return this.fail(H2Error.ENHANCE_YOUR_CALM, `a SETTINGS frame of more than ${H2_MAX_SETTINGS_ENTRIES} entries`);
    const settings = readPeerSettings(payload, 'client');
    if (Array.isArray(settings)) return this.fail(settings[0], settings[1]);
    if (this.gotSettings && this.flood(this.guard.settings())) return;
    this.gotSettings = true;
    const initial = this.applySettings(settings, this.streams.peerInitialWindow);
    if (initial !== undefined) this.streams.peerInitialWindow = initial;
  }

  protected onGoaway(id: number, payload: Buffer): undefined {
    if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
    if (payload.length < 8) return this.fail(H2Error.FRAME_SIZE_ERROR, 'GOAWAY of the wrong size');
    // The client opens nothing more; what it opened is answered, then the connection ends.
    this.streams.goingAway = true;
    if (this.streams.open.size === 0) this.end();
  }

  protected onStreamWindow(id: number, increment: number): undefined {
    if (id > this.lastId) return this.fail(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE on a stream that was never opened');
    const stream = this.streams.open.get(id);
    if (stream === undefined) return;
    if (increment === 0) return this.streams.reset(stream, H2Error.PROTOCOL_ERROR);
    stream.sendWindow += increment;
    if (stream.sendWindow > H2_MAX_31_BIT) return this.streams.reset(stream, H2Error.FLOW_CONTROL_ERROR);
    this.body.flush(stream);
  }

  protected openStreams(): Iterable<FlowStream> {
    return this.streams.open.values();
  }

  protected flood(kind: FloodKind | undefined): boolean {
    if (kind === undefined || this.closed) return kind !== undefined;
    this.goAway(H2Error.ENHANCE_YOUR_CALM, kind);
    this.options.onFlood(kind);
    return true;
  }

  /** A connection error the client made (RFC 9113 §5.4.1): reported, then the session goes away. */
  protected fail(code: number, message: string): undefined {
    if (this.closed) return;
    this.options.onProtocolError?.(code, message);
    this.goAway(code, message);
  }

  /**
   * GOAWAY naming the last stream boundary took, with the reason as debug data (fixed text, for whoever reads the
   * client's error), and every stream closes.
   */
  private goAway(code: number, message: string): void {
    if (this.closed) return;
    this.reader.stop();
    this.preface = undefined;
    this.out.send(goawayFrame(this.lastId, code, Buffer.from(message, 'latin1')));
    this.closeAll(code);
    this.socket.end();
  }

  /** Graceful: every stream is done; GOAWAY NO_ERROR, then the socket ends. */
  private end(): void {
    if (this.closed) return;
    this.out.send(goawayFrame(this.lastId, H2Error.NO_ERROR));
    this.closeAll(H2Error.NO_ERROR);
    this.socket.end();
  }

  /** Every stream closes and nothing more is written (what was, a GOAWAY above all, still goes out). */
  private closeAll(code: number): void {
    this.closed = true;
    this.out.stop();
    this.streams.closeAll(code);
  }

  private onSocketClose(): void {
    this.reader.stop();
    if (!this.closed) this.closeAll(H2Error.CANCEL);
    this.options.onClose();
  }
}

/** Counts a DATA frame against its stream, or returns the stream error it is (RFC 9113 §5.1, §6.9, §8.1.1). */
function readData(stream: RequestStream, length: number, dataLength: number, end: boolean): number | undefined {
  if (stream.remoteEnded) return H2Error.STREAM_CLOSED;
  if (stream.recvWindow < length) return H2Error.FLOW_CONTROL_ERROR;
  stream.recvWindow -= length;
  stream.received += dataLength;
  const expected = stream.contentLength;
  if (expected >= 0 && (stream.received > expected || (end && stream.received !== expected))) return H2Error.PROTOCOL_ERROR;
  return undefined;
}

/** Why request trailers make their stream an error (RFC 9113 §8.1), or undefined when they end it well. */
function trailersProblem(stream: RequestStream, endStream: boolean, list: string[] | undefined): number | undefined {
  if (stream.remoteEnded) return H2Error.STREAM_CLOSED;
  if (list === undefined) return H2Error.ENHANCE_YOUR_CALM;
  if (!endStream || !wellFormedTrailers(list)) return H2Error.PROTOCOL_ERROR;
  if (stream.contentLength >= 0 && stream.received !== stream.contentLength) return H2Error.PROTOCOL_ERROR;
  return undefined;
}
