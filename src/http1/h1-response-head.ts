// The head of one HTTP/1.1 response: the status line and header fields, checked on their bytes in one pass,
// and the framing they declare (Content-Length, Transfer-Encoding, Connection: close). Pure; h1-response.ts
// finds where the head ends and acts on what it declares.

import { BoundaryError } from '../shared/errors.js';
import { isDigits, isOws, MAX_CONTENT_LENGTH_DIGITS, tokenBytesEnd, tokenEqualsLower, valueBytesEnd } from './grammar.js';

/** Header lines of one response head; counted before any of them is looked at. */
export const MAX_RESPONSE_HEADERS = 256;

/** One parsed head: what h1-response.ts needs to pick the body framing and keep-alive. */
interface ResponseHead {
  readonly status: number;
  readonly http11: boolean;
  /** The raw `[name, value, ...]` list, case, order and duplicates kept. */
  readonly headers: string[];
  /** The one Content-Length value (identical repeats folded), if any. */
  readonly contentLength: string | undefined;
  /** Transfer codings listed; only exactly one, `chunked`, is acceptable. */
  readonly codings: number;
  /** The first coding is `chunked`. */
  readonly chunked: boolean;
  /** Connection names `close`. */
  readonly close: boolean;
}

export function protocolError(message: string): BoundaryError {
  return new BoundaryError('UPSTREAM_PROTOCOL_ERROR', message);
}

// The head is checked on its bytes, which V8 reads about twice as fast as a string's chars; strings are cut
// from one latin1 copy of the head only for names and values that go to the sink.

/** `d` is a byte minus 0x30. */
function isDigit(d: number): boolean {
  return d >= 0 && d <= 9;
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

/** OWS (SP / HTAB) trimmed on both ends; String.trim() would also eat obs-text such as 0xA0. */
function trimOws(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && isOws(value.charCodeAt(start))) start++;
  while (end > start && isOws(value.charCodeAt(end - 1))) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

/** Where the comma-list element starting at `start` ends: the next comma, or the end of `value`. */
function elementEnd(value: string, start: number): number {
  const comma = value.indexOf(',', start);
  return comma < 0 ? value.length : comma;
}

/**
 * The head is `data[0, n)`, without its final CRLF CRLF; the caller has made sure every LF in it follows a CR,
 * found the status line's end and counted the header lines. One pass, no split, RegExp or lower-cased copy.
 */
export function parseResponseHead(data: Buffer, n: number, lineEnd: number, headerLines: number): ResponseHead | BoundaryError {
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
        if (!isDigits(element, MAX_CONTENT_LENGTH_DIGITS)) return protocolError('invalid Content-Length');
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
  return { status, http11, headers, contentLength, codings, chunked, close };
}
