// HTTP/2 client for one pinned upstream (the HTTP/2 twin of http1/h1-client.ts): one session at a time on a socket
// from the injected connect(), a new one after GOAWAY or close; each request is one stream (h2-call.ts), streamed
// both ways with HTTP/2 flow control (a paused consumer stops the window), trailers both ways. The frames are
// boundary's own (h2-session.ts), not node:http2's: docs/destinations.md#http2 says why. Never dials, resolves or
// decides.

import type { Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import type { H1Exchange } from '../http1/h1-client.js';
import { type Timers, TURN_TIMERS } from '../shared/timers.js';
import { Call, createHeadWatch, type H2Handler, type H2Request } from './h2-call.js';
import { H2_UPSTREAM_ASSUMED_MAX_STREAMS, H2Session } from './h2-session.js';

export { H2_UPSTREAM_HEADERS_TIMEOUT_MS, H2_UPSTREAM_REFUSED_RETRIES, type H2Handler, type H2Request } from './h2-call.js';
export { UpstreamResetError } from './upstream-stream.js';

/** A session with no stream open is closed after this much silence. */
export const H2_UPSTREAM_IDLE_TIMEOUT_MS = 30_000;

export interface H2Client {
  /** Never throws: a connect failure reaches handler.onError unchanged (dial errors keep their codes). */
  request(req: H2Request, handler: H2Handler): H1Exchange;
  /** Streams the current session takes at once (the origin's limit; H2_UPSTREAM_ASSUMED_MAX_STREAMS before a session). */
  capacity(): number;
  /** Of those, how many a new stream would find free now; 0 or less: it would wait for a slot. */
  room(): number;
  /** Of the streams open now, those whose consumer paused them (a client that does not read). */
  held(): number;
  close(): void;
  destroy(): void;
  readonly closed: boolean;
}

interface H2ClientOptions {
  /** A connected socket (TLS with ALPN h2 done, or cleartext for prior knowledge). */
  readonly connect: () => Promise<Socket>;
  /** The last session closed and none is opening: the client holds nothing now. */
  readonly onIdle?: () => void;
  /**
   * What the response-head deadline runs on; by default the global timers (unref'd) with the clock read once per turn:
   * the deadline is 120 s, and every stream's start would otherwise read the clock.
   */
  readonly timers?: Timers;
}

export function createH2Client(options: H2ClientOptions): H2Client {
  let session: H2Session | undefined;
  let opening: Promise<H2Session> | undefined;
  let closed = false;
  /** Calls waiting for the session being opened. */
  let starting = 0;
  /** Open sessions: the current one, and replaced ones still finishing their streams. */
  const sessions = new Set<H2Session>();
  const watch = createHeadWatch(options.timers ?? TURN_TIMERS);

  function gone(s: H2Session): void {
    sessions.delete(s);
    if (session === s) session = undefined;
    if (sessions.size === 0 && opening === undefined) options.onIdle?.();
  }

  async function open(): Promise<H2Session> {
    const socket = await options.connect();
    const s = new H2Session(socket, {
      idleMs: H2_UPSTREAM_IDLE_TIMEOUT_MS,
      onGoaway: (x) => {
        if (session === x) session = undefined;
      },
      onClose: gone,
    });
    if (!s.closed) sessions.add(s);
    if (closed) s.destroy();
    return s;
  }

  function sessionNow(): H2Session | Promise<H2Session> {
    if (session !== undefined && !session.goneAway) return session;
    opening ??= open().then(
      (s) => {
        opening = undefined;
        if (!s.closed) session = s;
        return s;
      },
      (err: unknown) => {
        opening = undefined;
        throw err;
      },
    );
    return opening;
  }

  function startCall(call: Call): void {
    if (closed) {
      call.fail(new BoundaryError('UPSTREAM_CLOSED', 'the upstream client is closed'));
      return;
    }
    const s = sessionNow();
    if (!(s instanceof Promise)) {
      call.start(s);
      return;
    }
    starting++;
    s.then(
      (ready) => {
        starting--;
        call.start(ready);
      },
      (err: unknown) => {
        starting--;
        call.fail(err instanceof Error ? err : new Error(String(err)));
      },
    );
  }

  /** The session a new stream would go on now, if one is open and takes streams. */
  function current(): H2Session | undefined {
    return session !== undefined && !session.goneAway ? session : undefined;
  }

  return {
    request(req, handler) {
      const call = new Call(req, handler, watch, startCall);
      startCall(call);
      return call;
    },
    capacity() {
      return current()?.maxStreams ?? H2_UPSTREAM_ASSUMED_MAX_STREAMS;
    },
    room() {
      const s = current();
      return s === undefined ? H2_UPSTREAM_ASSUMED_MAX_STREAMS - starting : s.maxStreams - s.load;
    },
    held() {
      return current()?.held ?? 0;
    },
    close() {
      closed = true;
      for (const s of sessions) s.close();
    },
    destroy() {
      closed = true;
      watch.clear();
      for (const s of sessions) s.destroy();
    },
    get closed() {
      return closed;
    },
  };
}
