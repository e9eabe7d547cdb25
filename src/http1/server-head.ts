// The response head boundary's HTTP/1.1 server writes (server-response.ts): the status line and the fields as
// given, checked as node:http checks them, plus the framing and connection fields node:http adds for the same
// fields (Date, Content-Length or chunked, Connection, Keep-Alive). Pure but for the cached Date.

import { STATUS_CODES } from '../shared/node-http.js';
import { BAD_VALUE, isToken } from './grammar.js';

export type HeaderInput = readonly string[] | Readonly<Record<string, string | number | readonly string[]>>;

/** Thrown before anything is written: a field name or value node:http would not write either. */
export class InvalidHeadError extends Error {
  override readonly name = 'InvalidHeadError';
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

let dateCache: string | undefined;

/** The IMF-fixdate of this second, made at most once a second (as node:http does). */
function httpDate(): string {
  if (dateCache === undefined) {
    const d = new Date();
    dateCache = d.toUTCString();
    setTimeout(() => {
      dateCache = undefined;
    }, 1000 - d.getMilliseconds()).unref();
  }
  return dateCache;
}

/** What the request and the connection tell the head. */
export interface HeadContext {
  /** A body may follow (not HEAD, 1xx, 204, 304). */
  readonly hasBody: boolean;
  /** Chunked is allowed: an HTTP/1.1 client, or an HTTP/1.0 one that sent `TE: chunked`. */
  readonly chunkedAllowed: boolean;
  /** The connection may stay open after this answer (the client's request and the connection's state say so). */
  readonly keepAlive: boolean;
  /** A Content-Length the caller knows (end() with the whole body before the head went out). */
  readonly knownLength: number | undefined;
  readonly keepAliveTimeoutMs: number;
}

export interface Head {
  readonly text: string;
  /** Chunked framing on the body writes. */
  readonly chunked: boolean;
  /** The connection closes once this answer is out. */
  readonly last: boolean;
}

const CONNECTION_CLOSE = /(?:^|\W)close(?:$|\W)/i;
export const TE_CHUNKED = /(?:^|\W)chunked(?:$|\W)/i;

function field(name: string, value: string | number): string {
  if (!isToken(name)) throw new InvalidHeadError('ERR_INVALID_HTTP_TOKEN', 'invalid header name');
  const text = typeof value === 'number' ? String(value) : value;
  if (typeof text !== 'string' || BAD_VALUE.test(text)) throw new InvalidHeadError('ERR_INVALID_CHAR', `invalid value of header ${name}`);
  return `${name}: ${text}\r\n`;
}

/** The head for `status` and `headers`, or InvalidHeadError for a field node:http would refuse. */
export function renderHead(status: number, headers: HeaderInput, reason: string | undefined, c: HeadContext): Head {
  if (!Number.isInteger(status) || status < 100 || status > 999) throw new InvalidHeadError('ERR_HTTP_INVALID_STATUS_CODE', 'invalid status code');
  const phrase = reason ?? STATUS_CODES[status] ?? 'unknown';
  if (BAD_VALUE.test(phrase)) throw new InvalidHeadError('ERR_INVALID_CHAR', 'invalid status message');
  let text = `HTTP/1.1 ${status} ${phrase}\r\n`;
  let length = false;
  let te = false;
  let chunked = false;
  let connection = false;
  let close = false;
  let date = false;
  const note = (name: string, value: string): void => {
    const lower = name.length < 4 || name.length > 17 ? '' : name.toLowerCase();
    if (lower === 'content-length') length = true;
    else if (lower === 'transfer-encoding') {
      te = true;
      if (TE_CHUNKED.test(value)) chunked = true;
    } else if (lower === 'connection') {
      connection = true;
      if (CONNECTION_CLOSE.test(value)) close = true;
    } else if (lower === 'date') date = true;
  };
  if (Array.isArray(headers)) {
    const flat = headers as readonly string[];
    for (let i = 0; i < flat.length; i += 2) {
      const name = flat[i] as string;
      const value = flat[i + 1] as string;
      text += field(name, value);
      note(name, value);
    }
  } else {
    for (const [name, value] of Object.entries(headers as Record<string, string | number | readonly string[]>)) {
      for (const v of Array.isArray(value) ? (value as readonly string[]) : [value as string | number]) {
        text += field(name, v);
        note(name, String(v));
      }
    }
  }
  if (!date) text += `Date: ${httpDate()}\r\n`;
  // A Connection field given decides alone, as in node:http; else the connection is kept only where the client
  // can find the answer's end without a close.
  let last = close;
  if (!connection) {
    if (c.keepAlive && (length || c.chunkedAllowed)) {
      text += 'Connection: keep-alive\r\n';
      if (c.keepAliveTimeoutMs > 0) text += `Keep-Alive: timeout=${Math.floor(c.keepAliveTimeoutMs / 1000)}\r\n`;
    } else {
      last = true;
      text += 'Connection: close\r\n';
    }
  }
  if (!length && !te) {
    if (!c.hasBody) chunked = false;
    else if (!c.chunkedAllowed) last = true;
    else if (c.knownLength !== undefined) text += `Content-Length: ${c.knownLength}\r\n`;
    else {
      text += 'Transfer-Encoding: chunked\r\n';
      chunked = true;
    }
  }
  return { text: `${text}\r\n`, chunked: chunked && c.hasBody, last };
}
