// One request stream on the workload-facing HTTP/2 server (server-session.ts): the record the server keeps per
// stream (state, windows, the queued answer body) and the face the proxy drives (proxy/h2-stream.ts): the request
// body as an async iterable whose every chunk given out returns its octets to the client as window, and the answer
// as head, DATA and trailers. Plain data and forwarding methods; the HTTP/2 rules live in server-session.ts and
// server-streams.ts.

import { BoundaryError } from '../shared/errors.js';
import { H2_DEFAULT_WINDOW } from './frames.js';
import type { FlowStream } from './flow-control.js';
import type { Watched } from './quiet-watch.js';

/** The connection a request stream lives on, as the stream calls it. */
export interface RequestStreamOwner {
  readonly peerInitialWindow: number;
  /** `status` (when not 0) goes out as `:status` ahead of `fields`. */
  respond(stream: RequestStream, fields: readonly string[], endStream: boolean, status?: number): void;
  writeBody(stream: RequestStream, chunk: Buffer): boolean;
  /** A writer told to wait may go on. */
  writable(stream: RequestStream): void;
  endBody(stream: RequestStream, trailers: string[] | null): void;
  consumed(stream: RequestStream, n: number): void;
  reset(stream: RequestStream, code: number): void;
  /** The proxy found the request malformed: reset PROTOCOL_ERROR, counted against the session's rejected streams. */
  reject(stream: RequestStream): void;
  stopUpload(stream: RequestStream): void;
}

/** What the proxy hears of its stream: one listener per stream, so the proxy makes no closure per stream. */
export interface RequestStreamListener {
  /** Called once, when the stream is gone for any reason. */
  streamClosed(): void;
  /** A write that returned false may go on. */
  streamDrained(): void;
  /** The request's trailers arrived (before the body's end is read); those that came earlier are in `trailers`. */
  streamTrailers(trailers: string[]): void;
}

/** The client reset the stream, or the session ended, before the request body ended. */
export class RequestResetError extends BoundaryError {
  readonly rstCode: number;
  constructor(rstCode: number, message: string) {
    super('CLIENT_RESET', message);
    this.rstCode = rstCode;
  }
}

const DONE: IteratorResult<Buffer> = { done: true, value: undefined };

export class RequestStream implements FlowStream, AsyncIterator<Buffer> {
  readonly id: number;
  state: 'open' | 'gone' = 'open';
  sendWindow: number;
  recvWindow = H2_DEFAULT_WINDOW;
  unacked = 0;
  localEnded = false;
  remoteEnded: boolean;
  readonly queue: Buffer[] = [];
  queued = 0;
  ending: string[] | null | undefined = undefined;
  blocked = false;
  /** The answer's HEADERS went out. */
  headersSent = false;
  /** Closed before the answer ended: the client reset it, or boundary did, or the session went. */
  aborted = false;
  /** The proxy found the request malformed. */
  rejected = false;
  /** The rest of the request body is not wanted: it is dropped as it comes (server-streams.ts stopUpload). */
  uploadUnwanted = false;
  /** The stall watch's marks (stall-watch.ts), while the answer's writer waits on the client. */
  quietSince = 0;
  quietPrev: Watched | undefined = undefined;
  quietNext: Watched | undefined = undefined;
  quietWatched = false;
  stallQueued = 0;
  /** The request's Content-Length, -1 when absent; DATA that disagrees with it is a stream error (RFC 9113 §8.1.1). */
  contentLength = -1;
  received = 0;
  /** The request's decoded header list, pseudo-headers first, as the client sent it. */
  readonly fields: string[];

  listener: RequestStreamListener | undefined = undefined;
  trailers: string[] | undefined = undefined;

  readonly owner: RequestStreamOwner;
  /** Body chunks received and not yet read, and a read waiting for one. */
  private readonly chunks: Buffer[] = [];
  private waiter: { resolve(r: IteratorResult<Buffer>): void; reject(err: Error): void } | undefined = undefined;
  private failure: Error | undefined = undefined;
  /** The reader stopped (return()): later data is given back as it arrives. */
  private unread = false;

