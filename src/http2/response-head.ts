// One decoded HTTP/2 response header list from an origin, checked per RFC 9113 §8.2 and §8.3.2 before any of it
// reaches a workload: field names lower-case tokens, values without CR, LF, NUL or edge whitespace (HPACK carries
// any octet; in HTTP/1.1 framing such a value would split the response), `:status` alone among pseudo-headers and
// first, no connection-specific field, one Content-Length. Pure.

import { BAD_VALUE, isDigits, MAX_CONTENT_LENGTH_DIGITS, TCHAR } from '../http1/grammar.js';
import { CONNECTION_SPECIFIC_HEADERS } from './request-head.js';

export type ResponseFieldProblem =
  | 'missing-status'
  | 'bad-status'
  | 'pseudo-header-misplaced'
  | 'pseudo-header-in-trailers'
  | 'bad-field-name'
  | 'bad-field-value'
  | 'connection-specific-header'
  | 'bad-content-length';

export interface ResponseFields {
  /** `:status`, or 0 for trailers. */
  readonly status: number;
  /** The regular fields, flat, as received. */
  readonly headers: string[];
  /** Content-Length, or -1 when absent. */
  readonly contentLength: number;
}

export type ResponseFieldsResult = { readonly ok: true; readonly fields: ResponseFields } | { readonly ok: false; readonly problem: ResponseFieldProblem };

function bad(problem: ResponseFieldProblem): ResponseFieldsResult {
  return { ok: false, problem };
}

function isLowerToken(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c > 0xff || TCHAR[c] !== 1 || (c >= 0x41 && c <= 0x5a)) return false;
  }
  return true;
}

function isOwsCode(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

function badValue(value: string): boolean {
  if (value.length === 0) return false;
  return isOwsCode(value.charCodeAt(0)) || isOwsCode(value.charCodeAt(value.length - 1)) || BAD_VALUE.test(value);
}

/** A response head (`trailers` false) or a trailer block (`trailers` true) as decoded from HPACK. */
export function readResponseFields(flat: readonly string[], trailers: boolean): ResponseFieldsResult {
  let status = 0;
  let contentLength = -1;
  let regularSeen = false;
  const headers: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    const value = flat[i + 1]!;
    if (name.charCodeAt(0) === 58) {
      if (trailers) return bad('pseudo-header-in-trailers');
      if (name !== ':status' || regularSeen || status !== 0) return bad('pseudo-header-misplaced');
      if (value.length !== 3 || !isDigits(value, 3) || value.charCodeAt(0) === 0x30) return bad('bad-status');
      status = Number(value);
      continue;
    }
    regularSeen = true;
    if (!isLowerToken(name)) return bad('bad-field-name');
    if (badValue(value)) return bad('bad-field-value');
    if (CONNECTION_SPECIFIC_HEADERS.includes(name)) return bad('connection-specific-header');
    if (name === 'content-length') {
      if (!isDigits(value, MAX_CONTENT_LENGTH_DIGITS)) return bad('bad-content-length');
      const n = Number(value);
      if (contentLength !== -1 && contentLength !== n) return bad('bad-content-length');
      contentLength = n;
    }
    headers.push(name, value);
  }
  if (!trailers && status === 0) return bad('missing-status');
  return { ok: true, fields: { status, headers, contentLength } };
}
