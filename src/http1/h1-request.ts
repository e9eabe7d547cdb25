// Serialises one HTTP/1.1 request head for h1-client.ts. Validates method, target and every header before a
// byte is written: values carry injected credentials, so a bad one fails closed and no error ever quotes it.

import { BoundaryError } from '../shared/errors.js';
import { BAD_TARGET, BAD_VALUE, isDigits, isToken, MAX_CONTENT_LENGTH_DIGITS, tokenEqualsLower } from './grammar.js';

export interface H1Request {
  readonly method: string;
  /** origin-form (or `*`): the request-target as written. */
  readonly target: string;
  /** Flat `[name, value, ...]`; Host included. Transfer-Encoding is ours to set and refused here. */
  readonly headers: readonly string[];
  readonly body: Buffer | AsyncIterable<Uint8Array> | null;
}

export function invalid(message: string): BoundaryError {
  return new BoundaryError('UPSTREAM_REQUEST_INVALID', message);
}

/** Throws unless `method` is a token and `target` a non-empty run of visible bytes. */
export function checkMethodAndTarget(method: string, target: string): void {
  if (!isToken(method)) throw invalid('request method is not a token');
  if (target.length === 0 || BAD_TARGET.test(target)) throw invalid('request target has a space or control character');
}

/**
 * Throws unless `name` is a token and `value` has only characters a field value may hold. `what` and `index` name
 * the field in the message (`request header 3`, `request trailer 0`); the value is never quoted.
 */
export function checkField(what: string, index: number, name: string, value: string): void {
  if (!isToken(name)) throw invalid(`${what} ${index} has an invalid name`);
  if (BAD_VALUE.test(value)) throw invalid(`${what} ${name} has a value with CR, LF, NUL or another forbidden character`);
}

export interface Serialised {
  readonly head: string;
  /** Declared Content-Length of a streamed body; -1 means chunked. */
  readonly length: number;
}

/**
 * Builds the request head, or throws before anything is written. Messages name the header position and a
 * valid name, never a value: values carry injected credentials.
 */
export function serialise(req: H1Request): Serialised {
  checkMethodAndTarget(req.method, req.target);
  let head = `${req.method} ${req.target} HTTP/1.1\r\n`;
  const headers = req.headers;
  let declared: string | undefined;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] ?? '';
    const value = headers[i + 1] ?? '';
    checkField('request header', i / 2, name, value);
    if (tokenEqualsLower(name, 'content-length')) {
      if (declared !== undefined || !isDigits(value, MAX_CONTENT_LENGTH_DIGITS)) throw invalid('request Content-Length is repeated or not digits');
      declared = value;
    } else if (tokenEqualsLower(name, 'transfer-encoding')) {
      throw invalid('request Transfer-Encoding is set by the client, not the caller');
    }
    head += `${name}: ${value}\r\n`;
  }
  const body = req.body;
  if (body === null) {
    if (declared !== undefined && Number(declared) !== 0) throw invalid('request Content-Length without a body');
    return { head: `${head}\r\n`, length: 0 };
  }
  if (Buffer.isBuffer(body)) {
    if (declared === undefined) return { head: `${head}content-length: ${body.length}\r\n\r\n`, length: body.length };
    if (Number(declared) !== body.length) throw invalid('request Content-Length does not match the body');
    return { head: `${head}\r\n`, length: body.length };
  }
  if (declared !== undefined) return { head: `${head}\r\n`, length: Number(declared) };
  return { head: `${head}transfer-encoding: chunked\r\n\r\n`, length: -1 };
}

