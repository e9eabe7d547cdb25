// Incremental, strict HTTP/1.1 response parser: bytes in; the final head, body slices and end out. Pure: no
// sockets, no timers. Stricter than RFC 9112 wherever a lenient reading could let boundary and the upstream
// disagree on where a response ends (the next response on a kept-alive socket would then be someone else's).

import { BoundaryError } from '../errors.js';
import { tokenEqualsLower, isDigits, TCHAR } from './h1-request.js';

/** Status line plus header lines of one response (interim 1xx heads count separately). */
export const MAX_RESPONSE_HEAD_BYTES = 65_536;
export const MAX_RESPONSE_HEADERS = 256;
/** 1xx answers skipped before the final one; more is an upstream stalling with interim heads. */
export const MAX_INTERIM_RESPONSES = 16;
/** Content-Length digits: 15 keeps the value a safe integer. */
export const MAX_RESPONSE_CONTENT_LENGTH_DIGITS = 15;
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

function protocolError(message: string): BoundaryError {
  return new BoundaryError('UPSTREAM_PROTOCOL_ERROR', message);
}

// The head is checked on its bytes, which V8 reads about twice as fast as a string's chars; strings are cut
// from one latin1 copy of the head only for names and values that go to the sink.

/** `d` is a byte minus 0x30. */
function isDigit(d: number): boolean {
  return d >= 0 && d <= 9;
}

/** Index of the first byte of `data` in [from, to) that is not a tchar, else `to`. */
function tokenBytesEnd(data: Buffer, from: number, to: number): number {
  for (let i = from; i < to; i++) if (TCHAR[data[i] as number] === 0) return i;
  return to;
}

/** Index of the first byte in [from, to) that a field value may not hold (as BAD_VALUE in h1-request.ts), else `to`. */
function valueBytesEnd(data: Buffer, from: number, to: number): number {
  for (let i = from; i < to; i++) {
    const c = data[i] as number;
    if (c < 0x20 ? c !== 0x09 : c === 0x7f) return i;
  }
  return to;
}

/** `data[at, at + ascii.length)` equals `ascii`, case included. */
function bytesEqual(data: Buffer, at: number, ascii: string): boolean {
  for (let i = 0; i < ascii.length; i++) if (data[at + i] !== ascii.charCodeAt(i)) return false;
  return true;
}