  constructor(owner: RequestStreamOwner, id: number, fields: string[], endStream: boolean) {
    this.owner = owner;
    this.id = id;
    this.fields = fields;
    this.remoteEnded = endStream;
    this.sendWindow = owner.peerInitialWindow;
  }

  get events(): { writable(): void } {
    return this;
  }

  get destroyed(): boolean {
    return this.state === 'gone';
  }

  writable(): void {
    this.owner.writable(this);
    this.listener?.streamDrained();
  }

  // The proxy's side.

  respond(fields: readonly string[], endStream: boolean): void {
    this.owner.respond(this, fields, endStream);
  }

  /** The answer's head as `:status` and regular fields (no pseudo-header, names lower-case, none HTTP/2 forbids). */
  respondHead(status: number, fields: readonly string[], endStream: boolean): void {
    this.owner.respond(this, fields, endStream, status);
  }

  /** Queues answer body octets; false asks the writer to wait for the listener's streamDrained. */
  write(chunk: Buffer): boolean {
    return this.owner.writeBody(this, chunk);
  }

  /** Ends the answer, with trailers when given. */
  end(trailers?: readonly string[]): void {
    this.owner.endBody(this, trailers === undefined ? null : [...trailers]);
  }

  reset(code: number): void {
    this.owner.reset(this, code);
  }

  reject(): void {
    this.owner.reject(this);
  }

  /** A request body still arriving after the answer is not wanted: RST_STREAM NO_ERROR once the answer is out (RFC 9113 §8.1). */
  stopUpload(): void {
    this.owner.stopUpload(this);
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return this;
  }

  next(): Promise<IteratorResult<Buffer>> {
    const chunk = this.chunks.shift();
    if (chunk !== undefined) {
      this.owner.consumed(this, chunk.length);
      return Promise.resolve({ done: false, value: chunk });
    }
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.remoteEnded) return Promise.resolve(DONE);
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<Buffer>> {
    this.unread = true;
    let held = 0;
    for (const chunk of this.chunks.splice(0)) held += chunk.length;
    if (held > 0) this.owner.consumed(this, held);
    return Promise.resolve(DONE);
  }

  // The session's side.

  /** A DATA frame's data for the reader. */
  deliver(chunk: Buffer): void {
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      this.owner.consumed(this, chunk.length);
      waiter.resolve({ done: false, value: chunk });
    } else if (this.unread) this.owner.consumed(this, chunk.length);
    // A view into the received bytes: kept as is, since the session never reuses a chunk it read.
    else this.chunks.push(chunk);
  }

  /** END_STREAM arrived, with trailers or on DATA. */
  ended(trailers: string[] | undefined): void {
    this.remoteEnded = true;
    if (trailers !== undefined) {
      this.trailers = trailers;
      this.listener?.streamTrailers(trailers);
    }
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.resolve(DONE);
  }

  /** Drops the body octets received and not read; returns how many, for the session to give back. */
  dropUnread(): number {
    // Most streams hold nothing unread when they end: no emptied copy of the list for them.
    if (this.chunks.length === 0) return 0;
    let unread = 0;
    for (const chunk of this.chunks.splice(0)) unread += chunk.length;
    return unread;
  }

  /**
   * The stream is gone; `aborted`: before its answer ended. Returns the octets received and never read, which the
   * session gives back to the connection window (no reader will consume them now).
   */
  gone(aborted: boolean, code: number): number {
    if (this.state === 'gone') return 0;
    this.state = 'gone';
    const unread = this.dropUnread();
    this.aborted = aborted;
    if (!this.remoteEnded) {
      this.failure = new RequestResetError(code, `the request stream closed before its body ended (code ${code})`);
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter?.reject(this.failure);
    }
    this.listener?.streamClosed();
    return unread;
  }
}
