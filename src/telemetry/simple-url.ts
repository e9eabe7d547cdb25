// The fast path of OCSF http_request URL parts: the `http(s)://name[:port]/path` shape whose parts are known
// without WHATWG parsing. Pure. Anything it is unsure of is left to `new URL()` (ocsf.ts httpRequest).
import type { OcsfEvent } from './ocsf.js';

/** `[a-z0-9-]` (lower case only: upper case is normalised by WHATWG parsing). */
function isHostChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45;
}

/** RFC 3986 pchar without percent escapes, plus `/`: `A-Za-z0-9-._~!$&'()*+,;=:@/`. */
function isPathChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 64 && c <= 90) || (c >= 38 && c <= 59) || c === 33 || c === 36 || c === 61 || c === 95 || c === 126;
}

/** WHATWG's "ends in a number" for a last label with a letter in it: `0x` and hex digits (an IPv4 part). */
function isHexNumber(text: string, start: number, end: number): boolean {
  if (end - start < 2 || text.charCodeAt(start) !== 48 || text.charCodeAt(start + 1) !== 120) return false;
  for (let i = start + 2; i < end; i++) {
    const c = text.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/**
 * The parts `new URL()` would give for the common `http(s)://name[:port]/path` shape, filled into `out`;
 * false (nothing filled) for anything WHATWG parsing could normalise differently: IP literals and numeric
 * or hex last labels (IPv4 forms), punycode labels, upper case, percent escapes, dot segments, empty or odd ports.
 * Character loops, not regexes and slices: this runs once per forward request.
 */
export function simpleHttpUrl(text: string, out: NonNullable<OcsfEvent['http_request']>['url']): boolean {
  const tls = text.startsWith('https://');
  if (!tls && !text.startsWith('http://')) return false;
  const start = tls ? 8 : 7;
  // Host: dot-separated non-empty labels of [a-z0-9-], the last one with a letter in it.
  let i = start;
  let labelStart = start;
  let letterInLabel = false;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 46) {
      if (i === labelStart) return false;
      labelStart = i + 1;
      letterInLabel = false;
    } else if (isHostChar(c)) {
      if (c >= 97) letterInLabel = true;
    } else {
      break;
    }
  }
  const hostEnd = i;
  if (hostEnd === labelStart || !letterInLabel || isHexNumber(text, labelStart, hostEnd)) return false;
  const punycode = text.indexOf('xn--', start);
  if (punycode !== -1 && punycode < hostEnd) return false;
  let port = tls ? 443 : 80;
  if (text.charCodeAt(i) === 58) {
    // ':' then 1-5 digits without a leading zero, at most 65535.
    const digitsStart = ++i;
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 48 || c > 57) break;
    }
    const digits = i - digitsStart;
    if (digits === 0 || digits > 5 || text.charCodeAt(digitsStart) === 48) return false;
    port = Number(text.slice(digitsStart, i));
    if (port > 65_535) return false;
  }
  if (text.charCodeAt(i) !== 47) return false;
  const pathStart = i;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // No dot segments ('/.' anywhere): WHATWG parsing would resolve them.
    if (!isPathChar(c) || (c === 46 && text.charCodeAt(i - 1) === 47)) return false;
  }
  out.scheme = tls ? 'https' : 'http';
  out.hostname = text.slice(start, hostEnd);
  out.port = port;
  out.path = text.slice(pathStart);
  return true;
}
