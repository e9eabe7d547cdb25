// One client connection of boundary's HTTP/1.1 server: node's llhttp in strict mode (as node:http configures it)
// reads the requests, answers leave strictly in request order, the head and request deadlines are read by the
// server's sweep, and CONNECT and Upgrade hand the socket (and the bytes after the head) to their handler.

import type { Socket } from 'node:net';
import { tokenEqualsLower } from './grammar.js';
import type { H1ServerHandlers, H1ServerSettings } from './h1-server.js';
import { discardParser, feedSocket, type LlhttpParser, METHODS, ON, requestParser, type SocketFeed } from './server-parser.js';
import { type BodyFlow, type Peer, ServerRequest } from './server-request.js';
import { PENDING_HIGH_WATER_BYTES, type AnswerOwner, ServerResponse } from './server-response.js';

/** An `Expect` node:http answers with 100 Continue (any other value gets a 417). */
const CONTINUE_EXPECTATION = /(?:^|\W)100-continue(?:$|\W)/i;

/** A parse error, a socket error or a timeout, as node:http named them (`code`, llhttp's `reason`). */
export type ClientError = Error & { code?: string; reason?: string };

export class ServerConnection implements BodyFlow, AnswerOwner {
  readonly socket: Socket;
  readonly keepAliveTimeoutMs: number;
  private readonly settings: H1ServerSettings;
  private readonly handlers: H1ServerHandlers;
  private readonly onGone: (conn: ServerConnection) => void;
  private parser: LlhttpParser | undefined;
  private readonly feed: SocketFeed;
  /** Answers in request order; the first one is attached to the socket. */
  private readonly answers: ServerResponse[] = [];
  private readonly requests: ServerRequest[] = [];
  /** The request whose body the parser is reading. */
  private current: ServerRequest | undefined = undefined;
  private upgrade: ServerRequest | undefined = undefined;
  private partial: string[] = [];
  private partialUrl = '';
  /** When the message being read began (timers.now(); the connection's start for its first), -1 between messages. */
  messageStart = -1;
  headersDone = false;
  /** When the last answer went out with nothing more owed or being read (timers.now()), -1 otherwise. */
  idleSince = -1;
  /** A parse error, a socket error or a timeout ended the reading: nothing more is parsed or reported. */
  private stopped = false;
  private bodyPaused = false;
  private floodPaused = false;
  /** The client's address and port once node knew them: read through the socket's getters once, not per request. */
  private known: Peer | undefined = undefined;
  private readonly onEnd = (): void => this.ended();
  private readonly onError = (err: Error): void => this.failed(err as ClientError);
  private readonly onClose = (): void => this.closed();
  private readonly onDrain = (): void => this.answers[0]?.drained();

  constructor(socket: Socket, settings: H1ServerSettings, handlers: H1ServerHandlers, onGone: (conn: ServerConnection) => void) {
    this.socket = socket;
    this.settings = settings;
    this.keepAliveTimeoutMs = settings.keepAliveTimeoutMs;
    this.handlers = handlers;
    this.onGone = onGone;
    const parser = requestParser(settings.maxHeadBytes);
    parser[ON.kOnMessageBegin] = () => this.messageBegin();
    parser[ON.kOnHeaders] = (headers: string[], url: string) => this.headers(headers, url);
    parser[ON.kOnHeadersComplete] = (major: number, minor: number, headers: string[] | undefined, method: number, url: string | undefined, _s: unknown, _m: unknown, upgrade: boolean, keepAlive: boolean) =>
      this.headersComplete(major, minor, headers ?? this.partial, method, url ?? this.partialUrl, upgrade, keepAlive);
    parser[ON.kOnBody] = (chunk: Buffer) => this.current?.push(chunk);
    parser[ON.kOnMessageComplete] = () => this.messageComplete();
    this.parser = parser;
    // As under node:http, the head deadline runs from the start: a connection that never sends a head is refused too.
    this.messageStart = settings.timers.now();
    this.feed = feedSocket(socket, parser, (ret, data) => this.executed(ret, data));
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    socket.on('drain', this.onDrain);
  }

  /** No message is being read and no answer is owed: closing it now loses nothing. */
  idle(): boolean {
    return this.messageStart < 0 && this.answers.length === 0;
  }

  /** A request before the refused bytes is still being answered. */
  inFlight(): boolean {
    return this.answers.length > 0;
  }

