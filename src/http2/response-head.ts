// One decoded HTTP/2 response header list from an origin, checked per RFC 9113 §8.2 and §8.3.2 before any of it
// reaches a workload: field names lower-case tokens, values without CR, LF, NUL or edge whitespace (HPACK carries
// any octet; in HTTP/1.1 framing such a value would split the response), `:status` alone among pseudo-headers and
// first, no connection-specific field, one Content-Length. Pure.

import { isDigits, MAX_CONTENT_LENGTH_DIGITS } from '../http1/grammar.js';
import { badFieldValue, CONNECTION_SPECIFIC_HEADERS, isLowerToken } from './request-head.js';

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

/**
 * A response head (`trailers` false) or a trailer block (`trailers` true) as decoded from HPACK, or what is wrong
 * with it. The list is the caller's to give: on success it becomes the fields' `headers`, `:status` taken off its front.
 */
export function readResponseFields(flat: string[], trailers: boolean): ResponseFields | ResponseFieldProblem {
  let status = 0;
  let contentLength = -1;
  let regularSeen = false;
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    const value = flat[i + 1]!;
    if (name.charCodeAt(0) === 58) {
      if (trailers) return 'pseudo-header-in-trailers';
      if (name !== ':status' || regularSeen || status !== 0) return 'pseudo-header-misplaced';
      if (value.length !== 3 || !isDigits(value, 3) || value.charCodeAt(0) === 0x30) return 'bad-status';
      status = Number(value);
      continue;
    }
    regularSeen = true;
    if (!isLowerToken(name)) return 'bad-field-name';
    if (badFieldValue(value)) return 'bad-field-value';
    if (CONNECTION_SPECIFIC_HEADERS.includes(name)) return 'connection-specific-header';
    if (name === 'content-length') {
      if (!isDigits(value, MAX_CONTENT_LENGTH_DIGITS)) return 'bad-content-length';
      const n = Number(value);
      if (contentLength !== -1 && contentLength !== n) return 'bad-content-length';
      contentLength = n;
    }
  }
  if (!trailers && status === 0) return 'missing-status';
  // `:status` can only have come first (a pseudo-header after a regular field was refused above).
  if (status !== 0) {
    flat.shift();
    flat.shift();
  }
  return { status, headers: flat, contentLength };
}
