// The reference for the response parser's differential tests: the RegExp-and-split parser the byte loops of
// src/http1/h1-response.ts replaced, kept verbatim (limits imported). ResponseParser must agree with it on every
// outcome, error messages included (they reach the audit log as the failure detail).

import { BoundaryError } from '../../src/shared/errors.js';
import { MAX_CONTENT_LENGTH_DIGITS } from '../../src/http1/grammar.js';
import {
  MAX_CHUNK_LINE_BYTES,
  MAX_CHUNK_SIZE_DIGITS,
  MAX_INTERIM_RESPONSES,
  MAX_RESPONSE_HEAD_BYTES,
  MAX_TRAILER_BYTES,
  type ResponseSink,
} from '../../src/http1/h1-response.js';
import { MAX_RESPONSE_HEADERS } from '../../src/http1/h1-response-head.js';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const DIGITS = /^[0-9]+$/;

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

function referenceError(message: string): BoundaryError {
  return new BoundaryError('UPSTREAM_PROTOCOL_ERROR', message);
}

/** OWS (SP / HTAB) trimmed on both ends; String.trim() would also eat obs-text such as 0xA0. */
function trimOws(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && (value.charCodeAt(start) === 0x20 || value.charCodeAt(start) === 0x09)) start++;
  while (end > start && (value.charCodeAt(end - 1) === 0x20 || value.charCodeAt(end - 1) === 0x09)) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

/** Checks one `name: value` line; returns the trimmed value, or undefined when the line is malformed. */
function fieldValue(line: string, colon: number): string | undefined {
  // A line starting with SP/HTAB is obs-fold; whitespace before the colon fails the token check.
  if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) return undefined;
  const value = trimOws(line.slice(colon + 1));
  return BAD_VALUE.test(value) ? undefined : value;
}

/** Splits a comma list into OWS-trimmed elements (empty elements kept, so `a,,b` can be refused). */
function listElements(value: string): string[] {
  const parts = value.split(',');
  for (let i = 0; i < parts.length; i++) parts[i] = trimOws(parts[i] ?? '');
  return parts;
}

/**
 * One parser per connection; `start()` before each response. feed() returns an error value (the parser is
 * then failed) or undefined; the sink hears the head, the body and the end. Never throws.
 */
