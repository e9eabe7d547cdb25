// One exchange of the HTTP/1.1 client: a request from queued to finished, its head and body written (a
// streamed body with backpressure, exactly its declared length, else chunked), and the response handed to
// its handler after each read. Never owns the socket: h1-connection.ts does, and decides reuse.

import type { Socket } from 'node:net';
import type { H1Exchange, H1Handler } from './h1-client.js';
import type { Conn, ConnectionPool } from './h1-connection.js';
import { type H1Request, invalid, type Serialised } from './h1-request.js';

/** Safe to send twice (RFC 9110 §9.2.2) when a reused socket turned out stale. */
const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

export const QUEUED = 0;
export const CONNECTING = 1;
export const ACTIVE = 2;
const FINISHED = 3;

/** One request and its response, from queued to finished; the connection it runs on is `conn`. */
export class Exchange implements H1Exchange {
  readonly pool: ConnectionPool;
  readonly handler: H1Handler;
  readonly method: string;
  readonly head: string;
  readonly body: Buffer | AsyncIterable<Uint8Array> | null;
  readonly length: number;
  state = QUEUED;
  conn: Conn | undefined = undefined;
  retried = false;
  sent = false;
  bodyDone = false;
  failed = false;
  /** Set while the parser runs; delivered to the handler after each read. */
  status = 0;
  headers: string[] | undefined = undefined;
  delivered = false;
  ended = false;
  early: Buffer | Buffer[] | undefined = undefined;

  constructor(pool: ConnectionPool, req: H1Request, handler: H1Handler, serialised: Serialised) {
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
    if (this.state === ACTIVE) this.conn?.feed.pause();
  }

  resume(): void {
    if (this.state === ACTIVE) this.conn?.feed.resume();
  }

  /** Retrying is safe only if nothing of a streamed body was consumed and the method is idempotent. */
  get retryable(): boolean {
    return !this.retried && (this.body === null || Buffer.isBuffer(this.body)) && IDEMPOTENT.has(this.method);
  }

  write(conn: Conn): void {
    const socket = conn.socket;
    const body = this.body;
    this.sent = true;
    if (body === null || Buffer.isBuffer(body)) {
      // A head alone goes straight to the socket; corking it would only queue it to be flushed a call later.
      if (body === null || body.length === 0) socket.write(this.head, 'latin1');
      else {
        socket.cork();
        socket.write(this.head, 'latin1');
        socket.write(body);
        socket.uncork();
      }
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
      conn.touch();
      if (!ok && ex.conn === conn) {
        await drained(socket);
        if (ex.conn === conn) conn.touch();
      }
    }
    if (ex.conn !== conn) return;
    if (chunked) socket.write('0\r\n\r\n', 'latin1');
    else if (sent !== ex.length) throw invalid('request body is shorter than its Content-Length');
    ex.bodyDone = true;
  } catch (err) {
    if (ex.conn === conn) ex.fail(err instanceof Error ? err : new Error(String(err)));
  }
}
