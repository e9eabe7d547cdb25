// One request on an upstream HTTP/2 session, as the proxy sees it (the H1Exchange contract shared with the HTTP/1.1
// client): the stream's events become handler calls, pause() holds received data and the window with it, the
// request body is pumped with backpressure, and the response-head deadline runs on one timer per client (quiet-watch.ts).

import { BoundaryError } from '../shared/errors.js';
import type { H1Exchange, H1Handler } from '../http1/h1-client.js';
import type { H1Request } from '../http1/h1-request.js';
import type { Timers } from '../shared/timers.js';
import type { H2Session } from './h2-session.js';
import { QuietWatch, type Watched } from './quiet-watch.js';
import { H2Error } from './frames.js';
import { type StreamEvents, UpstreamResetError, UpstreamStream } from './upstream-stream.js';
import { h2RequestFields, h2TrailerFields } from './headers.js';
import type { ResponseFields } from './response-head.js';

/** Stream inactivity allowed while waiting for the response head (as the HTTP/1.1 client's headers timeout). */
export const H2_UPSTREAM_HEADERS_TIMEOUT_MS = 120_000;
/**
 * Times one request is sent again after the origin refused its stream unprocessed (REFUSED_STREAM, or past the last
 * stream id of a GOAWAY: RFC 9113 §8.7 says such a request can be retried safely). nginx, for one, ends a connection
 * after `keepalive_requests` streams with GOAWAY and refuses whatever was already on its way, so under many streams
 * at once a request may be refused by several connections in turn. The bound keeps an origin that refuses everything
 * to a few reconnections, which the requests waiting at the time share.
 */
export const H2_UPSTREAM_REFUSED_RETRIES = 8;

export interface H2Request extends H1Request {
  readonly scheme: 'http' | 'https';
  /** The client sent `te: trailers` (gRPC): it goes upstream too. */
  readonly teTrailers: boolean;
  /** Request trailers, read once the body ended (undefined: none). */
  trailers?(): readonly string[] | undefined;
  /** Fields already checked as a client's HTTP/2 head is (request-head.ts): those sent unchanged are not checked again. */
  readonly checkedFields?: readonly string[];
}

export interface H2Handler extends H1Handler {
  /** Response trailers, flat; before onEnd. */
  onTrailers(trailers: string[]): void;
}

function toError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

export class Call implements H1Exchange, StreamEvents {
  /** When the stream last moved while its response head is awaited (the head watch's clock). */
  quietSince = 0;
  quietPrev: Watched | undefined = undefined;
  quietNext: Watched | undefined = undefined;
  quietWatched = false;
  private stream: UpstreamStream | undefined = undefined;
  private done = false;
  private paused = false;
  /** Received while paused, in order: data, then trailers (an array of strings) and the end (null); made on first need. */
  private held: (Buffer | string[] | null)[] | undefined = undefined;
  private wake: (() => void) | undefined = undefined;
  /** A response head arrived: from then on a refusal is a failure, never a retry. */
  private answered = false;
  private retries = 0;

  private readonly req: H2Request;
  private readonly handler: H2Handler;
  private readonly watch: HeadWatch;
  /** Starts the call again on the client's current (or a new) session. */
  private readonly restart: (call: Call) => void;

  constructor(req: H2Request, handler: H2Handler, watch: HeadWatch, restart: (call: Call) => void) {
    this.req = req;
    this.handler = handler;
    this.watch = watch;
    this.restart = restart;
  }

  get sent(): boolean {
    return this.stream !== undefined && this.stream.id > 0;
  }

  /** Opens the stream on `session` (now, or once the origin's stream limit leaves room). */
  start(session: H2Session): void {
    if (this.done) return;
    const { req } = this;
    let fields: string[];
    try {
      fields = h2RequestFields(req.headers, { method: req.method, path: req.target, scheme: req.scheme, teTrailers: req.teTrailers }, req.checkedFields);
    } catch (err) {
      this.fail(toError(err));
      return;
    }
    const stream = new UpstreamStream(session, fields, req.body === null, req.method === 'HEAD', this);
    this.stream = stream;
    this.watch.add(this);
    session.open(stream);
    if (req.body !== null && !this.done) void this.pump(stream, req.body);
  }

