// The proxy's one node:http2 server for inspected tunnels whose client speaks HTTP/2 (ALPN h2 after TLS
// termination, or the cleartext preface by prior knowledge): its limits, the per-session flood guard, and each
// stream handed to h2-stream.ts as one request. Owns sessions, never a verdict.

import { constants, createServer, type Http2Server, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { createFloodGuard, type FloodKind } from '../http2/flood-guard.js';
import { MAX_HEADER_COUNT } from '../http1/framing.js';
import type { H2Tunnel, ProxyContext } from './context.js';
import { beginOutcome, findingEvent } from './events.js';
import { createH2Upstreams, type H2Upstreams } from './h2-upstream.js';
import { handleH2Stream, type H2Session } from './h2-stream.js';

/** docs/destinations.md#http2: streams one client connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
export const H2_MAX_CONCURRENT_STREAMS = 100;
/** A request header list beyond this (HPACK-decoded, as SETTINGS_MAX_HEADER_LIST_SIZE counts it) resets the stream: as MAX_HEAD_BYTES. */
export const H2_MAX_HEADER_LIST_BYTES = 16_384;
/** Header fields per request, pseudo-headers included: MAX_HEADER_COUNT regular ones plus the four pseudo-headers. */
export const H2_MAX_HEADER_PAIRS = MAX_HEADER_COUNT + 4;
/** Entries one SETTINGS frame may carry (node:http2's maxSettings). */
export const H2_MAX_SETTINGS_ENTRIES = 32;
/** Frames nghttp2 refuses as invalid before the session is closed (node:http2 default 1000: empty DATA floods). */
export const H2_MAX_INVALID_FRAMES = 100;
/** Streams refused (over the concurrency limit, or malformed) before the session is closed. */
export const H2_MAX_REJECTED_STREAMS = 100;
/** Memory nghttp2 may hold for one client session, in MB (node:http2's default, named): HPACK bombs, queued frames. */
export const H2_MAX_SESSION_MEMORY_MB = 10;
/**
 * CONTINUATION frames after one HEADERS frame: nghttp2 1.61 (Node 20.12.2 and later) stops a header block at this
 * many and closes the session (CVE-2024-27316 class). Built in; named for the docs and the attack test.
 */
export const H2_MAX_CONTINUATION_FRAMES = 8;

const { NGHTTP2_ENHANCE_YOUR_CALM } = constants;

export interface H2Server {
  serve(socket: Socket, tunnel: H2Tunnel, onClose: () => void): void;
  close(): void;
}

export function createH2Server(ctx: ProxyContext): H2Server {
  const upstreams: H2Upstreams = createH2Upstreams(ctx.upstreams);
  const server: Http2Server = createServer({
    maxSessionMemory: H2_MAX_SESSION_MEMORY_MB,
    maxHeaderListPairs: H2_MAX_HEADER_PAIRS,
    maxSettings: H2_MAX_SETTINGS_ENTRIES,
    maxSessionInvalidFrames: H2_MAX_INVALID_FRAMES,
    maxSessionRejectedStreams: H2_MAX_REJECTED_STREAMS,
    settings: {
      maxConcurrentStreams: H2_MAX_CONCURRENT_STREAMS,
      maxHeaderListSize: H2_MAX_HEADER_LIST_BYTES,
      enablePush: false,
      enableConnectProtocol: false,
    },
  });
  const sessions = new Set<Http2Session>();
  ctx.metrics.watchHttp2({ clientSessions: () => sessions.size, upstreamClients: () => upstreams.size() });
  /** What serve() was given, for the session node:http2 makes inside its emit('connection'). */
  let adopting: Omit<H2Session, 'guard' | 'aborted'> | undefined;

  server.on('session', (session: Http2Session) => {
    const serving = adopting;
    if (serving === undefined) {
      session.destroy();
      return;
    }
    sessions.add(session);
    const flood = createFloodGuard();
    const calm = calmer(ctx, serving.tunnel, session);
    const state: H2Session = { ...serving, guard: flood, aborted: () => calm(flood.reset()) };
    session.on('ping', () => calm(flood.ping()));
    session.on('remoteSettings', () => calm(flood.settings()));
    session.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, raw: string[]) => {
      flood.request();
      handleH2Stream(ctx, state, stream, headers, raw, flags);
    });
    session.on('error', () => session.destroy());
    session.once('close', () => {
      sessions.delete(session);
      state.upstream.release();
      state.onClose();
    });
  });

  return {
    serve(socket, tunnel, onClose) {
      const { host, port, tls, addresses } = tunnel.target;
      adopting = { tunnel, upstream: upstreams.forTunnel({ host, port, tls, addresses }, tunnel.upstream), onClose };
      // Synchronous: node:http2 makes the session (and emits 'session') inside this call, and reads the bytes the
      // sniff put back on the socket on the next tick, so nothing may resume the socket here.
      server.emit('connection', socket);
      adopting = undefined;
      // A terminated TLS socket starts paused (nothing read it yet): once the session took what was buffered, let it flow.
      setImmediate(() => socket.resume());
    },
    close() {
      for (const session of sessions) session.destroy();
      upstreams.close();
    },
  };
}

/** What closes a session whose client floods: GOAWAY ENHANCE_YOUR_CALM naming the flood, and a finding. */
function calmer(ctx: ProxyContext, tunnel: H2Tunnel, session: Http2Session): (kind: FloodKind | undefined) => void {
  return (kind) => {
    if (kind === undefined || session.destroyed) return;
    session.goaway(NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from(kind));
    session.destroy();
    ctx.metrics.http2FloodClosed.inc({ flood: kind });
    const { host, port } = tunnel.target;
    const o = beginOutcome('l7', 'http', tunnel.src);
    o.host = host;
    o.port = port;
    o.detail = `HTTP/2 session closed: ${kind}`;
    ctx.sink.emit(findingEvent(o, `h2-${kind}`));
  };
}
