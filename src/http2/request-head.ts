// One HTTP/2 request head as the proxy's evaluator reads it (RFC 9113 §8.2, §8.3): field names and values checked,
// the pseudo-headers checked, the connection-specific fields and a `te` other than `trailers` refused, Content-Length
// read, and `:authority` made the one Host. Pure; sees the decoded header list, never a socket.

import { BAD_VALUE, isDigits, MAX_CONTENT_LENGTH_DIGITS, TCHAR } from '../http1/grammar.js';

/** RFC 9113 §8.2.2: fields that mean something only to one HTTP/1.1 connection; a request carrying one is malformed. */
export const CONNECTION_SPECIFIC_HEADERS: readonly string[] = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'];

const H2_HEAD_PROBLEMS = [
  'unknown-pseudo-header',
  'repeated-pseudo-header',
  'missing-pseudo-header',
  'connect-method',
  'scheme-mismatch',
  'connection-specific-header',
  'te-not-trailers',
  'authority-host-mismatch',
  'uppercase-header-name',
  'bad-field-name',
  'bad-field-value',
  'pseudo-header-after-field',
  'bad-path',
  'repeated-host',
  'bad-content-length',
] as const;
export type H2HeadProblem = (typeof H2_HEAD_PROBLEMS)[number];

/** One stream's request head, shaped as the evaluator's RequestView (proxy/l7.ts). */
export interface H2RequestHead {
  readonly method: string;
  /** `:path`, origin-form, or absolute-form `http://authority/path` for a stream sent to the proxy itself. */
  readonly url: string;
  readonly httpVersion: '2.0';
  /** `host` (from `:authority`) first, then the regular fields as received; no pseudo-headers. */
  readonly rawHeaders: readonly string[];
  readonly scheme: string;
  /** Lower-cased `content-type`, '' when absent: gRPC denials are answered in gRPC's own form. */
  readonly contentType: string;
  /** Content-Length, -1 when absent: the body's DATA must add up to it (RFC 9113 §8.1.1). */
  readonly contentLength: number;
}

export type H2HeadResult = { readonly ok: true; readonly head: H2RequestHead } | { readonly ok: false; readonly problem: H2HeadProblem };

function problem(p: H2HeadProblem): H2HeadResult {
  return { ok: false, problem: p };
}

/** RFC 9113 §8.2.1: a field name is a token without upper-case letters. */
export function isLowerToken(name: string): boolean {
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

/** RFC 9113 §8.2.1: a field value has no NUL, CR or LF (nor other controls) and no whitespace at either end. */
export function badFieldValue(value: string): boolean {
  if (value.length === 0) return false;
  return isOwsCode(value.charCodeAt(0)) || isOwsCode(value.charCodeAt(value.length - 1)) || BAD_VALUE.test(value);
}

/** A regular field name's problem, in one pass: an upper-case letter anywhere first, then anything not a token. */
function nameProblem(name: string): H2HeadProblem | undefined {
  let bad = name.length === 0;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return 'uppercase-header-name';
    if (c > 0xff || TCHAR[c] !== 1) bad = true;
  }
  return bad ? 'bad-field-name' : undefined;
}

/**
 * Reads a request head from its decoded header list (`[':method', 'GET', ...]`, as sent). `scheme` is the
 * connection's: `https` inside terminated TLS, `http` in cleartext; a stream naming the other is refused. `endStream`:
 * the HEADERS frame ended the stream, so a Content-Length other than 0 cannot be met.
 */
export function readRequestHead(raw: readonly string[], scheme: 'http' | 'https', endStream = false): H2HeadResult {
  let method: string | undefined;
  let path: string | undefined;
  let authority: string | undefined;
  let sentScheme: string | undefined;
  let host: string | undefined;
  let contentType = '';
  let contentLength = -1;
  // Room for `host` first, so the list never needs copying to put it there; taken out when there is none. Sized for
  // the usual four pseudo-headers (then it neither grows nor needs trimming).
  const regular: string[] = new Array<string>(Math.max(2, raw.length - 6));
  regular[0] = 'host';
  regular[1] = '';
  let n = 2;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const value = raw[i + 1] ?? '';
    if (badFieldValue(value)) return problem('bad-field-value');
    if (name.charCodeAt(0) === 58) {
      // RFC 9113 §8.3: pseudo-headers come before every regular field.
      if (n > 2 || host !== undefined) return problem('pseudo-header-after-field');
      switch (name) {
        case ':method':
          if (method !== undefined) return problem('repeated-pseudo-header');
          method = value;
          break;
        case ':path':
          if (path !== undefined) return problem('repeated-pseudo-header');
          path = value;
          break;
        case ':authority':
          if (authority !== undefined) return problem('repeated-pseudo-header');
          authority = value;
          break;
        case ':scheme':
          if (sentScheme !== undefined) return problem('repeated-pseudo-header');
          sentScheme = value;
          break;
        default:
          // `:protocol` (extended CONNECT, RFC 8441) is never enabled, so it is as unknown as any other.
          return problem('unknown-pseudo-header');
      }
      continue;
    }
    const badName = nameProblem(name);
    if (badName !== undefined) return problem(badName);
    if (CONNECTION_SPECIFIC_HEADERS.includes(name)) return problem('connection-specific-header');
    if (name === 'te' && value.trim().toLowerCase() !== 'trailers') return problem('te-not-trailers');
    if (name === 'host') {
      if (host !== undefined) return problem('repeated-host');
      host = value;
      continue;
    }
    if (name === 'content-type') contentType = value.trim().toLowerCase();
    else if (name === 'content-length') {
      if (!isDigits(value, MAX_CONTENT_LENGTH_DIGITS) || (contentLength !== -1 && contentLength !== Number(value))) return problem('bad-content-length');
      contentLength = Number(value);
    }
    regular[n++] = name;
    regular[n++] = value;
  }
  if (regular.length !== n) regular.length = n;
  // A CONNECT stream would open a tunnel inside the tunnel, with no decision of its own.
  if (method === 'CONNECT') return problem('connect-method');
  if (method === undefined || path === undefined || sentScheme === undefined) return problem('missing-pseudo-header');
  if (sentScheme !== scheme) return problem('scheme-mismatch');
  // RFC 9113 §8.3.1: an http(s) :path is origin-form, or `*` for a server-wide OPTIONS.
  if (path.charCodeAt(0) !== 47 && !(path === '*' && method === 'OPTIONS')) return problem('bad-path');
  if (endStream && contentLength > 0) return problem('bad-content-length');
  // RFC 9113 §8.3.1: a Host that names another entity than `:authority` makes the request malformed.
  if (authority !== undefined && host !== undefined && authority !== host) return problem('authority-host-mismatch');
  const hostValue = authority ?? host;
  if (hostValue === undefined) regular.splice(0, 2);
  else regular[1] = hostValue;
  return { ok: true, head: { method, url: path, httpVersion: '2.0', rawHeaders: regular, scheme: sentScheme, contentType, contentLength } };
}

/**
 * Request trailers (RFC 9113 §8.1, §8.2): regular fields only, names lower-case tokens, values as in a head, no
 * connection-specific field. False makes the stream malformed.
 */
export function wellFormedTrailers(list: readonly string[]): boolean {
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i] as string;
    if (!isLowerToken(name) || badFieldValue(list[i + 1] as string) || CONNECTION_SPECIFIC_HEADERS.includes(name)) return false;
  }
  return true;
}
