// Incremental, strict HTTP/1.1 response parser: bytes in; the final head (read by h1-response-head.ts), body
// slices and end out. Pure: no sockets, no timers. Stricter than RFC 9112 wherever a lenient reading could let
// boundary and the upstream disagree on where a response ends (the next one on a kept-alive socket would be someone else's).

import { BoundaryError } from '../shared/errors.js';
import { isOws, tokenBytesEnd, valueBytesEnd } from './grammar.js';
import { parseResponseHead, protocolError } from './h1-response-head.js';

/** Status line plus header lines of one response (interim 1xx heads count separately). */
export const MAX_RESPONSE_HEAD_BYTES = 65_536;
/** 1xx answers skipped before the final one; more is an upstream stalling with interim heads. */
export const MAX_INTERIM_RESPONSES = 16;
/** Chunk-size hex digits: 12 is 2^48 - 1 bytes, a safe integer. */
export const MAX_CHUNK_SIZE_DIGITS = 12;
/** One chunk-size line including its extensions. */
export const MAX_CHUNK_LINE_BYTES = 4_096;
/** All trailer lines of one chunked body; trailers are checked and dropped. */
export const MAX_TRAILER_BYTES = 16_384;

export interface ResponseSink {
  /** The final (non-1xx) head: status and the raw `[name, value, ...]` list, case, order and duplicates kept. */
  onHead(status: number, headers: string[]): void;
  /** Body bytes, zero-copy slices of the fed buffers. */
  onData(chunk: Buffer): void;
  /** The response is complete; `reusable` tells whether the connection may carry another request. */
  onEnd(): void;
}

const HEAD = 0;
const BODY_LENGTH = 1;
const BODY_CLOSE = 2;
const CHUNK_LINE = 3;
const CHUNK_DATA = 4;
const CHUNK_CR = 5;
const CHUNK_LF = 6;
const TRAILERS = 7;
const DONE = 8;
const FAILED = 9;

/** Checks one `name: value` trailer line, `data[from, to)` (no CRLF). Leading SP/HTAB (obs-fold) is no token. */
function isFieldLine(data: Buffer, from: number, to: number): boolean {
  const colon = tokenBytesEnd(data, from, to);
  return colon > from && data[colon] === 0x3a && valueBytesEnd(data, colon + 1, to) === to;
}

/**
 * One parser per connection; `start()` before each response. feed() returns an error value (the parser is
 * then failed) or undefined; the sink hears the head, the body and the end. Never throws.
 */
export class ResponseParser {
  private readonly sink: ResponseSink;
  private state: number = DONE;
  private isHead = false;
  private pending: Buffer | undefined = undefined;
  private scanFrom = 0;
  /** LFs of the unfinished head seen so far (readHead checks and counts them). */
  private lineBreaks = 0;
  /** Where the first of them is: the status line ends just before it. */
  private firstLf = 0;
  private interim = 0;
  private remaining = 0;
  /** A chunk-size or trailer line that a feed ended in the middle of. */
  private partialLine: Buffer | undefined = undefined;
  private trailerBytes = 0;
  private keepAlive = false;
  private poisoned = false;

  constructor(sink: ResponseSink) {
    this.sink = sink;
  }

  /** Expects a new response to a request with `method` HEAD (no body) or not. */
  start(isHead: boolean): void {
    this.state = HEAD;
    this.isHead = isHead;
    this.pending = undefined;
    this.scanFrom = 0;
    this.lineBreaks = 0;
    this.interim = 0;
    this.remaining = 0;
    this.partialLine = undefined;
    this.trailerBytes = 0;
    this.keepAlive = false;
    this.poisoned = false;
  }

  /** True once the response ended cleanly, keep-alive was agreed and no byte followed it. */
  get reusable(): boolean {
    return this.state === DONE && this.keepAlive && !this.poisoned;
  }

  /** True once the final head was parsed (body bytes or the end may follow). */
  get headDone(): boolean {
    return this.state !== HEAD && this.state !== FAILED;
  }

  get done(): boolean {
    return this.state === DONE;
  }