/** `data[at, at + lower.length)` equals `lower` ignoring ASCII case, as tokenEqualsLower does for a string. */
function bytesEqualLower(data: Buffer, at: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) if (((data[at + i] as number) | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/** OWS (SP / HTAB) trimmed on both ends; String.trim() would also eat obs-text such as 0xA0. */
function trimOws(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && isOws(value.charCodeAt(start))) start++;
  while (end > start && isOws(value.charCodeAt(end - 1))) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

/** Checks one `name: value` trailer line, `data[from, to)` (no CRLF). Leading SP/HTAB (obs-fold) is no token. */
function isFieldLine(data: Buffer, from: number, to: number): boolean {
  const colon = tokenBytesEnd(data, from, to);
  return colon > from && data[colon] === 0x3a && valueBytesEnd(data, colon + 1, to) === to;
}

/** Where the comma-list element starting at `start` ends: the next comma, or the end of `value`. */
function elementEnd(value: string, start: number): number {
  const comma = value.indexOf(',', start);
  return comma < 0 ? value.length : comma;
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
   * The head is `data[0, n)`, without its final CRLF CRLF; readHead has made sure every LF in it follows a CR,
   * found the status line's end and counted the header lines. One pass, no split, RegExp or lower-cased copy.
   */
  private parseHead(data: Buffer, n: number, lineEnd: number, headerLines: number): BoundaryError | undefined {
    if (lineEnd < 12 || !bytesEqual(data, 0, 'HTTP/1.') || (data[7] !== 0x31 && data[7] !== 0x30) || data[8] !== 0x20) {
      return protocolError('malformed status line');
    }
    const http11 = data[7] === 0x31;
    const d0 = (data[9] as number) - 0x30;
    const d1 = (data[10] as number) - 0x30;
    const d2 = (data[11] as number) - 0x30;
    if (!(isDigit(d0) && isDigit(d1) && isDigit(d2)) || (lineEnd > 12 && data[12] !== 0x20)) return protocolError('malformed status line');
    const status = d0 * 100 + d1 * 10 + d2;
    if (status < 100 || status > 599) return protocolError('status code out of range');
    if (lineEnd > 13 && valueBytesEnd(data, 13, lineEnd) !== lineEnd) return protocolError('control character in the reason phrase');
    if (headerLines > MAX_RESPONSE_HEADERS) return protocolError(`more than ${MAX_RESPONSE_HEADERS} response headers`);
    const text = headerLines === 0 ? '' : data.toString('latin1', 0, n);
    const headers: string[] = new Array(headerLines * 2);
    let contentLength: string | undefined;
    let codings = 0;
    let chunked = false;
    let close = false;
    let at = lineEnd + 2;
    for (let i = 1; i <= headerLines; i++) {
      // A line starting with SP/HTAB is obs-fold; whitespace before the colon fails the token check too.
      const colon = tokenBytesEnd(data, at, n);
      if (colon === at || data[colon] !== 0x3a) return protocolError(`malformed response header line ${i}`);
      let start = colon + 1;
      while (start < n && isOws(data[start] as number)) start++;
      // The first byte a value may not hold ends the line: its CRLF (or the end of the head), else an error.
      const stop = valueBytesEnd(data, start, n);
      if (stop < n && (data[stop] !== 0x0d || data[stop + 1] !== 0x0a)) return protocolError(`malformed response header line ${i}`);
      let last = stop;
      while (last > start && isOws(data[last - 1] as number)) last--;
      const name = text.slice(at, colon);
      const value = text.slice(start, last);
      headers[(i - 1) * 2] = name;
      headers[(i - 1) * 2 + 1] = value;
      const length = colon - at;
      if (length === 14 && bytesEqualLower(data, at, 'content-length')) {
        for (let e = 0; ; ) {
          const next = elementEnd(value, e);
          const element = trimOws(value.slice(e, next));
          if (!isDigits(element, MAX_RESPONSE_CONTENT_LENGTH_DIGITS)) return protocolError('invalid Content-Length');
          if (contentLength !== undefined && contentLength !== element) return protocolError('conflicting Content-Length values');
          contentLength = element;
          if (next === value.length) break;
          e = next + 1;
        }
      } else if (length === 17 && bytesEqualLower(data, at, 'transfer-encoding')) {
        for (let e = 0; ; ) {
          const next = elementEnd(value, e);
          if (codings++ === 0) chunked = tokenEqualsLower(trimOws(value.slice(e, next)), 'chunked');
          if (next === value.length) break;
          e = next + 1;
        }
      } else if (length === 10 && bytesEqualLower(data, at, 'connection')) {
        for (let e = 0; ; ) {
          const next = elementEnd(value, e);
          if (tokenEqualsLower(trimOws(value.slice(e, next)), 'close')) close = true;
          if (next === value.length) break;
          e = next + 1;
        }
      }
      at = stop + 2;
    }
    if (status < 200) {
      // An upgrade is never requested through this client, so a 101 cannot be a valid answer.
      if (status === 101) return protocolError('101 Switching Protocols to a request that asked for no upgrade');
      if (++this.interim > MAX_INTERIM_RESPONSES) return protocolError(`more than ${MAX_INTERIM_RESPONSES} interim responses`);
      return undefined;
    }
    if (codings > 0) {
      if (codings !== 1 || !chunked) return protocolError('Transfer-Encoding other than exactly chunked');
      if (contentLength !== undefined) return protocolError('Transfer-Encoding together with Content-Length');
    }
    // HTTP/1.0 keep-alive is opt-in and rare upstream: never reused, which also covers TE on 1.0 (RFC 9112 §6.1).
    this.keepAlive = http11 && !close;
    this.sink.onHead(status, headers);
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