export class ReferenceParser {
  private readonly sink: ResponseSink;
  private state: number = DONE;
  private isHead = false;
  private pending: Buffer | undefined = undefined;
  private scanFrom = 0;
  private interim = 0;
  private remaining = 0;
  private line = '';
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
    this.interim = 0;
    this.remaining = 0;
    this.line = '';
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
          if (buf[off] !== 0x0d) return this.fail(referenceError('chunk data not followed by CRLF'));
          off++;
          this.state = CHUNK_LF;
          break;
        case CHUNK_LF:
          if (buf[off] !== 0x0a) return this.fail(referenceError('chunk data not followed by CRLF'));
          off++;
          this.state = CHUNK_LINE;
          break;
        case DONE:
          this.poisoned = true;
          return this.fail(referenceError('bytes after the end of the response'));
        default:
          return referenceError('the response already failed');
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
    return this.fail(referenceError(this.state === HEAD ? 'upstream closed before a complete response head' : 'upstream closed in the middle of the response body'));
  }

  private fail(err: BoundaryError): BoundaryError {
    this.state = FAILED;
    this.pending = undefined;
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
    for (;;) {
      const lf = data.indexOf(0x0a, from);
      if (lf < 0) break;
      if (lf === 0 || data[lf - 1] !== 0x0d) return referenceError('bare LF in the response head');
      if (lf >= 3 && data[lf - 2] === 0x0a && data[lf - 3] === 0x0d) {
        end = lf + 1;
        break;
      }
      from = lf + 1;
    }
    if (end < 0 ? data.length > MAX_RESPONSE_HEAD_BYTES : end > MAX_RESPONSE_HEAD_BYTES) {
      return referenceError(`response head larger than ${MAX_RESPONSE_HEAD_BYTES} bytes`);
    }
    if (end < 0) {
      // Node hands each read its own Buffer, so keeping a slice of it is safe.
      this.pending = data;
      this.scanFrom = from;
      return buf.length;
    }
    this.pending = undefined;
    this.scanFrom = 0;
    const problem = this.parseHead(data.toString('latin1', 0, end - 4));
    if (problem !== undefined) return problem;
    return off + end - before;
  }

  private parseHead(text: string): BoundaryError | undefined {
    const lines = text.split('\r\n');
    const statusLine = lines[0] ?? '';
    if (!(statusLine.startsWith('HTTP/1.1 ') || statusLine.startsWith('HTTP/1.0 ')) || statusLine.length < 12) {
      return referenceError('malformed status line');
    }
    const http11 = statusLine.charCodeAt(7) === 0x31;
    const code = statusLine.slice(9, 12);
    if (!DIGITS.test(code) || (statusLine.length > 12 && statusLine.charCodeAt(12) !== 0x20)) return referenceError('malformed status line');
    const status = Number(code);
    if (status < 100 || status > 599) return referenceError('status code out of range');
    if (statusLine.length > 13 && BAD_VALUE.test(statusLine.slice(13))) return referenceError('control character in the reason phrase');
    if (lines.length - 1 > MAX_RESPONSE_HEADERS) return referenceError(`more than ${MAX_RESPONSE_HEADERS} response headers`);
    const headers: string[] = new Array((lines.length - 1) * 2);
    let contentLength: string | undefined;
    let codings: string[] | undefined;
    let close = false;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i] ?? '';
      const colon = line.indexOf(':');
      const value = fieldValue(line, colon);
      if (value === undefined) return referenceError(`malformed response header line ${i}`);
      const name = line.slice(0, colon);
      headers[(i - 1) * 2] = name;
      headers[(i - 1) * 2 + 1] = value;
      // Cheap dispatch on length before lower-casing: most headers are none of these.
      if (name.length === 14 && name.toLowerCase() === 'content-length') {
        for (const element of listElements(value)) {
          if (element.length > MAX_CONTENT_LENGTH_DIGITS || !DIGITS.test(element)) return referenceError('invalid Content-Length');
          if (contentLength !== undefined && contentLength !== element) return referenceError('conflicting Content-Length values');
          contentLength = element;
        }
      } else if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') {
        codings ??= [];
        for (const element of listElements(value)) codings.push(element.toLowerCase());
      } else if (name.length === 10 && name.toLowerCase() === 'connection') {
        for (const element of listElements(value)) if (element.toLowerCase() === 'close') close = true;
      }
    }
    if (status < 200) {
      // An upgrade is never requested through this client, so a 101 cannot be a valid answer.
      if (status === 101) return referenceError('101 Switching Protocols to a request that asked for no upgrade');
      if (++this.interim > MAX_INTERIM_RESPONSES) return referenceError(`more than ${MAX_INTERIM_RESPONSES} interim responses`);
      return undefined;
    }
    if (codings !== undefined) {
      if (codings.length !== 1 || codings[0] !== 'chunked') return referenceError('Transfer-Encoding other than exactly chunked');
      if (contentLength !== undefined) return referenceError('Transfer-Encoding together with Content-Length');
    }
    // HTTP/1.0 keep-alive is opt-in and rare upstream: never reused, which also covers TE on 1.0 (RFC 9112 §6.1).
    this.keepAlive = http11 && !close;
    this.sink.onHead(status, headers);
    if (this.isHead || status === 204 || status === 304) this.state = DONE;
    else if (codings !== undefined) this.state = CHUNK_LINE;
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
    this.line += buf.toString('latin1', off, end);
    const trailers = this.state === TRAILERS;
    if (trailers ? this.trailerBytes + this.line.length > MAX_TRAILER_BYTES : this.line.length > MAX_CHUNK_LINE_BYTES) {
      return referenceError(trailers ? `trailers larger than ${MAX_TRAILER_BYTES} bytes` : `chunk-size line longer than ${MAX_CHUNK_LINE_BYTES} bytes`);
    }
    if (lf < 0) return end;
    const line = this.line;
    this.line = '';
    if (line.length < 2 || line.charCodeAt(line.length - 2) !== 0x0d) return referenceError('bare LF in chunked framing');
    const content = line.slice(0, -2);
    if (trailers) {
      this.trailerBytes += line.length;
      if (content.length === 0) this.state = DONE;
      else if (fieldValue(content, content.indexOf(':')) === undefined) return referenceError('malformed trailer line');
      return end;
    }
    const size = chunkSize(content);
    if (size < 0) return referenceError('malformed chunk-size line');
    if (size === 0) this.state = TRAILERS;
    else {
      this.remaining = size;
      this.state = CHUNK_DATA;
    }
    return end;
  }
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/** chunk-size [ BWS ";" chunk-ext ]: the size, or -1. Extensions are bounded by the line limit and dropped. */
function chunkSize(content: string): number {
  let i = 0;
  while (i < content.length && isHex(content.charCodeAt(i))) i++;
  if (i === 0 || i > MAX_CHUNK_SIZE_DIGITS) return -1;
  if (i < content.length) {
    let j = i;
    while (j < content.length && (content.charCodeAt(j) === 0x20 || content.charCodeAt(j) === 0x09)) j++;
    if (content.charCodeAt(j) !== 0x3b || BAD_VALUE.test(content.slice(j + 1))) return -1;
  }
  return Number.parseInt(content.slice(0, i), 16);
}
