// The answer to one request read by boundary's HTTP/1.1 server: head (server-head.ts), body writes with
// backpressure ('drain'), chunked or not, and 100 Continue. Answers leave in request order: one whose turn has not
// come is buffered until the connection attaches it. Emits 'drain', and 'close' when the connection closes before it is
// all written.

import type { Socket } from 'node:net';
import { type HeaderInput, renderHead, TE_CHUNKED } from './server-head.js';

/** Bytes an answer may buffer before its turn while write() still says go on (node's writable default). */
export const PENDING_HIGH_WATER_BYTES = 16_384;

const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
const LAST_CHUNK = '0\r\n\r\n';

/** What an answer needs of its connection. */
export interface AnswerOwner {
  readonly socket: Socket;
  readonly keepAliveTimeoutMs: number;
  /** The answer's last bytes are written to the socket. */
  answered(res: ServerResponse): void;
  destroy(): void;
}

type AnswerEvent = 'close' | 'drain';
/** `listener`: what once() was given, so removeListener finds it by that function too. */
type Listener = (() => void) & { listener?: () => void };

/**
 * The answer to one request. Its two events ('close', 'drain') are kept in two lists of its own, with on, once,
 * removeListener and emit as EventEmitter has them: an EventEmitter per request was a measurable part of a
 * forwarded request's CPU (docs/benchmarks.md#forward-http-cpu).
 */
export class ServerResponse {
  private readonly owner: AnswerOwner;
  private closeListeners: Listener[] | undefined = undefined;
  private drainListeners: Listener[] | undefined = undefined;
  private readonly head: boolean;
  private readonly chunkedAllowed: boolean;
  private keepAlive: boolean;
  /** Its turn came: writes go to the socket, not to `pending`. */
  private attached = false;
  /** What was written before its turn came (made only then: most answers are attached from the start). */
  private pending: (string | Buffer)[] | undefined = undefined;
  pendingBytes = 0;
  private headText: string | undefined = undefined;
  private chunked = false;
  private hasBody = true;
  private needDrain = false;
  headersSent = false;
  /** end() was called. */
  finished = false;
  /** The connection closes once this answer is out. */
  last = false;
  /** Closes the connection after this answer instead of ending it at once (a lingering close); set by the adapter. */
  closeWith: ((socket: Socket) => void) | undefined = undefined;

  constructor(owner: AnswerOwner, method: string, major: number, minor: number, keepAlive: boolean, te: string | undefined) {
    this.owner = owner;
    this.head = method === 'HEAD';
    const v11 = major > 1 || (major === 1 && minor >= 1);
    this.chunkedAllowed = v11 || (te !== undefined && TE_CHUNKED.test(te));
    this.keepAlive = keepAlive;
  }

  on(event: AnswerEvent, listener: () => void): this {
    if (event === 'close') {
      if (this.closeListeners === undefined) this.closeListeners = [listener];
      else this.closeListeners.push(listener);
    } else if (this.drainListeners === undefined) this.drainListeners = [listener];
    else this.drainListeners.push(listener);
    return this;
  }

  once(event: AnswerEvent, listener: () => void): this {
    const once: Listener = () => {
      this.removeListener(event, once);
      listener();
    };
    once.listener = listener;
    return this.on(event, once);
  }

  /** Removes the listener added last that is `listener` (or was given to once() as it). */
  removeListener(event: AnswerEvent, listener: () => void): this {
    const list = event === 'close' ? this.closeListeners : this.drainListeners;
    if (list === undefined) return this;
    for (let i = list.length - 1; i >= 0; i--) {
      const l = list[i] as Listener;
      if (l === listener || l.listener === listener) {
        list.splice(i, 1);
        break;
      }
    }
    return this;
  }

  /** Calls the listeners present when it is called, in the order added. */
  emit(event: AnswerEvent): boolean {
    const list = event === 'close' ? this.closeListeners : this.drainListeners;
    if (list === undefined || list.length === 0) return false;
    if (list.length === 1) (list[0] as Listener)();
    else for (const l of [...list]) l();
    return true;
  }

  /** The client connection while this answer is being written; undefined before its turn and after. */
  get socket(): Socket | undefined {
    return this.attached ? this.owner.socket : undefined;
  }

  /** The connection must close after this answer (a parse error behind it, the client's FIN). */
  closeAfter(): void {
    this.keepAlive = false;
    if (this.headersSent) this.last = true;
  }

  writeContinue(): void {
    this.out(CONTINUE, false);
  }

