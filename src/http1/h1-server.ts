// boundary's own HTTP/1.1 server for workload connections (docs/architecture.md#http11-server): a set of
// server-connection.ts connections fed sockets by the listener and by inspected tunnels, the sweep that enforces
// the head and request deadlines, and closing idle or all connections. Knows no policy: handlers decide.

import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { type Timers, TURN_TIMERS } from '../shared/timers.js';
import { type ClientError, ServerConnection } from './server-connection.js';
import type { HeaderInput } from './server-head.js';
import type { Peer } from './server-request.js';

export type { ClientError } from './server-connection.js';

/** A request as the adapters see it: its head as received, and its body (read with backpressure). */
export interface H1IncomingRequest extends AsyncIterable<Buffer> {
  readonly method: string;
  readonly url: string;
  readonly httpVersion: string;
  /** Flat `[name, value, ...]` as received. */
  readonly rawHeaders: readonly string[];
  readonly headers: IncomingHttpHeaders;
  readonly socket: Socket;
  /** The client's address and port (the socket's remoteAddress and remotePort), read once per connection. */
  readonly peer: Peer;
  /** The whole message, body included, has been read. */
  readonly complete: boolean;
  /** Why the body ended before the message did (`code`: ECONNRESET when the connection closed, else the parse error,
   *  the client's FIN (HPE_INVALID_EOF_STATE) or ERR_HTTP_REQUEST_TIMEOUT); undefined while it may still end whole. */
  readonly cutShortBy: ClientError | undefined;
  /** Reads the rest of the body and drops it. */
  discard(): void;
}

/** The answer to one request, as the adapters write it. */
export interface H1Answer {
  readonly headersSent: boolean;
  /** The client connection while this answer is the one being written. */
  readonly socket: Socket | undefined;
  /** How the connection is closed when this answer is its last (default: end, then destroy once flushed). */
  closeWith: ((socket: Socket) => void) | undefined;
  writeContinue(): void;
  /** Throws before anything is written for a field node:http would refuse. */
  writeHead(status: number, headers: HeaderInput, reason?: string): this;
  /** False: wait for 'drain'. */
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): this;
  /** Cuts the client connection. */
  destroy(): this;
  /** 'close': the connection closed before this answer was all written; 'drain': write() may go on. */
  on(event: 'close' | 'drain', listener: () => void): this;
  once(event: 'close' | 'drain', listener: () => void): this;
  removeListener(event: 'close' | 'drain', listener: () => void): this;
}

/** What a client-error handler may do with the connection. */
export interface ClientErrorControl {
  /** A request before the refused bytes is still being answered. */
  inFlight(): boolean;
  /** The answer in flight goes out whole, then the connection closes. */
  closeAfterAnswer(): void;
}

export interface H1ServerSettings {
  /** llhttp's limit on a head (request line and fields; trailers too): beyond it, HPE_HEADER_OVERFLOW. */
  readonly maxHeadBytes: number;
  /** A request head must be complete this long after its first byte; 0 for none. */
  readonly headersTimeoutMs: number;
  /** A whole request, body included; 0 for none. */
  readonly requestTimeoutMs: number;
  /** An idle kept-alive connection is closed after this long; 0 for never. */
  readonly keepAliveTimeoutMs: number;
  /** How often the three deadlines above are checked (each is enforced up to this much late). */
  readonly checkIntervalMs: number;
  readonly timers: Timers;
}

export interface H1ServerHandlers {
  /** A request to answer on `res`; `expectContinue`: the client waits for 100 Continue before its body. */
  request(req: H1IncomingRequest, res: H1Answer, expectContinue: boolean): void;
  /** CONNECT: the socket and the bytes read after its head are the handler's from now on. */
  connect(req: H1IncomingRequest, socket: Socket, head: Buffer): void;
  /** An Upgrade request, likewise. */
  upgrade(req: H1IncomingRequest, socket: Socket, head: Buffer): void;
  /** A parse error, a socket error or ERR_HTTP_REQUEST_TIMEOUT: nothing more is read from `conn`. */
  clientError(err: ClientError, socket: Socket, conn: ClientErrorControl): void;
}

export interface H1Server {
  /** Serves `socket` (an admitted client connection or a tunnel's inner socket) until it closes or is handed over. */
  serve(socket: Socket): void;
  /** Starts the deadline sweep (head, request, keep-alive), which runs while a connection is open. */
  start(): void;
  /** Destroys every connection that is between requests with no answer owed. */
  closeIdle(): void;
  closeAll(): void;
  /** Stops the sweep. */
  stop(): void;
}

export function createH1Server(options: Omit<H1ServerSettings, 'timers'> & { readonly timers?: Timers | undefined }, handlers: H1ServerHandlers): H1Server {
  const settings: H1ServerSettings = { ...options, timers: options.timers ?? TURN_TIMERS };
  const { timers, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = settings;
  const connections = new Set<ServerConnection>();
  const gone = (conn: ServerConnection): void => {
    connections.delete(conn);
  };
  let sweep: unknown;
  let started = false;
  const arm = (): void => {
    sweep = timers.setTimeout(check, settings.checkIntervalMs);
  };

  // One sweep for the three deadlines instead of a timer set and cleared per request, and only while a connection
  // is open: an idle sidecar keeps no timer of its own here (each wakeup is paid in every sandbox).
  function check(): void {
    const now = timers.now();
    for (const conn of connections) {
      const start = conn.messageStart;
      if (start < 0) {
        if (keepAliveTimeoutMs > 0 && conn.idleSince >= 0 && now - conn.idleSince > keepAliveTimeoutMs) conn.destroy();
        continue;
      }
      const late = (!conn.headersDone && headersTimeoutMs > 0 && now - start > headersTimeoutMs) || (requestTimeoutMs > 0 && now - start > requestTimeoutMs);
      if (late) conn.timedOut();
    }
    if (connections.size > 0) arm();
    else sweep = undefined;
  }

  return {
    serve(socket) {
      connections.add(new ServerConnection(socket, settings, handlers, gone));
      if (started && sweep === undefined) arm();
    },
    start() {
      started = true;
      if (sweep === undefined && connections.size > 0) arm();
    },
    closeIdle() {
      for (const conn of connections) if (conn.idle()) conn.destroy();
    },
    closeAll() {
      for (const conn of connections) conn.destroy();
    },
    stop() {
      started = false;
      if (sweep !== undefined) timers.clearTimeout(sweep);
      sweep = undefined;
    },
  };
}
