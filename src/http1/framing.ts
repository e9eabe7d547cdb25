// Strict HTTP/1.1 request framing on top of llhttp (which never runs with insecureHTTPParser): the checks
// llhttp leaves to us (duplicate Content-Length even when identical, TE other than exactly `chunked`, TE on
// HTTP/1.0, Host count, header count, NUL or invalid UTF-8 in values), and `_` lookalikes of framing names.
// Pure; sees raw header pairs only.

import { isUtf8 } from 'node:buffer';
import { isDigits, MAX_CONTENT_LENGTH_DIGITS } from './grammar.js';

/** More header lines than this is a 431 (reference RX-02). */
export const MAX_HEADER_COUNT = 256;

const FRAMING_PROBLEMS = [
  'too-many-headers',
  'duplicate-content-length',
  'bad-content-length',
  'content-length-with-transfer-encoding',
  'duplicate-transfer-encoding',
  'unsupported-transfer-encoding',
  'transfer-encoding-on-http-1.0',
  'duplicate-host',
  'missing-host',
  'bad-header-value',
] as const;
type FramingProblem = (typeof FRAMING_PROBLEMS)[number];

export type FramingResult =
  | {
      readonly ok: true;
      /** The single Host value, if any. */
      readonly host: string | undefined;
      /** Lower-case Upgrade value, if any. */
      readonly upgrade: string | undefined;
      readonly expectContinue: boolean;
      readonly hasBody: boolean;
    }
  | { readonly ok: false; readonly status: 400 | 431; readonly problem: FramingProblem };

function problem(status: 400 | 431, p: FramingProblem): FramingResult {
  return { ok: false, status, problem: p };
}

// llhttp hands header values over as latin1; a byte above 0x7f means the client sent non-ASCII, which
// must at least be valid UTF-8. NUL and other controls (except HTAB) are refused outright.
function isCleanValue(value: string): boolean {
  let high = false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return false;
    if (c > 0x7f) high = true;
  }
  return !high || isUtf8(Buffer.from(value, 'latin1'));
}

/** Checks one request head. `rawHeaders` is Node's flat `[name, value, ...]` list. */
export function checkFraming(httpVersion: string, rawHeaders: readonly string[]): FramingResult {
  if (rawHeaders.length / 2 > MAX_HEADER_COUNT) return problem(431, 'too-many-headers');
  let contentLength: string | undefined;
  let transferEncoding: string | undefined;
  let host: string | undefined;
  let hostCount = 0;
  let upgrade: string | undefined;
  let expectContinue = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    const value = rawHeaders[i + 1] ?? '';
    if (!isCleanValue(value)) return problem(400, 'bad-header-value');
    // Cheap dispatch on length before lower-casing: most headers are none of these.
    switch (name.length) {
      case 4:
        if (name.toLowerCase() === 'host') {
          hostCount++;
          host = value;
        }
        break;
      case 6:
        if (name.toLowerCase() === 'expect' && value.trim().toLowerCase() === '100-continue') expectContinue = true;
        break;
      case 7:
        if (name.toLowerCase() === 'upgrade') upgrade = value.trim().toLowerCase();
        break;
      case 14:
        if (name.toLowerCase() === 'content-length') {
          if (contentLength !== undefined) return problem(400, 'duplicate-content-length');
          contentLength = value.trim();
          if (!isDigits(contentLength, MAX_CONTENT_LENGTH_DIGITS)) return problem(400, 'bad-content-length');
        }
        break;
      case 17:
        if (name.toLowerCase() === 'transfer-encoding') {
          if (transferEncoding !== undefined) return problem(400, 'duplicate-transfer-encoding');
          transferEncoding = value.trim().toLowerCase();
        }
        break;
      default:
        break;
    }
  }
  if (transferEncoding !== undefined) {
    if (contentLength !== undefined) return problem(400, 'content-length-with-transfer-encoding');
    if (httpVersion === '1.0') return problem(400, 'transfer-encoding-on-http-1.0');
    if (transferEncoding !== 'chunked') return problem(400, 'unsupported-transfer-encoding');
  }
  if (hostCount > 1) return problem(400, 'duplicate-host');
  if (hostCount === 0 && httpVersion !== '1.0') return problem(400, 'missing-host');
  const hasBody = transferEncoding !== undefined || (contentLength !== undefined && contentLength !== '0' && Number(contentLength) > 0);
  return { ok: true, host, upgrade, expectContinue, hasBody };
}

/**
 * Framing and hop-by-hop names that have a `_` lookalike (names without `-` have none under the fold). A CGI/WSGI
 * style mapping turns `-` and `_` alike into `_` (HTTP_TRANSFER_ENCODING), so an origin behind one reads
 * `Transfer_Encoding` as the real header: a second framing that boundary never checked.
 */
const LOOKALIKE_TARGETS: readonly string[] = ['keep-alive', 'proxy-connection', 'transfer-encoding', 'content-length'];
const LOOKALIKE_LENGTHS: ReadonlySet<number> = new Set(LOOKALIKE_TARGETS.map((n) => n.length));

/**
 * The framing or hop-by-hop name a header name folds into (lower-cased, `_` read as `-`) without being it,
 * e.g. `Transfer_Encoding` -> `transfer-encoding`; undefined when no header does. The answer names the
 * framing header, never the client's spelling, so it can go in events as is.
 */
export function framingLookalike(rawHeaders: readonly string[]): string | undefined {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    // Cheap dispatch on length and on `_` before any copy: nearly every header is neither.
    if (!LOOKALIKE_LENGTHS.has(name.length) || !name.includes('_')) continue;
    const folded = name.toLowerCase().replaceAll('_', '-');
    if (LOOKALIKE_TARGETS.includes(folded)) return folded;
  }
  return undefined;
}
