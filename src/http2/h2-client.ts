// HTTP/2 client for one pinned upstream (the HTTP/2 twin of http1/h1-client.ts): one session at a time on a socket
// from the injected connect(), a new one after GOAWAY or close; each request is one stream, streamed both ways with
// HTTP/2 flow control (a paused consumer stops the window), trailers both ways. Never dials, resolves or decides.

import { connect as h2Connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type SecureClientSessionOptions } from 'node:http2';
import type { Socket } from 'node:net';
import { BoundaryError } from '../errors.js';
import type { H1Exchange, H1Handler } from '../http1/h1-client.js';
import type { H1Request } from '../http1/h1-request.js';
import { GLOBAL_TIMERS, type Timers } from '../http1/timers.js';
import { h2RequestHeaders, withoutPseudo } from './headers.js';

/** Stream inactivity allowed while waiting for the response head (as the HTTP/1.1 client's headers timeout). */
export const H2_UPSTREAM_HEADERS_TIMEOUT_MS = 120_000;
/** A session with no stream open is closed after this much silence. */
export const H2_UPSTREAM_IDLE_TIMEOUT_MS = 30_000;
/** Response header list (and trailers) from an origin beyond this resets the stream (nghttp2 enforces it). */
export const H2_UPSTREAM_MAX_HEADER_LIST_BYTES = 65_536;
/** Memory nghttp2 may hold for one upstream session (node:http2's default, named). */
export const H2_UPSTREAM_MAX_SESSION_MEMORY_MB = 10;

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = constants;

export interface H2Request extends H1Request {
  readonly scheme: 'http' | 'https';
  /** The client sent `te: trailers` (gRPC): it goes upstream too. */
  readonly teTrailers: boolean;
  /** Request trailers, read once the body ended (undefined: none). */
  trailers?(): readonly string[] | undefined;
}

export interface H2Handler extends H1Handler {
  /** Response trailers, flat; before onEnd. */
  onTrailers(trailers: string[]): void;
}

/** The origin reset the stream (or the session ended under it) before the response ended. */
export class UpstreamResetError extends BoundaryError {
  readonly rstCode: number;
  constructor(rstCode: number, message: string) {
    super('UPSTREAM_CLOSED', message);
    this.rstCode = rstCode;
  }
}

export interface H2Client {
  /** Never throws: a connect failure reaches handler.onError unchanged (dial errors keep their codes). */
  request(req: H2Request, handler: H2Handler): H1Exchange;
  close(): void;
  destroy(): void;
  readonly closed: boolean;
}

interface H2ClientOptions {
  /** A connected socket (TLS with ALPN h2 done, or cleartext for prior knowledge). */
  readonly connect: () => Promise<Socket>;
  /** `https://host:port` or `http://host:port`: the session's origin (node:http2 needs one; nothing is resolved). */
  readonly origin: string;
  /** The last session closed and none is opening: the client holds nothing now. */
  readonly onIdle?: () => void;
  /** What the response-head deadline runs on; the global timers (unref'd) by default. */
  readonly timers?: Timers;
}

const SESSION_OPTIONS: SecureClientSessionOptions = {
  maxSessionMemory: H2_UPSTREAM_MAX_SESSION_MEMORY_MB,
  settings: { enablePush: false, maxHeaderListSize: H2_UPSTREAM_MAX_HEADER_LIST_BYTES },
};

/** A stream's errors end in its 'close', where the call fails with the stream's code; one listener for every stream. */
function ignore(): void {}

class Call implements H1Exchange {
  sent = false;
  /** When the stream last moved while its response head is awaited (HeadWatch's clock). */
  activeAt = 0;
  private stream: ClientHttp2Stream | undefined = undefined;
  private done = false;

  private readonly req: H2Request;
  private readonly handler: H2Handler;

  constructor(req: H2Request, handler: H2Handler) {
    this.req = req;
    this.handler = handler;
  }

