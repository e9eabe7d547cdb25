// The proxy's HTTP/2 server for inspected tunnels whose client speaks HTTP/2 (ALPN h2 after TLS termination, or the
// cleartext preface by prior knowledge): one ServerSession (http2/server-session.ts) per tunnel, each stream handed
// to h2-stream.ts as one request, and a flood that closes a session, or an answer the client leaves stalled, reported
// as a finding. Owns sessions, never a verdict.

import type { Socket } from 'node:net';
import type { FloodKind } from '../http2/flood-guard.js';
import { GLOBAL_TIMERS } from '../shared/timers.js';
import { ServerSession } from '../http2/server-session.js';
import type { H2Tunnel, ProxyContext } from './context.js';
import { requestOutcome } from '../chain/event.js';
import { beginOutcome, emitOutcome, findingEvent } from '../chain/events.js';
import { parserRefusal } from '../chain/parser-refusal.js';
import { H2Error } from '../http2/frames.js';
import { createH2Upstreams, type H2Upstreams } from './h2-upstream.js';
import { handleH2Stream, type H2Session } from './h2-stream.js';

export {
  H2_CLIENT_CONNECTION_WINDOW,
  H2_MAX_CONCURRENT_STREAMS,
  H2_MAX_CONTINUATION_FRAMES,
  H2_MAX_HEADER_BLOCK_BYTES,
  H2_MAX_HEADER_LIST_BYTES,
  H2_MAX_HEADER_PAIRS,
  H2_MAX_SETTINGS_ENTRIES,
} from '../http2/server-session.js';

export interface H2Server {
  serve(socket: Socket, tunnel: H2Tunnel, onClose: () => void): void;
  close(): void;
}

export function createH2Server(ctx: ProxyContext): H2Server {
  const upstreams: H2Upstreams = createH2Upstreams(ctx.upstreams);
  const sessions = new Set<ServerSession>();
  ctx.metrics.watchHttp2({ clientSessions: () => sessions.size, upstreamClients: () => upstreams.size(), upstreamHeld: () => upstreams.held() });

  return {
    serve(socket, tunnel, onClose) {
      const { host, port, tls, addresses } = tunnel.target;
      const state: H2Session = { tunnel, upstream: upstreams.forTunnel({ host, port, tls, addresses }, tunnel.upstream) };
      let stalls = 0;
      const session: ServerSession = new ServerSession(socket, {
        onStream: (stream) => handleH2Stream(ctx, state, stream),
        onFlood: (kind) => reportFlood(ctx, tunnel, kind),
        onProtocolError: (code, message) => reportProtocolError(ctx, tunnel, code, message),
        stall: { ms: ctx.h2StallTimeoutMs, timers: GLOBAL_TIMERS },
        onStall: () => reportStall(ctx, tunnel, ++stalls),
        onClose: () => {
          sessions.delete(session);
          state.upstream.release();
          onClose();
        },
      });
      sessions.add(session);
      // A terminated TLS socket starts paused, and the sniff may have paused a cleartext one: the session reads now.
      socket.resume();
    },
    close() {
      for (const session of sessions) session.destroy();
      upstreams.close();
    },
  };
}

/** A stream reset for a stalled answer: counted, and the session's first one is a finding (one client, one line). */
function reportStall(ctx: ProxyContext, tunnel: H2Tunnel, nth: number): void {
  ctx.metrics.http2StalledStreams.inc({});
  if (nth > 1) return;
  const { host, port } = tunnel.target;
  const o = beginOutcome('l7', 'http', tunnel.src);
  o.host = host;
  o.port = port;
  o.detail = `HTTP/2 stream reset: its answer waited ${ctx.h2StallTimeoutMs} ms on a client that read none of it`;
  ctx.sink.emit(findingEvent(o, 'h2-stalled-stream'));
}

const H2_ERROR_NAMES: ReadonlyMap<number, string> = new Map(Object.entries(H2Error).map(([name, code]) => [code, name]));

/** A session closed for a connection error the client made: the GOAWAY's code and words, as a parser refusal's event. */
function reportProtocolError(ctx: ProxyContext, tunnel: H2Tunnel, code: number, message: string): void {
  const name = H2_ERROR_NAMES.get(code) ?? `0x${code.toString(16)}`;
  const r = parserRefusal({
    adapter: 'l7',
    src: tunnel.src,
    tunnel: tunnel.target,
    h2: true,
    method: 'UNKNOWN',
    reason: 'bad-request',
    status: undefined,
    parserError: name,
    detail: `HTTP/2 session closed with GOAWAY ${name}: ${message}`,
  });
  emitOutcome(ctx.sink, ctx.metrics, requestOutcome(r));
}

/** A session closed for a flood (GOAWAY ENHANCE_YOUR_CALM naming it went out): counted, and a finding. */
function reportFlood(ctx: ProxyContext, tunnel: H2Tunnel, kind: FloodKind): void {
  ctx.metrics.http2FloodClosed.inc({ flood: kind });
  const { host, port } = tunnel.target;
  const o = beginOutcome('l7', 'http', tunnel.src);
  o.host = host;
  o.port = port;
  o.detail = `HTTP/2 session closed: ${kind}`;
  ctx.sink.emit(findingEvent(o, `h2-${kind}`));
}