  /** The answer in flight goes out whole, then the connection closes (a parse error behind it). */
  closeAfterAnswer(): void {
    this.answers[0]?.closeAfter();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private peer(): Peer {
    if (this.known !== undefined) return this.known;
    const peer = { remoteAddress: this.socket.remoteAddress, remotePort: this.socket.remotePort };
    if (peer.remoteAddress !== undefined) this.known = peer;
    return peer;
  }

  /** The head or request deadline passed (the server's sweep): refused as node:http's ERR_HTTP_REQUEST_TIMEOUT. */
  timedOut(): void {
    this.messageStart = -1;
    this.failed(Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }));
  }

  pauseBody(): void {
    this.bodyPaused = true;
    this.feed.pause();
  }

  resumeBody(): void {
    this.bodyPaused = false;
    if (!this.floodPaused && this.parser !== undefined) this.feed.resume();
  }

  answered(res: ServerResponse): void {
    if (this.answers[0] !== res) return;
    this.answers.shift();
    res.detach();
    const req = this.requests.shift();
    // As node:http: a body nobody read is read and dropped, so the next request can be parsed.
    if (req !== undefined && !req.complete) req.discard();
    if (res.last) {
      if (res.closeWith !== undefined) res.closeWith(this.socket);
      else this.socket.destroySoon();
      return;
    }
    const next = this.answers[0];
    if (next !== undefined) next.attach();
    else if (this.messageStart < 0) this.idleSince = this.settings.timers.now();
    if (this.floodPaused && !this.flooded()) {
      this.floodPaused = false;
      if (!this.bodyPaused && this.parser !== undefined) this.feed.resume();
    }
  }

  private messageBegin(): void {
    this.idleSince = -1;
    this.messageStart = this.settings.timers.now();
    this.headersDone = false;
  }

  private headers(headers: string[], url: string): void {
    // After the head, fields are the chunked body's trailers.
    if (this.current !== undefined) {
      for (const h of headers) this.current.rawTrailers.push(h);
      return;
    }
    for (const h of headers) this.partial.push(h);
    this.partialUrl += url;
  }

  private headersComplete(major: number, minor: number, raw: string[], method: number, url: string, upgrade: boolean, keepAlive: boolean): number {
    this.headersDone = true;
    this.partial = [];
    this.partialUrl = '';
    const req = new ServerRequest(this, this.socket, this.peer(), METHODS[method] ?? 'UNKNOWN', url, major, minor, raw);
    if (upgrade) {
      // CONNECT and Upgrade: no body is read here; the bytes after the head go to the handler (2: skip the body).
      this.upgrade = req;
      return 2;
    }
    this.current = req;
    const res = new ServerResponse(this, req.method, major, minor, keepAlive, major === 1 && minor === 0 ? (req.headers.te as string | undefined) : undefined);
    this.requests.push(req);
    this.answers.push(res);
    if (this.answers.length === 1) res.attach();
    else if (!this.floodPaused && this.flooded()) {
      // Pipelined requests stop being read while their answers wait unsent (node:http does the same).
      this.floodPaused = true;
      this.feed.pause();
    }
    if (major === 1 && minor === 1) {
      let host = false;
      let expect: string | undefined;
      for (let i = 0; i < raw.length; i += 2) {
        const name = raw[i] as string;
        // llhttp (strict) lets only tokens through as names: a case-folding compare is exact, and makes no copy.
        if (tokenEqualsLower(name, 'host')) host = true;
        else if (expect === undefined && tokenEqualsLower(name, 'expect')) expect = raw[i + 1];
      }
      if (!host) {
        res.writeHead(400, ['Connection', 'close']).end();
        return 0;
      }
      if (expect !== undefined) {
        if (CONTINUE_EXPECTATION.test(expect)) this.handlers.request(req, res, true);
        else res.writeHead(417, []).end();
        return 0;
      }
    }
    this.handlers.request(req, res, false);
    return 0;
  }

  private messageComplete(): void {
    this.messageStart = -1;
    if (this.answers.length === 0) this.idleSince = this.settings.timers.now();
    const req = this.current;
    this.current = undefined;
    req?.end();
  }

  private flooded(): boolean {
    if (this.socket.writableNeedDrain) return true;
    let bytes = 0;
    for (let i = 1; i < this.answers.length; i++) bytes += (this.answers[i] as ServerResponse).pendingBytes;
    return bytes >= PENDING_HIGH_WATER_BYTES;
  }

  private executed(ret: number | Error, data: () => Buffer): void {
    if (this.parser === undefined || this.stopped) return;
    if (ret instanceof Error) {
      this.failed(ret as ClientError);
      return;
    }
    const req = this.upgrade;
    if (req !== undefined) this.handOver(req, data().subarray(ret));
  }

  /** CONNECT or Upgrade: from here the socket is the handler's. */
  private handOver(req: ServerRequest, head: Buffer): void {
    this.upgrade = undefined;
    this.messageStart = -1;
    this.detach();
    req.complete = true;
    (this.socket as { readableFlowing: boolean | null }).readableFlowing = null;
    if (req.method === 'CONNECT') this.handlers.connect(req, this.socket, head);
    else this.handlers.upgrade(req, this.socket, head);
  }

  private detach(): void {
    const socket = this.socket;
    this.feed.stop();
    socket.removeListener('end', this.onEnd);
    socket.removeListener('error', this.onError);
    socket.removeListener('close', this.onClose);
    socket.removeListener('drain', this.onDrain);
    this.release();
  }

  private release(): void {
    const parser = this.parser;
    this.parser = undefined;
    if (parser !== undefined) discardParser(parser);
    this.onGone(this);
  }

  /** The client's FIN: what it sent must end a message; an answer owed still goes out (half-open), then the close. */
  private ended(): void {
    const parser = this.parser;
    if (parser === undefined || this.stopped) return;
    const ret = parser.finish();
    if (ret instanceof Error) {
      this.failed(ret as ClientError);
      return;
    }
    const last = this.answers[this.answers.length - 1];
    if (last !== undefined) last.closeAfter();
    else if (this.socket.writable) this.socket.end();
  }

  /** A parse error, a socket error or a timeout: nothing more is read; the server's handler answers or closes. */
  private failed(err: ClientError): void {
    this.feed.stop();
    this.socket.removeListener('error', this.onError);
    this.socket.on('error', () => {});
    if (this.parser === undefined || this.stopped) return;
    this.stopped = true;
    this.messageStart = -1;
    // Nothing more of the message being read will come: its reader (the upstream exchange sending the body on, a
    // stage reading it) must stop now, or the answer it owes waits for bytes that never arrive.
    this.current?.abort(err);
    this.handlers.clientError(err, this.socket, this);
  }

  private closed(): void {
    if (this.parser !== undefined) {
      // The socket's handle lets go of the parser it fed (node:http unconsumes on close too).
      this.feed.stop();
      this.release();
    }
    this.messageStart = -1;
    this.current?.abort();
    for (const req of this.requests) req.abort();
    for (const res of this.answers) {
      res.detach();
      res.emit('close');
    }
    this.answers.length = 0;
    this.requests.length = 0;
  }
}