  /** Opens the stream on `session`; `onClosed` runs once the stream is gone (the session's idle accounting). */
  start(session: ClientHttp2Session, watch: HeadWatch, onClosed: () => void): void {
    if (this.done) return;
    const { req } = this;
    const hasBody = req.body !== null;
    const headers = h2RequestHeaders(req.headers, { method: req.method, path: req.target, scheme: req.scheme, teTrailers: req.teTrailers });
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(headers, { endStream: !hasBody, waitForTrailers: hasBody });
    } catch (err) {
      this.fail(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    this.stream = stream;
    this.sent = true;
    watch.add(this);
    stream.on('response', (head: Record<string, unknown>, flags: number, raw: string[]) => {
      watch.delete(this);
      const complete = (flags & constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      if (complete) this.done = true;
      this.handler.onHead(Number(head[':status']), withoutPseudo(raw), undefined, complete);
    });
    stream.on('data', (chunk: Buffer) => this.handler.onData(chunk));
    stream.on('trailers', (_head: unknown, _flags: number, raw: string[]) => {
      if (!this.done) this.handler.onTrailers(withoutPseudo(raw));
    });
    stream.on('end', () => {
      if (this.done) return;
      this.done = true;
      this.handler.onEnd();
    });
    stream.on('error', ignore);
    stream.on('close', () => {
      onClosed();
      watch.delete(this);
      if (this.done) return;
      const code = stream.rstCode ?? NGHTTP2_CANCEL;
      this.fail(new UpstreamResetError(code === NGHTTP2_NO_ERROR ? NGHTTP2_CANCEL : code, `upstream stream closed before the response ended (code ${code})`));
    });
    if (hasBody) {
      stream.on('wantTrailers', () => {
        const trailers = req.trailers?.();
        stream.sendTrailers(trailers === undefined ? {} : h2RequestTrailers(trailers));
      });
      void this.pump(stream, watch, req.body as Buffer | AsyncIterable<Uint8Array>);
    }
  }

  /** The response head did not come within H2_UPSTREAM_HEADERS_TIMEOUT_MS of the stream's last move. */
  timedOut(): void {
    this.abort(new BoundaryError('UPSTREAM_TIMEOUT', `no response head within ${H2_UPSTREAM_HEADERS_TIMEOUT_MS} ms`));
  }

  private async pump(stream: ClientHttp2Stream, watch: HeadWatch, body: Buffer | AsyncIterable<Uint8Array>): Promise<void> {
    try {
      if (Buffer.isBuffer(body)) {
        stream.end(body);
        return;
      }
      for await (const chunk of body) {
        if (stream.destroyed) return;
        // A body still going up is activity: the head's deadline restarts, as node:http2's stream timeout did.
        watch.touch(this);
        if (!stream.write(chunk)) await drained(stream);
      }
      if (!stream.destroyed) stream.end();
    } catch (err) {
      // The body failed (the client went, or the marker scanner stopped it): nothing more goes upstream.
      this.abort(err instanceof Error ? err : new Error(String(err)));
    }
  }

  abort(err: Error): void {
    if (this.stream !== undefined && !this.stream.destroyed) this.stream.close(NGHTTP2_CANCEL);
    this.fail(err);
  }

  fail(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.handler.onError(err);
  }

  pause(): void {
    this.stream?.pause();
  }

  resume(): void {
    this.stream?.resume();
  }
}

function h2RequestTrailers(flat: readonly string[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] ?? '').toLowerCase();
    const value = flat[i + 1] ?? '';
    const known = out[name];
    out[name] = known === undefined ? value : Array.isArray(known) ? [...known, value] : [known, value];
  }
  return out;
}

/**
 * The calls of one client still waiting for their response head, least recently active first, and the one timer that
 * enforces H2_UPSTREAM_HEADERS_TIMEOUT_MS on them all: per stream, a timer to arm and clear cost as much as the
 * rest of the call's bookkeeping. Activity only moves a call to the back; the timer, when it fires, times out the
 * calls at the front that have been quiet long enough and waits for the next one.
 */
class HeadWatch {
  private readonly waiting = new Set<Call>();
  private timer: unknown = undefined;
  private readonly timers: Timers;

