// Keep-alive HTTP/1.1 client for one pinned upstream: validates and writes request heads and bodies, reads
// answers through h1-response.ts, and never reuses a socket whose framing is in doubt. Sockets come from the
// injected connect(); this module never dials, resolves names or decides policy.

import type { Socket } from 'node:net';
import { BoundaryError } from '../errors.js';
import { type H1Request, invalid, type Serialised, serialise } from './h1-request.js';
import { ResponseParser, type ResponseSink } from './h1-response.js';

/** Requests waiting for a connection of one pool; beyond this a request fails with UPSTREAM_BUSY. */
export const MAX_QUEUED_REQUESTS_PER_UPSTREAM = 1_024;

export interface H1Timeouts {
  /** Socket inactivity while waiting for the response head (request written, nothing answered). */
  readonly headersTimeoutMs: number;
  /** Socket inactivity while the response body streams. */
  readonly bodyTimeoutMs: number;
  /** How long an idle socket stays in the pool. */
  readonly keepAliveTimeoutMs: number;
}

export interface H1Handler {
  /**
   * The final response head with the body bytes that arrived with it. `complete` means that was the whole
   * response: no onData/onEnd follows. Otherwise onData... then onEnd or onError.
   */
  onHead(status: number, headers: string[], body: Buffer | undefined, complete: boolean): void;
  onData(chunk: Buffer): void;
  onEnd(): void;
  /** Once, instead of (or after) the above; the socket was destroyed. Dial errors arrive unchanged. */
  onError(err: Error): void;
}

export interface H1Exchange {
  /** The consumer went away: the upstream socket is destroyed (never reused mid-response); onError(err) follows. */
  abort(err: Error): void;
  pause(): void;
  resume(): void;
}

export interface H1Pool {
  /** Throws UPSTREAM_REQUEST_INVALID (nothing written), UPSTREAM_BUSY or UPSTREAM_CLOSED synchronously. */
  request(req: H1Request, handler: H1Handler): H1Exchange;
  /** Stops taking requests; queued and running ones finish, then every socket closes. */
  close(): Promise<void>;
  /** Fails everything in flight and destroys every socket now. */
  destroy(): void;
  readonly closed: boolean;
  /** Open sockets (busy and idle) plus dials in progress. */
  readonly connections: number;
}

export interface H1PoolOptions {
  readonly connect: () => Promise<Socket>;
  readonly maxConnections: number;
  readonly timeouts: H1Timeouts;
  readonly maxQueued?: number;
}

/** Safe to send twice (RFC 9110 §9.2.2) when a reused socket turned out stale. */
const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

const QUEUED = 0;
const CONNECTING = 1;
const ACTIVE = 2;
const FINISHED = 3;

class Exchange implements H1Exchange {
  readonly pool: Pool;
  readonly handler: H1Handler;
  readonly method: string;
  readonly head: string;
  readonly body: Buffer | AsyncIterable<Uint8Array> | null;
  readonly length: number;
  state = QUEUED;
  conn: Conn | undefined = undefined;
  retried = false;
  bodyDone = false;
  failed = false;
  /** Set while the parser runs; delivered to the handler after each read. */
  status = 0;
  headers: string[] | undefined = undefined;
  delivered = false;
  ended = false;
  early: Buffer | Buffer[] | undefined = undefined;

  constructor(pool: Pool, req: H1Request, handler: H1Handler, serialised: Serialised) {
    this.pool = pool;
    this.handler = handler;
    this.method = req.method;
    this.body = req.body;
    this.head = serialised.head;
    this.length = serialised.length;
  }

  abort(err: Error): void {
    this.fail(err);
  }

  pause(): void {
    if (this.state === ACTIVE) this.conn?.socket.pause();
  }

  resume(): void {
    if (this.state === ACTIVE) this.conn?.socket.resume();
  }

  /** Retrying is safe only if nothing of a streamed body was consumed and the method is idempotent. */
  get retryable(): boolean {
    return !this.retried && (this.body === null || Buffer.isBuffer(this.body)) && IDEMPOTENT.has(this.method);
  }

  write(conn: Conn): void {
    const socket = conn.socket;
    const body = this.body;
    if (body === null || Buffer.isBuffer(body)) {
      socket.cork();
      socket.write(this.head, 'latin1');
      if (body !== null && body.length > 0) socket.write(body);
      socket.uncork();
      this.bodyDone = true;
      return;
    }
    socket.write(this.head, 'latin1');
    pumpBody(this, conn, body);
  }

