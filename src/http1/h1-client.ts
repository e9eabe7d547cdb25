// Keep-alive HTTP/1.1 client for one pinned upstream: the socket pool, its queue and limits. Each request runs as
// an exchange (h1-exchange.ts) on a connection (h1-connection.ts) that never reuses a socket whose framing is in
// doubt. Sockets come from the injected connect(); this module never dials, resolves names or decides policy.

import type { Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { Conn, type ConnectionPool } from './h1-connection.js';
import { CONNECTING, Exchange, QUEUED } from './h1-exchange.js';
import { type H1Request, serialise } from './h1-request.js';
import { type Timers, TURN_TIMERS } from '../shared/timers.js';

/** Requests waiting for a connection of one pool; beyond this a request fails with UPSTREAM_BUSY. */
export const MAX_QUEUED_REQUESTS_PER_UPSTREAM = 1_024;

export interface H1Timeouts {
  /** Inactivity (no read, no request body write) while waiting for the response head. */
  readonly headersTimeoutMs: number;
  /** Inactivity (no read) while the response body streams. */
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
  /** The request head was written to an upstream socket: from then on the origin may act on the request. */
  readonly sent: boolean;
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

interface H1PoolOptions {
  readonly connect: () => Promise<Socket>;
  readonly maxConnections: number;
  readonly timeouts: H1Timeouts;
  readonly maxQueued?: number;
  /** What the timeouts run on; TURN_TIMERS (the global timers, unref'd, the clock read once per turn) by default. */
  readonly timers?: Timers;
}

class Pool implements H1Pool, ConnectionPool {
  readonly timeouts: H1Timeouts;
  readonly timers: Timers;
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
    this.timers = options.timers ?? TURN_TIMERS;
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
    conn.feed.resume();
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