  feed(buf: Buffer): BoundaryError | undefined {
    let off = 0;
    const length = buf.length;
    while (off < length) {
      switch (this.state) {
        case HEAD: {
          const next = this.readHead(buf, off);
          if (typeof next !== 'number') return this.fail(next);
          off = next;
          if (this.done) return this.ended(buf, off);
          break;
        }
        case BODY_LENGTH: {
          const n = Math.min(this.remaining, length - off);
          this.sink.onData(off === 0 && n === length ? buf : buf.subarray(off, off + n));
          off += n;
          this.remaining -= n;
          if (this.remaining === 0) {
            this.state = DONE;
            return this.ended(buf, off);
          }
          break;
        }
        case BODY_CLOSE:
          this.sink.onData(off === 0 ? buf : buf.subarray(off));
          off = length;
          break;
        case CHUNK_LINE:
        case TRAILERS: {
          const next = this.readLine(buf, off);
          if (typeof next !== 'number') return this.fail(next);
          off = next;
          if (this.done) return this.ended(buf, off);
          break;
        }
        case CHUNK_DATA: {
          const n = Math.min(this.remaining, length - off);
          this.sink.onData(off === 0 && n === length ? buf : buf.subarray(off, off + n));
          off += n;
          this.remaining -= n;
          if (this.remaining === 0) this.state = CHUNK_CR;
          break;
        }
        case CHUNK_CR:
          if (buf[off] !== 0x0d) return this.fail(protocolError('chunk data not followed by CRLF'));
          off++;
          this.state = CHUNK_LF;
          break;
        case CHUNK_LF:
          if (buf[off] !== 0x0a) return this.fail(protocolError('chunk data not followed by CRLF'));
          off++;
          this.state = CHUNK_LINE;
          break;
        case DONE:
          this.poisoned = true;
          return this.fail(protocolError('bytes after the end of the response'));
        default:
          return protocolError('the response already failed');
      }
    }
    return undefined;
  }

  /** The upstream closed its side: ends a close-delimited body, anything else unfinished is an error. */
  eof(): BoundaryError | undefined {
    if (this.state === BODY_CLOSE) {
      this.state = DONE;
      this.sink.onEnd();
      return undefined;
    }
    if (this.state === DONE) return undefined;
    return this.fail(protocolError(this.state === HEAD ? 'upstream closed before a complete response head' : 'upstream closed in the middle of the response body'));
  }

  private fail(err: BoundaryError): BoundaryError {
    this.state = FAILED;
    this.pending = undefined;
    this.partialLine = undefined;
    return err;
  }

  /** The sink's onEnd is the last thing feed() does: it may start the next response on this parser. */
  private ended(buf: Buffer, off: number): undefined {
    if (off < buf.length) this.poisoned = true;
    this.sink.onEnd();
    return undefined;
  }

  /** Returns the offset after the consumed bytes, or an error. */
  private readHead(buf: Buffer, off: number): number | BoundaryError {
    const before = this.pending === undefined ? 0 : this.pending.length;
    const data = this.pending === undefined ? (off === 0 ? buf : buf.subarray(off)) : Buffer.concat([this.pending, buf.subarray(off)]);
    let from = this.scanFrom;
    let end = -1;
    // Every LF is checked as it arrives, so a bare LF fails before the head is complete. Counting the line
    // breaks lets parseHead refuse too many headers before it looks at any of them, as a split would.
    for (;;) {
      const lf = data.indexOf(0x0a, from);
      if (lf < 0) break;
      if (lf === 0 || data[lf - 1] !== 0x0d) return protocolError('bare LF in the response head');
      if (lf >= 3 && data[lf - 2] === 0x0a && data[lf - 3] === 0x0d) {
        end = lf + 1;
        break;
      }
      if (this.lineBreaks++ === 0) this.firstLf = lf;
      from = lf + 1;
    }
    if (end < 0 ? data.length > MAX_RESPONSE_HEAD_BYTES : end > MAX_RESPONSE_HEAD_BYTES) {
      return protocolError(`response head larger than ${MAX_RESPONSE_HEAD_BYTES} bytes`);
    }
    if (end < 0) {
      // Node hands each read its own Buffer, so keeping a slice of it is safe.
      this.pending = data;
      this.scanFrom = from;
      return buf.length;
    }
    this.pending = undefined;
    this.scanFrom = 0;
    // The first LF of the final CRLF CRLF ends the last header line: it opened no new line.
    const headerLines = this.lineBreaks - 1;
    this.lineBreaks = 0;
    const problem = this.parseHead(data, end - 4, this.firstLf - 1, headerLines);
    if (problem !== undefined) return problem;
    return off + end - before;
  }