  fail(err: Error): void {
    if (this.state === FINISHED) return;
    const state = this.state;
    this.state = FINISHED;
    this.failed = true;
    const conn = this.conn;
    this.conn = undefined;
    if (state === QUEUED) this.pool.dequeue(this);
    if (conn !== undefined) {
      conn.exchange = undefined;
      conn.destroy();
    }
    this.handler.onError(err);
  }

  /** The response ended: the socket goes back only if the parser and the request body both say it may. */
  finish(conn: Conn): void {
    this.state = FINISHED;
    this.conn = undefined;
    conn.exchange = undefined;
    conn.served++;
    if (conn.parser.reusable && this.bodyDone) this.pool.release(conn);
    else conn.destroy();
  }

  /** After each read: hands the head (with what body came along) and the end to the handler. */
  deliver(conn: Conn): void {
    if (this.state !== ACTIVE || this.conn !== conn) return;
    if (!this.delivered) {
      if (this.headers === undefined) return;
      this.delivered = true;
      const early = this.early;
      this.early = undefined;
      const body = early === undefined ? undefined : Buffer.isBuffer(early) ? early : Buffer.concat(early);
      const complete = this.ended;
      if (complete) this.finish(conn);
      else conn.arm(this.pool.timeouts.bodyTimeoutMs);
      this.handler.onHead(this.status, this.headers, body, complete);
      return;
    }
    if (this.ended) {
      this.finish(conn);
      this.handler.onEnd();
    }
  }

  onBody(chunk: Buffer): void {
    if (this.delivered) {
      this.handler.onData(chunk);
      return;
    }
    const early = this.early;
    if (early === undefined) this.early = chunk;
    else if (Buffer.isBuffer(early)) this.early = [early, chunk];
    else early.push(chunk);
  }
}

/** Waits until `socket` drains or closes. */
function drained(socket: Socket): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      socket.removeListener('drain', done);
      socket.removeListener('close', done);
      resolve();
    };
    socket.once('drain', done);
    socket.once('close', done);
  });
}

/**
 * Streams a body with upstream backpressure: exactly the declared Content-Length, else chunked. Errors from
 * the iterator (e.g. the credential marker scanner) fail the exchange as they are, socket destroyed.
 */
async function pumpBody(ex: Exchange, conn: Conn, body: AsyncIterable<Uint8Array>): Promise<void> {
  const socket = conn.socket;
  const chunked = ex.length < 0;
  let sent = 0;
  try {
    for await (const chunk of body) {
      if (ex.conn !== conn) {
        // Answered before the body was sent: keep draining the client's body (as node:http does) rather
        // than destroying the client request under a response that is still being written.
        if (!ex.failed) continue;
        return;
      }
      if (chunk.length === 0) continue;
      sent += chunk.length;
      let ok: boolean;
      if (chunked) {
        socket.cork();
        socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
        socket.write(chunk);
        ok = socket.write('\r\n', 'latin1');
        socket.uncork();
      } else {
        if (sent > ex.length) throw invalid('request body is longer than its Content-Length');
        ok = socket.write(chunk);
      }
      if (!ok && ex.conn === conn) await drained(socket);
    }
    if (ex.conn !== conn) return;
    if (chunked) socket.write('0\r\n\r\n', 'latin1');
    else if (sent !== ex.length) throw invalid('request body is shorter than its Content-Length');
    ex.bodyDone = true;
  } catch (err) {
    if (ex.conn === conn) ex.fail(err instanceof Error ? err : new Error(String(err)));
  }
}

class Conn implements ResponseSink {
  readonly socket: Socket;
  readonly pool: Pool;
  readonly parser: ResponseParser;
  exchange: Exchange | undefined = undefined;
  /** Responses completed on this socket: above 0 it is a reused socket that may have gone stale. */
  served = 0;
  gotBytes = false;
  gone = false;
  lastError: Error | undefined = undefined;
  /**
   * What the socket's own inactivity timer runs with: the exchange phases only (0 once it fired). Node
   * re-creates that timer on every socket.setTimeout, even with an unchanged value; reads and writes merely
   * refresh it. So it is set only when the phase's value changes, and idleness has a timer of its own.
   */
  armed = 0;
  idleTimer: NodeJS.Timeout | undefined = undefined;

  constructor(pool: Pool, socket: Socket) {
    this.pool = pool;
    this.socket = socket;
    this.parser = new ResponseParser(this);
    socket.on('data', this.onSocketData.bind(this));
    socket.on('end', this.onSocketEnd.bind(this));
    socket.on('close', this.onSocketClose.bind(this));
    socket.on('error', this.onSocketError.bind(this));
    socket.on('timeout', this.onSocketTimeout.bind(this));
  }

