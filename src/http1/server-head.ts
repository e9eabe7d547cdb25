// The response head boundary's HTTP/1.1 server writes (server-response.ts): the status line and the fields as
// given, checked as node:http checks them, plus the framing and connection fields node:http adds for the same
// fields (Date, Content-Length or chunked, Connection, Keep-Alive). Pure but for the cached Date and Keep-Alive field.

import { STATUS_CODES } from '../shared/node-http.js';
import { BAD_VALUE, isToken, tokenEqualsLower } from './grammar.js';

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

function field(name: string, text: unknown): string {
  if (!isToken(name)) throw new InvalidHeadError('ERR_INVALID_HTTP_TOKEN', 'invalid header name');
  if (typeof text !== 'string' || BAD_VALUE.test(text)) throw new InvalidHeadError('ERR_INVALID_CHAR', `invalid value of header ${name}`);
  return `${name}: ${text}\r\n`;
}

const CONTENT_LENGTH = 1;
const TRANSFER_ENCODING = 2;
const CONNECTION = 3;
const DATE = 4;

/** Which of the fields the head's framing reads `name` is (0: none); `name` is a token, so no lower-cased copy is made. */
function framingField(name: string): number {
  switch (name.length) {
    case 4:
      return tokenEqualsLower(name, 'date') ? DATE : 0;
    case 10:
      return tokenEqualsLower(name, 'connection') ? CONNECTION : 0;
    case 14:
      return tokenEqualsLower(name, 'content-length') ? CONTENT_LENGTH : 0;
    case 17:
      return tokenEqualsLower(name, 'transfer-encoding') ? TRANSFER_ENCODING : 0;
    default:
      return 0;
  }
}

/** The fields of a `{ name: value | values }` object as a flat `[name, value, ...]` list, in its order. */
function flatten(headers: Readonly<Record<string, string | number | readonly string[]>>): unknown[] {
  const flat: unknown[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (Array.isArray(value)) for (const v of value as readonly unknown[]) flat.push(name, v);
    else flat.push(name, value);
  }
  return flat;
}

/** The `Keep-Alive` field for a timeout, made once per timeout value. */
let keepAliveText = '';
let keepAliveFor = -1;
function keepAliveField(ms: number): string {
  if (ms !== keepAliveFor) {
    keepAliveText = `Keep-Alive: timeout=${Math.floor(ms / 1000)}\r\n`;
    keepAliveFor = ms;
  }
  return keepAliveText;
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
  const flat: readonly unknown[] = Array.isArray(headers) ? (headers as readonly string[]) : flatten(headers as Readonly<Record<string, string | number | readonly string[]>>);
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i] as string;
    const given = flat[i + 1];
    const value = typeof given === 'number' ? String(given) : given;
    text += field(name, value);
    switch (framingField(name)) {
      case CONTENT_LENGTH:
        length = true;
        break;
      case TRANSFER_ENCODING:
        te = true;
        if (TE_CHUNKED.test(value as string)) chunked = true;
        break;
      case CONNECTION:
        connection = true;
        if (CONNECTION_CLOSE.test(value as string)) close = true;
        break;
      case DATE:
        date = true;
        break;
    }
  }
  if (!date) text += `Date: ${httpDate()}\r\n`;
  // A Connection field given decides alone, as in node:http; else the connection is kept only where the client
  // can find the answer's end without a close.
  let last = close;
  if (!connection) {
    if (c.keepAlive && (length || c.chunkedAllowed)) {
      text += 'Connection: keep-alive\r\n';
      if (c.keepAliveTimeoutMs > 0) text += keepAliveField(c.keepAliveTimeoutMs);
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