  /** Throws (InvalidHeadError) before anything is written for a field node:http would refuse. */
  writeHead(status: number, headers: HeaderInput, reason?: string, knownLength?: number): this {
    if (this.headersSent) throw Object.assign(new Error('headers already sent'), { code: 'ERR_HTTP_HEADERS_SENT' });
    this.hasBody = !this.head && status !== 204 && status !== 304 && status >= 200;
    const h = renderHead(status, headers, reason, { hasBody: this.hasBody, chunkedAllowed: this.chunkedAllowed, keepAlive: this.keepAlive, knownLength, keepAliveTimeoutMs: this.owner.keepAliveTimeoutMs });
    this.headersSent = true;
    this.headText = h.text;
    this.chunked = h.chunked;
    this.last = h.last;
    return this;
  }

  /** Strings are UTF-8 body text; the head and the chunk framing are the only latin1 strings written. */
  write(data: Buffer | string): boolean {
    const chunk = typeof data === 'string' ? Buffer.from(data) : data;
    if (!this.headersSent) this.writeHead(200, []);
    if (!this.hasBody || chunk.length === 0) return this.flushHead();
    if (!this.chunked) return this.out(this.withHead(chunk), false);
    return this.out([this.withHead(`${chunk.length.toString(16)}\r\n`), chunk, '\r\n'], false);
  }

  end(data?: Buffer | string): this {
    if (this.finished) return this;
    const chunk = typeof data === 'string' ? Buffer.from(data) : data;
    if (!this.headersSent) this.writeHead(200, [], undefined, chunk === undefined ? 0 : chunk.length);
    this.finished = true;
    const body = this.hasBody && chunk !== undefined && chunk.length > 0 ? chunk : undefined;
    if (!this.chunked) this.out(body === undefined ? this.withHead('') : this.withHead(body), true);
    else if (body === undefined) this.out(this.withHead(LAST_CHUNK), true);
    else this.out([this.withHead(`${body.length.toString(16)}\r\n`), body, `\r\n${LAST_CHUNK}`], true);
    return this;
  }

  destroy(): this {
    this.owner.destroy();
    return this;
  }

  /** Its turn came: what it buffered goes out now. */
  attach(): void {
    this.attached = true;
    const parts = this.pending;
    if (parts === undefined || parts.length === 0) return;
    this.pending = undefined;
    this.pendingBytes = 0;
    this.send(parts.length === 1 ? (parts[0] as string | Buffer) : parts, this.finished);
  }

  detach(): void {
    this.attached = false;
  }

  /** The socket drained: a writer waiting on this answer may go on. */
  drained(): void {
    if (!this.needDrain || this.finished) return;
    this.needDrain = false;
    this.emit('drain');
  }

  private flushHead(): boolean {
    return this.headText === undefined ? true : this.out(this.withHead(''), false);
  }

  private withHead(data: string): string;
  private withHead(data: Buffer): Buffer;
  private withHead(data: Buffer | string): Buffer | string {
    const head = this.headText;
    if (head === undefined) return data;
    this.headText = undefined;
    if (typeof data === 'string') return head + data;
    // One buffer for head and body, so they leave in one write (no Buffer made for the head alone).
    const whole = Buffer.allocUnsafe(head.length + data.length);
    whole.write(head, 0, 'latin1');
    whole.set(data, head.length);
    return whole;
  }

  private out(data: string | Buffer | (string | Buffer)[], last: boolean): boolean {
    if (!this.attached) {
      if (this.pending === undefined) this.pending = [];
      const pending = this.pending;
      for (const part of Array.isArray(data) ? data : [data]) {
        pending.push(part);
        this.pendingBytes += part.length;
      }
      return this.pendingBytes < PENDING_HIGH_WATER_BYTES;
    }
    return this.send(data, last);
  }

  private send(data: string | Buffer | (string | Buffer)[], last: boolean): boolean {
    const socket = this.owner.socket;
    if (socket.destroyed) return false;
    let ok: boolean;
    if (!Array.isArray(data)) ok = typeof data === 'string' ? socket.write(data, 'latin1') : socket.write(data);
    else {
      ok = true;
      socket.cork();
      for (const part of data) ok = typeof part === 'string' ? socket.write(part, 'latin1') : socket.write(part);
      socket.uncork();
    }
    if (!ok) this.needDrain = true;
    // The socket keeps the order of writes: the next answer may follow at once, without waiting for this one's flush
    // (a connection that closes after it is ended, which flushes first).
    if (last) this.owner.answered(this);
    return ok;
  }
}