  constructor(timers: Timers) {
    this.timers = timers;
  }

  add(call: Call): void {
    call.activeAt = this.timers.now();
    this.waiting.add(call);
    if (this.timer === undefined) this.arm(H2_UPSTREAM_HEADERS_TIMEOUT_MS);
  }

  touch(call: Call): void {
    if (!this.waiting.delete(call)) return;
    call.activeAt = this.timers.now();
    this.waiting.add(call);
  }

  delete(call: Call): void {
    this.waiting.delete(call);
  }

  stop(): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(ms: number): void {
    this.timer = this.timers.setTimeout(() => this.fire(), ms);
  }

  private fire(): void {
    this.timer = undefined;
    const now = this.timers.now();
    for (const call of this.waiting) {
      const quiet = now - call.activeAt;
      if (quiet < H2_UPSTREAM_HEADERS_TIMEOUT_MS) {
        this.arm(H2_UPSTREAM_HEADERS_TIMEOUT_MS - quiet);
        return;
      }
      this.waiting.delete(call);
      call.timedOut();
    }
  }
}

function drained(stream: ClientHttp2Stream): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      stream.removeListener('drain', done);
      stream.removeListener('close', done);
      resolve();
    };
    stream.once('drain', done);
    stream.once('close', done);
  });
}

export function createH2Client(options: H2ClientOptions): H2Client {
  let session: ClientHttp2Session | undefined;
  let opening: Promise<ClientHttp2Session> | undefined;
  let closed = false;
  /** Open sessions and how many streams each carries. */
  const sessions = new Map<ClientHttp2Session, number>();
  const goneAway = new WeakSet<ClientHttp2Session>();
  const watch = new HeadWatch(options.timers ?? GLOBAL_TIMERS);

  function usable(s: ClientHttp2Session | undefined): s is ClientHttp2Session {
    return s !== undefined && !s.closed && !s.destroyed && !goneAway.has(s);
  }

  function startOn(s: ClientHttp2Session, call: Call): void {
    sessions.set(s, (sessions.get(s) ?? 0) + 1);
    call.start(s, watch, () => {
      const left = (sessions.get(s) ?? 1) - 1;
      if (sessions.has(s)) sessions.set(s, left);
    });
  }

  async function open(): Promise<ClientHttp2Session> {
    const socket = await options.connect();
    const s = h2Connect(options.origin, { ...SESSION_OPTIONS, createConnection: () => socket });
    sessions.set(s, 0);
    s.on('error', () => s.destroy());
    s.on('goaway', () => goneAway.add(s));
    s.on('close', () => {
      sessions.delete(s);
      if (session === s) session = undefined;
      if (sessions.size === 0 && opening === undefined) options.onIdle?.();
    });
    // Idle: no frame either way for a while. A session still carrying a stream (a quiet gRPC watch) stays.
    s.setTimeout(H2_UPSTREAM_IDLE_TIMEOUT_MS, () => {
      if ((sessions.get(s) ?? 0) === 0) s.close();
    });
    if (closed) s.destroy();
    return s;
  }

  function sessionNow(): ClientHttp2Session | Promise<ClientHttp2Session> {
    if (usable(session)) return session;
    opening ??= open().then(
      (s) => {
        opening = undefined;
        session = s;
        return s;
      },
      (err: unknown) => {
        opening = undefined;
        throw err;
      },
    );
    return opening;
  }

  return {
    request(req, handler) {
      const call = new Call(req, handler);
      if (closed) {
        call.fail(new BoundaryError('UPSTREAM_CLOSED', 'the upstream client is closed'));
        return call;
      }
      const s = sessionNow();
      if (s instanceof Promise) s.then((ready) => startOn(ready, call), (err: unknown) => call.fail(err instanceof Error ? err : new Error(String(err))));
      else startOn(s, call);
      return call;
    },
    close() {
      closed = true;
      for (const s of sessions.keys()) s.close();
    },
    destroy() {
      closed = true;
      watch.stop();
      for (const s of sessions.keys()) s.destroy();
    },
    get closed() {
      return closed;
    },
  };
}