  assign(ex: Exchange): void {
    this.exchange = ex;
    ex.conn = this;
    ex.state = ACTIVE;
    this.gotBytes = false;
    this.parser.start(ex.method === 'HEAD');
    // Unchanged, the timer needs no reset: the request write below refreshes it as it reaches the socket.
    // Bytes still queued from an earlier request would hold that write back, so then it restarts here.
    const ms = this.pool.timeouts.headersTimeoutMs;
    if (this.armed !== ms || this.socket.writableLength > 0) this.arm(ms);
    ex.write(this);
  }

  /** Sets the socket's inactivity timer for an exchange phase; unchanged, a read has just refreshed it. */
  arm(ms: number): void {
    if (this.armed === ms) return;
    this.armed = ms;
    this.socket.setTimeout(ms);
  }

  /** Back in the pool: closed after keepAliveTimeoutMs unless a request takes it first. */
  startIdle(): void {
    if (this.idleTimer === undefined) this.idleTimer = setTimeout(this.onIdleTimeout.bind(this), this.pool.timeouts.keepAliveTimeoutMs).unref();
    else this.idleTimer.refresh();
  }

  destroy(): void {
    if (this.gone) return;
    this.gone = true;
    clearTimeout(this.idleTimer);
    this.socket.destroy();
    this.pool.forget(this);
  }

  onHead(status: number, headers: string[]): void {
    const ex = this.exchange;
    if (ex === undefined) return;
    ex.status = status;
    ex.headers = headers;
  }

  onData(chunk: Buffer): void {
    this.exchange?.onBody(chunk);
  }

  onEnd(): void {
    if (this.exchange !== undefined) this.exchange.ended = true;
  }

  private onSocketData(chunk: Buffer): void {
    const ex = this.exchange;
    if (ex === undefined) {
      // An idle upstream that talks unasked cannot be trusted with the next request's framing.
      this.destroy();
      return;
    }
    this.gotBytes = true;
    const err = this.parser.feed(chunk);
    if (err !== undefined) {
      ex.fail(err);
      return;
    }
    this.deliver(ex);
  }

  private deliver(ex: Exchange): void {
    try {
      ex.deliver(this);
    } catch (thrown) {
      // A throwing handler must not take the process down from a socket event: it fails its own exchange.
      ex.fail(thrown instanceof Error ? thrown : new Error(String(thrown)));
    }
  }

  // Sockets are half-open capable (dialPinned): an upstream FIN ends our use of the socket too.
  private onSocketEnd(): void {
    this.lost();
  }

  private onSocketClose(): void {
    this.lost();
  }

  private onSocketError(err: Error): void {
    this.lastError = err;
  }

  private onSocketTimeout(): void {
    this.armed = 0;
    const ex = this.exchange;
    if (ex !== undefined) {
      const body = this.parser.headDone;
      const ms = body ? this.pool.timeouts.bodyTimeoutMs : this.pool.timeouts.headersTimeoutMs;
      ex.fail(new BoundaryError('UPSTREAM_TIMEOUT', body ? `upstream response body stalled for ${ms} ms` : `upstream sent no response head in ${ms} ms`));
    }
    // Idle, the exchange timer that ran out is a leftover: the idle timer decides when the socket closes.
  }

  /** Fires keepAliveTimeoutMs after the last release; a socket busy again by then stays. */
  private onIdleTimeout(): void {
    if (this.exchange === undefined) this.destroy();
  }

  /** The socket ended or closed under an exchange: a close-delimited body ends, a stale socket retries once. */
  private lost(): void {
    const ex = this.exchange;
    if (ex === undefined || !this.gotBytes) {
      this.exchange = undefined;
      const retry = ex !== undefined && this.served > 0 && ex.retryable;
      if (ex !== undefined) ex.conn = undefined;
      if (retry) {
        ex.retried = true;
        this.pool.requeue(ex);
      }
      // Frees the slot; a requeued request is dialled first, on a fresh socket.
      this.destroy();
      if (ex !== undefined && !retry) ex.fail(new BoundaryError('UPSTREAM_CLOSED', 'upstream closed the connection before answering', { cause: this.lastError }));
      return;
    }
    const err = this.parser.eof();
    if (err === undefined) this.deliver(ex);
    else ex.fail(new BoundaryError('UPSTREAM_CLOSED', err.message, { cause: this.lastError ?? err }));
    this.destroy();
  }
}