  /** The response head did not come within H2_UPSTREAM_HEADERS_TIMEOUT_MS of the stream's last move. */
  timedOut(): void {
    this.abort(new BoundaryError('UPSTREAM_TIMEOUT', `no response head within ${H2_UPSTREAM_HEADERS_TIMEOUT_MS} ms`));
  }

  head(fields: ResponseFields, endStream: boolean): void {
    this.answered = true;
    this.watch.delete(this);
    if (endStream) this.done = true;
    this.handler.onHead(fields.status, fields.headers, undefined, endStream);
  }

  data(chunk: Buffer): void {
    if (this.paused || this.held !== undefined) {
      this.hold(chunk);
      return;
    }
    this.handler.onData(chunk);
    this.stream?.consumed(chunk.length);
  }

  trailers(headers: string[]): void {
    if (this.paused || this.held !== undefined) this.hold(headers);
    else if (!this.done) this.handler.onTrailers(headers);
  }

  end(): void {
    if (this.paused || this.held !== undefined) {
      this.hold(null);
      return;
    }
    if (this.done) return;
    this.done = true;
    this.handler.onEnd();
  }

  failed(err: Error): void {
    this.wake?.();
    if (this.retriable(err)) {
      this.retries++;
      this.stream = undefined;
      this.restart(this);
      return;
    }
    this.watch.delete(this);
    this.fail(err);
  }

  /** Refused unprocessed, no answer yet, and a body that can be sent again (none, or one held whole). */
  private retriable(err: Error): boolean {
    return (
      err instanceof UpstreamResetError &&
      err.rstCode === H2Error.REFUSED_STREAM &&
      !this.answered &&
      !this.done &&
      this.retries < H2_UPSTREAM_REFUSED_RETRIES &&
      (this.req.body === null || Buffer.isBuffer(this.req.body))
    );
  }

  writable(): void {
    this.wake?.();
  }

  abort(err: Error): void {
    this.watch.delete(this);
    this.stream?.cancel();
    this.wake?.();
    this.fail(err);
  }

  fail(err: Error): void {
    // Held data will never be handed on: the origin gets its connection window back.
    let dropped = 0;
    for (const item of this.held ?? []) if (Buffer.isBuffer(item)) dropped += item.length;
    this.held = undefined;
    if (dropped > 0) this.stream?.consumed(dropped);
    if (this.done) return;
    this.done = true;
    this.handler.onError(err);
  }

  pause(): void {
    this.paused = true;
    this.stream?.hold(true);
  }

  resume(): void {
    this.paused = false;
    this.stream?.hold(false);
    while (!this.paused && this.held !== undefined) {
      const next = this.held.shift()!;
      if (this.held.length === 0) this.held = undefined;
      if (Buffer.isBuffer(next)) {
        this.handler.onData(next);
        this.stream?.consumed(next.length);
      } else if (next === null) {
        if (!this.done) {
          this.done = true;
          this.handler.onEnd();
        }
      } else if (!this.done) {
        this.handler.onTrailers(next);
      }
    }
  }

  /** Kept until resume() hands it on, behind what is kept already. */
  private hold(item: Buffer | string[] | null): void {
    if (this.held === undefined) this.held = [item];
    else this.held.push(item);
  }

  private async pump(stream: UpstreamStream, body: Buffer | AsyncIterable<Uint8Array>): Promise<void> {
    try {
      if (Buffer.isBuffer(body)) {
        stream.write(body);
      } else {
        for await (const chunk of body) {
          if (stream.state === 'gone') return;
          // A body still going up is activity: the head's deadline restarts.
          this.watch.touch(this);
          const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
          if (!stream.write(buf)) await new Promise<void>((resolve) => (this.wake = resolve));
          this.wake = undefined;
        }
      }
      const trailers = this.req.trailers?.();
      stream.end(trailers === undefined ? undefined : h2TrailerFields(trailers));
    } catch (err) {
      // The body failed (the client went, or the marker scanner stopped it): nothing more goes upstream.
      this.abort(toError(err));
    }
  }
}

/** The calls of one client still waiting for their response head, timed out past H2_UPSTREAM_HEADERS_TIMEOUT_MS of quiet. */
export type HeadWatch = QuietWatch<Call>;

export function createHeadWatch(timers: Timers): HeadWatch {
  return new QuietWatch<Call>(timers, H2_UPSTREAM_HEADERS_TIMEOUT_MS, (call) => {
    call.timedOut();
    return true;
  });
}
