// One pooled upstream socket of the HTTP/1.1 client: its response parser, the exchange phase timeouts and
// the idle timer, and what a lost socket means (a close-delimited end, a stale socket retried once, or an
// error). Never dials; the pool in h1-client.ts hands sockets in and takes reusable ones back.

import type { Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import type { H1Timeouts } from './h1-client.js';
import { ACTIVE, type Exchange } from './h1-exchange.js';
import { ResponseParser, type ResponseSink } from './h1-response.js';
import { type ByteFeed, feedBytes } from './upstream-feed.js';
import type { Timers } from '../shared/timers.js';

/** What a connection and its exchanges ask of the pool they belong to. */
export interface ConnectionPool {
  readonly timeouts: H1Timeouts;
  readonly timers: Timers;
  /** A finished, reusable socket. */
  release(conn: Conn): void;
  /** A socket is gone: its slot may serve the queue. */
  forget(conn: Conn): void;
  /** A request whose reused socket went stale goes back to the front of the queue. */
  requeue(ex: Exchange): void;
  /** A queued request failed before it was given a connection. */
  dequeue(ex: Exchange): void;
}

/** One upstream socket: feeds its bytes to the response parser for the exchange it serves, one at a time. */
export class Conn implements ResponseSink {
  readonly socket: Socket;
  readonly pool: ConnectionPool;
  readonly parser: ResponseParser;
  /** Reads the socket (upstream-feed.ts); pause and resume go through it, not through the socket. */
  readonly feed: ByteFeed;
  exchange: Exchange | undefined = undefined;
  /** Responses completed on this socket: above 0 it is a reused socket that may have gone stale. */
  served = 0;
  gotBytes = false;
  gone = false;
  lastError: Error | undefined = undefined;
  /**
   * The exchange phase's inactivity deadline (headers or body; 0 when none runs), restarted by every read
   * and request body write. Idleness in the pool has a deadline of its own. Both run on the pool's timers.
   * Activity only records its time, and a new phase keeps a pending timer that fires no later than its deadline:
   * a timer that fires finds the deadline moved (or no phase running) and waits the rest, so a busy socket costs
   * one timer per deadline, not one per chunk or per request (measured on bench/proxy.sh).
   */
  armed = 0;
  private lastActivity = 0;
  private phaseTimer: unknown = undefined;
  /** When the pending phase timer fires, on the pool's clock. */
  private phaseDue = 0;
  private idleTimer: unknown = undefined;
  /** When the socket went back to the pool; undefined while an exchange holds it. */
  private idleSince: number | undefined = undefined;
  private readonly onPhaseTimeout: () => void;
  private readonly onIdleTimeout: () => void;

  constructor(pool: ConnectionPool, socket: Socket) {
    this.pool = pool;
    this.socket = socket;
    this.parser = new ResponseParser(this);
    this.feed = feedBytes(socket, this.onSocketData.bind(this));
    socket.on('end', this.onSocketEnd.bind(this));
    socket.on('close', this.onSocketClose.bind(this));
    socket.on('error', this.onSocketError.bind(this));
    this.onPhaseTimeout = this.phaseTimedOut.bind(this);
    this.onIdleTimeout = this.idleTimedOut.bind(this);
  }

  assign(ex: Exchange): void {
    this.exchange = ex;
    ex.conn = this;
    ex.state = ACTIVE;
    this.gotBytes = false;
    this.parser.start(ex.method === 'HEAD');
    this.stopIdle();
    this.arm(this.pool.timeouts.headersTimeoutMs);
    ex.write(this);
  }

  /** Starts the inactivity deadline of an exchange phase (headers or body) from now. */
  arm(ms: number): void {
    const now = this.pool.timers.now();
    this.armed = ms;
    this.lastActivity = now;
    if (this.phaseTimer !== undefined && this.phaseDue <= now + ms) return;
    this.clearPhaseTimer();
    this.setPhaseTimer(now, ms);
  }

  /** Activity (a read, a request body write): the running phase deadline starts over. */
  touch(): void {
    if (this.armed !== 0) this.lastActivity = this.pool.timers.now();
  }

  /** Back in the pool: closed after keepAliveTimeoutMs unless a request takes it first. */
  startIdle(): void {
    this.disarm();
    this.idleSince = this.pool.timers.now();
    // A timer still pending from an earlier idle spell checks the new start when it fires.
    this.idleTimer ??= this.pool.timers.setTimeout(this.onIdleTimeout, this.pool.timeouts.keepAliveTimeoutMs);
  }

  destroy(): void {
    if (this.gone) return;
    this.gone = true;
    this.disarm();
    this.clearPhaseTimer();
    this.stopIdle();
    this.clearIdleTimer();
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
    this.touch();
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

  /** No phase runs: a pending phase timer stays, to be reused by the next phase (or to find nothing to do). */
  private disarm(): void {
    this.armed = 0;
  }

  private setPhaseTimer(now: number, ms: number): void {
    this.phaseDue = now + ms;
    this.phaseTimer = this.pool.timers.setTimeout(this.onPhaseTimeout, ms);
  }

  private clearPhaseTimer(): void {
    if (this.phaseTimer === undefined) return;
    this.pool.timers.clearTimeout(this.phaseTimer);
    this.phaseTimer = undefined;
  }

  /** An exchange takes the socket: the idle deadline stops counting (its timer, if pending, finds it busy). */
  private stopIdle(): void {
    this.idleSince = undefined;
  }

  private clearIdleTimer(): void {
    if (this.idleTimer === undefined) return;
    this.pool.timers.clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  private phaseTimedOut(): void {
    this.phaseTimer = undefined;
    const ms = this.armed;
    if (ms === 0) return;
    const now = this.pool.timers.now();
    const quiet = now - this.lastActivity;
    if (quiet < ms) {
      // Activity since the timer was set: the deadline is that much later.
      this.setPhaseTimer(now, ms - quiet);
      return;
    }
    this.armed = 0;
    const ex = this.exchange;
    if (ex === undefined) return;
    const body = this.parser.headDone;
    ex.fail(new BoundaryError('UPSTREAM_TIMEOUT', body ? `upstream response body stalled for ${ms} ms` : `upstream sent no response head in ${ms} ms`));
  }

  /** Fires keepAliveTimeoutMs after the last release, unless a request took the socket since. */
  private idleTimedOut(): void {
    this.idleTimer = undefined;
    const since = this.idleSince;
    if (since === undefined || this.exchange !== undefined) return;
    const idle = this.pool.timers.now() - since;
    const keepAlive = this.pool.timeouts.keepAliveTimeoutMs;
    if (idle < keepAlive) {
      this.idleTimer = this.pool.timers.setTimeout(this.onIdleTimeout, keepAlive - idle);
      return;
    }
    this.destroy();
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