class Pool implements H1Pool {
  readonly timeouts: H1Timeouts;
  private readonly connect: () => Promise<Socket>;
  private readonly maxConnections: number;
  private readonly maxQueued: number;
  private readonly idle: Conn[] = [];
  private readonly all = new Set<Conn>();
  private queue: Exchange[] = [];
  /** Dials in progress (an exchange may give up on its dial; the socket then joins the pool). */
  private dialling = 0;
  private readonly waitingForDial = new Set<Exchange>();
  private state: 'open' | 'closing' | 'destroyed' = 'open';
  private onDrained: (() => void) | undefined = undefined;

  constructor(options: H1PoolOptions) {
    this.connect = options.connect;
    this.maxConnections = options.maxConnections;
    this.maxQueued = options.maxQueued ?? MAX_QUEUED_REQUESTS_PER_UPSTREAM;
    this.timeouts = options.timeouts;
  }

  get closed(): boolean {
    return this.state !== 'open';
  }

  get connections(): number {
    return this.all.size + this.dialling;
  }

  request(req: H1Request, handler: H1Handler): H1Exchange {
    if (this.state !== 'open') throw new BoundaryError('UPSTREAM_CLOSED', 'the upstream pool is closed');
    const ex = new Exchange(this, req, handler, serialise(req));
    const idle = this.idle.pop();
    if (idle !== undefined) idle.assign(ex);
    else if (this.connections < this.maxConnections) this.dial(ex);
    else if (this.queue.length >= this.maxQueued) {
      throw new BoundaryError('UPSTREAM_BUSY', `${this.queue.length} requests already wait for this upstream`);
    } else this.queue.push(ex);
    return ex;
  }

  /** Opens a new connection for `ex`; dial errors reach its handler unchanged. */
  dial(ex: Exchange): void {
    ex.state = CONNECTING;
    this.dialling++;
    this.waitingForDial.add(ex);
    this.connect().then(
      (socket) => {
        this.dialling--;
        this.waitingForDial.delete(ex);
        if (this.state === 'destroyed') {
          socket.destroy();
          return;
        }
        const conn = new Conn(this, socket);
        this.all.add(conn);
        if (ex.state === CONNECTING) conn.assign(ex);
        else this.release(conn);
      },
      (err: unknown) => {
        this.dialling--;
        this.waitingForDial.delete(ex);
        if (ex.state === CONNECTING) ex.fail(err instanceof Error ? err : new Error(String(err)));
        this.next();
      },
    );
  }

  requeue(ex: Exchange): void {
    ex.state = QUEUED;
    this.queue.unshift(ex);
  }

  dequeue(ex: Exchange): void {
    const i = this.queue.indexOf(ex);
    if (i >= 0) this.queue.splice(i, 1);
  }

  /** A finished, reusable socket: the next queued request, else the idle stack (LIFO keeps few sockets warm). */
  release(conn: Conn): void {
    conn.socket.resume();
    const next = this.queue.shift();
    if (next !== undefined) {
      conn.assign(next);
      return;
    }
    if (this.state !== 'open') {
      conn.destroy();
      return;
    }
    conn.startIdle();
    this.idle.push(conn);
  }

  /** A socket is gone: its slot may serve the queue. */
  forget(conn: Conn): void {
    if (!this.all.delete(conn)) return;
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    this.next();
  }

  private next(): void {
    if (this.state === 'destroyed') return;
    const ex = this.queue.length > 0 && this.connections < this.maxConnections ? this.queue.shift() : undefined;
    if (ex !== undefined) this.dial(ex);
    else if (this.connections === 0 && this.queue.length === 0) this.onDrained?.();
  }

  close(): Promise<void> {
    if (this.state === 'open') this.state = 'closing';
    for (const conn of [...this.idle]) conn.destroy();
    if (this.connections === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.onDrained;
      this.onDrained = () => {
        previous?.();
        resolve();
      };
    });
  }

  destroy(): void {
    this.state = 'destroyed';
    const closed = new BoundaryError('UPSTREAM_CLOSED', 'the upstream pool was closed');
    const queued = this.queue;
    this.queue = [];
    for (const ex of queued) ex.fail(closed);
    for (const ex of [...this.waitingForDial]) ex.fail(closed);
    for (const conn of [...this.all]) {
      conn.exchange?.fail(closed);
      conn.destroy();
    }
    this.onDrained?.();
  }
}

/** A pool of keep-alive sockets to one pinned destination, opened through `connect`. */
export function createH1Pool(options: H1PoolOptions): H1Pool {
  return new Pool(options);
}
