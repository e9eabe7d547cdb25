// One request read by boundary's HTTP/1.1 server (server-connection.ts): its head as llhttp gave it (a chain
// WireRequest: version, target, the raw field list as received, the fields by name as node:http builds them) and
// its body as an AsyncIterable with backpressure on the client connection.

import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';

/** Body bytes buffered ahead of the reader before the connection stops reading (node's readable default). */
export const BODY_HIGH_WATER_BYTES = 16_384;

/** The client's end of the connection, as node's socket getters give it. */
export interface Peer {
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
}

/** What the request tells its connection: stop reading, read on. */
export interface BodyFlow {
  pauseBody(): void;
  resumeBody(): void;
}

// Fields node:http keeps once (a repeat is dropped), with joinDuplicateHeaders off; set-cookie is a list, cookie
// joins with '; ', every other repeat joins with ', '.
const FIRST_ONLY = new Set([
  'content-type', 'content-length', 'user-agent', 'referer', 'host', 'authorization', 'proxy-authorization',
  'if-modified-since', 'if-unmodified-since', 'from', 'location', 'max-forwards', 'retry-after', 'etag',
  'last-modified', 'server', 'age', 'expires',
]);

/** The fields by lower-cased name, as node:http's IncomingMessage.headers reads the same list. */
export function headersByName(raw: readonly string[]): IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const value = raw[i + 1] as string;
    // Own fields only: a field named like an Object.prototype member (`constructor`) starts fresh, as in node:http.
    const had = Object.hasOwn(out, name) ? out[name] : undefined;
    if (had === undefined) out[name] = name === 'set-cookie' ? [value] : value;
    else if (name === 'set-cookie') (had as string[]).push(value);
    else if (!FIRST_ONLY.has(name)) out[name] = `${had as string}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  return out;
}

const CLOSED = (): Error => Object.assign(new Error('connection closed'), { code: 'ECONNRESET' });
/** What a read of a body cut short rejects with, as node:http's request errors when its connection goes. */
const ABORTED = (cause: Error): Error => Object.assign(new Error('aborted', { cause }), { code: 'ECONNRESET' });

export class ServerRequest implements AsyncIterable<Buffer> {
  readonly method: string;
  readonly url: string;
  readonly httpVersion: string;
  readonly httpVersionMajor: number;
  readonly httpVersionMinor: number;
  /** Flat `[name, value, ...]` as received; never joined, never capped (http1/framing.ts counts them). */
  readonly rawHeaders: string[];
  rawTrailers: string[] = [];
  readonly socket: Socket;
  /** The client's address and port, read once per connection (server-connection.ts). */
  readonly peer: Peer;
  /** The whole message (body included) has been read off the wire. */
  complete = false;
  /** The rest of the body is read and dropped (the answer went out without it). */
  discarded = false;
  /** Why the body ended before the message did, once it has. */
  cutShortBy: Error | undefined = undefined;
  private byName: IncomingHttpHeaders | undefined = undefined;
  private readonly chunks: Buffer[] = [];
  private buffered = 0;
  private paused = false;
  private wake: (() => void) | undefined = undefined;
  private readonly flow: BodyFlow;

  constructor(flow: BodyFlow, socket: Socket, peer: Peer, method: string, url: string, major: number, minor: number, rawHeaders: string[]) {
    this.flow = flow;
    this.socket = socket;
    this.peer = peer;
    this.method = method;
    this.url = url;
    this.httpVersionMajor = major;
    this.httpVersionMinor = minor;
    this.httpVersion = `${major}.${minor}`;
    this.rawHeaders = rawHeaders;
  }

  get headers(): IncomingHttpHeaders {
    this.byName ??= headersByName(this.rawHeaders);
    return this.byName;
  }

  /** Body bytes from the parser. */
  push(chunk: Buffer): void {
    if (this.discarded) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    if (this.buffered >= BODY_HIGH_WATER_BYTES && !this.paused) {
      this.paused = true;
      this.flow.pauseBody();
    }
    this.notify();
  }

  /** The parser read the whole message. */
  end(): void {
    this.complete = true;
    this.notify();
  }

  /** The body ended before the message did: the connection closed, or `cause` (a parse error, the request deadline, the
   *  client's FIN) stopped its reading. */
  abort(cause?: Error): void {
    if (this.complete || this.cutShortBy !== undefined) return;
    this.cutShortBy = cause ?? CLOSED();
    this.notify();
  }

  /** Reads what is left of the body and drops it (an answer went out before it was read). */
  discard(): void {
    if (this.discarded) return;
    this.discarded = true;
    this.chunks.length = 0;
    this.buffered = 0;
    if (this.paused) {
      this.paused = false;
      this.flow.resumeBody();
    }
  }

  private notify(): void {
    const wake = this.wake;
    if (wake === undefined) return;
    this.wake = undefined;
    wake();
  }

  private next(): Promise<IteratorResult<Buffer>> {
    const chunk = this.chunks.shift();
    if (chunk !== undefined) {
      this.buffered -= chunk.length;
      if (this.paused && this.buffered < BODY_HIGH_WATER_BYTES) {
        this.paused = false;
        this.flow.resumeBody();
      }
      return Promise.resolve({ value: chunk, done: false });
    }
    if (this.cutShortBy !== undefined) return Promise.reject(ABORTED(this.cutShortBy));
    if (this.complete || this.discarded) return Promise.resolve({ value: undefined, done: true });
    return new Promise<void>((resolve) => {
      this.wake = resolve;
    }).then(() => this.next());
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: () => this.next(),
      // The reader stopped before the end (a break, a throw): as under node:http the rest is read and dropped, and
      // the connection stays up for the answer.
      return: () => {
        this.discard();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
