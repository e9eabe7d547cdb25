// The request streams of one workload connection (server-session.ts reads the frames that move them): which are
// open, which boundary reset, and what each stream's proxy side asks of the connection: the answer's HEADERS, DATA
// under the client's windows and trailers; body window given back as the proxy reads; resets; and a stream's end.

import type { Timers } from '../shared/timers.js';
import type { FloodGuard, FloodKind } from './flood-guard.js';
import { BodySender, ReceiveWindows } from './flow-control.js';
import type { FrameWriter } from './frame-writer.js';
import { FrameType, frame32, H2_DEFAULT_WINDOW, H2Error } from './frames.js';
import type { RequestStream, RequestStreamOwner } from './request-stream.js';
import { StallWatch } from './stall-watch.js';
import { StreamTable } from './stream-table.js';

/** The connection window boundary grants a client: request body octets it holds unread, per session, at most. */
export const H2_CLIENT_CONNECTION_WINDOW = 1024 * 1024;
/** Ids of streams boundary reset, remembered so frames the client sent before it saw the reset are ignored. */
export const H2_REMEMBERED_RESETS = 200;

export interface StreamsHooks {
  /** A flood budget answered: true when it was spent (the session is closing). */
  flood(kind: FloodKind | undefined): boolean;
  /** The client went away and its last stream closed. */
  drained(): void;
  /** A stream was reset ENHANCE_YOUR_CALM: its answer moved nothing for the stall limit (stall-watch.ts). */
  stalled(): void;
}

/** How long an answer may wait on the client, and the timers that measure it. */
export interface StallLimit {
  readonly ms: number;
  readonly timers: Timers;
}

export class ServerStreams implements RequestStreamOwner {
  /** The client's SETTINGS_INITIAL_WINDOW_SIZE: each answer's first send window. */
  peerInitialWindow = H2_DEFAULT_WINDOW;
  /** GOAWAY either way: no new stream; hooks.drained() once the last one closes. */
  goingAway = false;
  readonly open = new StreamTable<RequestStream>();
  readonly body: BodySender;
  readonly windows: ReceiveWindows;
  readonly guard: FloodGuard;
  private readonly resets = new Set<number>();
  private readonly out: FrameWriter;
  private readonly hooks: StreamsHooks;
  /** Answers whose writer waits on the client; one that moves nothing for the limit is reset. */
  private readonly stalls: StallWatch<RequestStream>;

  constructor(out: FrameWriter, guard: FloodGuard, hooks: StreamsHooks, stall: StallLimit) {
    this.out = out;
    this.guard = guard;
    this.hooks = hooks;
    this.body = new BodySender(out, (stream) => this.answered(stream as RequestStream));
    this.windows = new ReceiveWindows(out, H2_CLIENT_CONNECTION_WINDOW);
    this.stalls = new StallWatch(stall.timers, stall.ms, (stream) => {
      this.reset(stream, H2Error.ENHANCE_YOUR_CALM);
      this.hooks.stalled();
    });
  }

  /** Boundary reset this id lately: the client's frames on it may still be in flight. */
  wasReset(id: number): boolean {
    return this.resets.has(id);
  }

  respond(stream: RequestStream, fields: readonly string[], endStream: boolean, status = 0): void {
    if (stream.state === 'gone' || stream.headersSent) return;
    stream.headersSent = true;
    this.out.headers(stream.id, fields, endStream, status);
    if (endStream) {
      stream.localEnded = true;
      this.answered(stream);
    }
  }

  writeBody(stream: RequestStream, chunk: Buffer): boolean {
    const ok = this.body.write(stream, chunk);
    if (!ok) this.stalls.add(stream);
    return ok;
  }

  writable(stream: RequestStream): void {
    this.stalls.delete(stream);
  }

  endBody(stream: RequestStream, trailers: string[] | null): void {
    this.body.end(stream, trailers);
  }

  consumed(stream: RequestStream, n: number): void {
    this.windows.consumed(stream, n);
  }

  reset(stream: RequestStream, code: number): undefined {
    if (stream.state === 'gone') return;
    this.out.send(frame32(FrameType.RST_STREAM, stream.id, code));
    this.remember(stream.id);
    this.close(stream, !stream.localEnded, code);
  }

  /**
   * The rest of the request body is not wanted (the answer did not need it). RFC 9113 §8.1 lets a server reset the
   * stream NO_ERROR after a complete answer, but curl 7.88 turns that reset into a stream error and drops the answer
   * while its upload is still going. So the body's remaining DATA is dropped as it comes, its connection window given
   * back (other streams go on) and its stream window not: a client that keeps sending stalls after one window, and
   * a client that reads the answer ends or cancels the stream itself (curl does, as node:http2's server let it).
   */
  stopUpload(stream: RequestStream): void {
    if (stream.state === 'gone' || stream.remoteEnded || stream.uploadUnwanted) return;
    stream.uploadUnwanted = true;
    const unread = stream.dropUnread();
    if (unread > 0) this.windows.giveBack(unread);
  }

  reject(stream: RequestStream): void {
    stream.rejected = true;
    this.reset(stream, H2Error.PROTOCOL_ERROR);
    this.hooks.flood(this.guard.rejected());
  }

  /** A stream refused before it became a request. */
  refuse(id: number, code: number): undefined {
    this.out.send(frame32(FrameType.RST_STREAM, id, code));
    this.remember(id);
    this.hooks.flood(this.guard.rejected());
  }

  /** The client ended its side: the body's reader sees the end, and a stream answered in full is done. */
  remoteEnd(stream: RequestStream, trailers: string[] | undefined): undefined {
    stream.ended(trailers);
    if (stream.localEnded && stream.state !== 'gone') this.close(stream, false, H2Error.NO_ERROR);
  }

  /** Closes a stream without a frame (the client reset it, or both sides ended). */
  close(stream: RequestStream, aborted: boolean, code: number): void {
    if (stream.state === 'gone') return;
    this.open.delete(stream.id);
    this.stalls.delete(stream);
    const unread = stream.gone(aborted, code);
    if (unread > 0) this.windows.giveBack(unread);
    if (this.goingAway && this.open.size === 0) this.hooks.drained();
  }

  /** The connection is gone: every stream still open was cut short. */
  closeAll(code: number): void {
    this.goingAway = true;
    const all = this.open.values();
    this.open.clear();
    this.stalls.clear();
    for (const stream of all) stream.gone(true, code);
  }

  /** END_STREAM went out on a stream: its answer is complete, which earns back the reset budget. */
  private answered(stream: RequestStream): void {
    this.guard.answered();
    if (stream.remoteEnded) this.close(stream, false, H2Error.NO_ERROR);
  }

  private remember(id: number): void {
    this.resets.add(id);
    if (this.resets.size <= H2_REMEMBERED_RESETS) return;
    for (const oldest of this.resets) {
      this.resets.delete(oldest);
      break;
    }
  }
}