  /**
   * Acts on a parsed head (h1-response-head.ts): interim heads are skipped and counted, the final one goes to
   * the sink and sets the body framing.
   */
  private parseHead(data: Buffer, n: number, lineEnd: number, headerLines: number): BoundaryError | undefined {
    const head = parseResponseHead(data, n, lineEnd, headerLines);
    if (head instanceof BoundaryError) return head;
    const { status, codings, contentLength } = head;
    if (status < 200) {
      // An upgrade is never requested through this client, so a 101 cannot be a valid answer.
      if (status === 101) return protocolError('101 Switching Protocols to a request that asked for no upgrade');
      if (++this.interim > MAX_INTERIM_RESPONSES) return protocolError(`more than ${MAX_INTERIM_RESPONSES} interim responses`);
      return undefined;
    }
    if (codings > 0) {
      if (codings !== 1 || !head.chunked) return protocolError('Transfer-Encoding other than exactly chunked');
      if (contentLength !== undefined) return protocolError('Transfer-Encoding together with Content-Length');
    }
    // HTTP/1.0 keep-alive is opt-in and rare upstream: never reused, which also covers TE on 1.0 (RFC 9112 §6.1).
    this.keepAlive = head.http11 && !head.close;
    this.sink.onHead(status, head.headers);
    if (this.isHead || status === 204 || status === 304) this.state = DONE;
    else if (codings > 0) this.state = CHUNK_LINE;
    else if (contentLength !== undefined) {
      this.remaining = Number(contentLength);
      this.state = this.remaining === 0 ? DONE : BODY_LENGTH;
    } else {
      this.keepAlive = false;
      this.state = BODY_CLOSE;
    }
    return undefined;
  }

  /** Reads one CRLF-terminated chunk-size or trailer line (possibly across feeds). */
  private readLine(buf: Buffer, off: number): number | BoundaryError {
    const lf = buf.indexOf(0x0a, off);
    const end = lf < 0 ? buf.length : lf + 1;
    const partial = this.partialLine;
    const length = (partial === undefined ? 0 : partial.length) + end - off;
    const trailers = this.state === TRAILERS;
    if (trailers ? this.trailerBytes + length > MAX_TRAILER_BYTES : length > MAX_CHUNK_LINE_BYTES) {
      return protocolError(trailers ? `trailers larger than ${MAX_TRAILER_BYTES} bytes` : `chunk-size line longer than ${MAX_CHUNK_LINE_BYTES} bytes`);
    }
    if (lf < 0) {
      this.partialLine = partial === undefined ? buf.subarray(off) : Buffer.concat([partial, buf.subarray(off)]);
      return end;
    }
    let line = buf;
    let from = off;
    if (partial !== undefined) {
      line = Buffer.concat([partial, buf.subarray(off, end)]);
      from = 0;
      this.partialLine = undefined;
    }
    const stop = from + length - 2;
    if (length < 2 || line[stop] !== 0x0d) return protocolError('bare LF in chunked framing');
    if (trailers) {
      this.trailerBytes += length;
      if (stop === from) this.state = DONE;
      else if (!isFieldLine(line, from, stop)) return protocolError('malformed trailer line');
      return end;
    }
    const size = chunkSize(line, from, stop);
    if (size < 0) return protocolError('malformed chunk-size line');
    if (size === 0) this.state = TRAILERS;
    else {
      this.remaining = size;
      this.state = CHUNK_DATA;
    }
    return end;
  }
}

/** The value of one hex digit byte, or -1. */
function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
}

/** `data[from, to)` is chunk-size [ BWS ";" chunk-ext ]: the size, or -1. Extensions are bounded by the line limit and dropped. */
function chunkSize(data: Buffer, from: number, to: number): number {
  let i = from;
  let size = 0;
  for (; i < to; i++) {
    const digit = hexDigit(data[i] as number);
    if (digit < 0) break;
    size = size * 16 + digit;
  }
  if (i === from || i - from > MAX_CHUNK_SIZE_DIGITS) return -1;
  if (i < to) {
    let j = i;
    while (j < to && isOws(data[j] as number)) j++;
    if (data[j] !== 0x3b || valueBytesEnd(data, j + 1, to) !== to) return -1;
  }
  return size;
}
