// Request-target canonicalisation for inspected requests (docs/policy.md#path-canonicalisation): one pass over the bytes, no
// regex. The canonical path is both what decide() sees and what goes upstream. Pure; never decides policy.

/** docs/destinations.md#limits: request targets longer than this are refused. */
export const MAX_REQUEST_TARGET_CHARS = 4_096;

const PATH_PROBLEMS = [
  'too-long',
  'not-origin-form',
  'control-or-non-ascii',
  'fragment',
  'bad-escape',
  'encoded-slash',
  'escapes-root',
] as const;
type PathProblem = (typeof PATH_PROBLEMS)[number];

type CanonicalTarget =
  | {
      readonly ok: true;
      /** Canonical path: starts with `/`, dot segments resolved, `;params` stripped, `//` collapsed. */
      readonly path: string;
      /** Raw query after `?` (still percent-encoded), or '' when absent. */
      readonly query: string;
      /** True when the canonical path still holds `%2F` (only possible with allowEncodedSlash). */
      readonly encodedSlash: boolean;
    }
  | { readonly ok: false; readonly problem: PathProblem };

const HEX = '0123456789ABCDEF';

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 65 && code <= 70) return code - 55;
  if (code >= 97 && code <= 102) return code - 87;
  return -1;
}

// RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~". Escapes of these are decoded.
function isUnreserved(code: number): boolean {
  return (
    (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || (code >= 48 && code <= 57) || code === 45 || code === 46 || code === 95 || code === 126
  );
}

function isSlashOrDot(code: number): boolean {
  return code === 47 || code === 46;
}

function fail(problem: PathProblem): CanonicalTarget {
  return { ok: false, problem };
}

/**
 * Canonicalises an origin-form request target (`/a/b?q`). `%2F` is refused unless `allowEncodedSlash`.
 * Escapes are decoded before dot segments are resolved, so `/%2e%2e/x` is refused as climbing above the root.
 */
export function canonicalTarget(target: string, options: { readonly allowEncodedSlash?: boolean } = {}): CanonicalTarget {
  if (target.length > MAX_REQUEST_TARGET_CHARS) return fail('too-long');
  if (target.charCodeAt(0) !== 47) return fail('not-origin-form');
  const allowEncodedSlash = options.allowEncodedSlash === true;
  let queryStart = -1;
  let needsWork = false;
  for (let i = 0; i < target.length; i++) {
    const code = target.charCodeAt(i);
    if (code <= 0x20 || code >= 0x7f) return fail('control-or-non-ascii');
    if (code === 35) return fail('fragment');
    if (code === 63 && queryStart < 0) queryStart = i;
    else if (queryStart < 0 && (code === 37 || code === 59 || (code === 47 && isSlashOrDot(target.charCodeAt(i + 1))))) needsWork = true;
  }
  const rawPath = queryStart < 0 ? target : target.slice(0, queryStart);
  const query = queryStart < 0 ? '' : target.slice(queryStart + 1);
  // Fast path: nothing to decode, strip or resolve.
  if (!needsWork) return { ok: true, path: rawPath, query, encodedSlash: false };

  // 1. Escapes: decode unreserved, uppercase the rest, refuse malformed ones and (by default) %2F.
  let decoded = '';
  let encodedSlash = false;
  for (let i = 0; i < rawPath.length; i++) {
    const code = rawPath.charCodeAt(i);
    if (code !== 37) {
      decoded += rawPath[i];
      continue;
    }
    const hi = hexValue(rawPath.charCodeAt(i + 1));
    const lo = hexValue(rawPath.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) return fail('bad-escape');
    const value = hi * 16 + lo;
    i += 2;
    if (isUnreserved(value)) {
      decoded += String.fromCharCode(value);
    } else {
      if (value === 0x2f) {
        if (!allowEncodedSlash) return fail('encoded-slash');
        encodedSlash = true;
      }
      decoded += `%${HEX[hi]}${HEX[lo]}`;
    }
  }

  // 2-3. Segments: strip `;params` first (so `..;` cannot hide traversal), then resolve dots, collapse `//`.
  const segments = decoded.split('/');
  const out: string[] = [];
  let trailingSlash = false;
  for (let i = 1; i < segments.length; i++) {
    const raw = segments[i] ?? '';
    const semi = raw.indexOf(';');
    const segment = semi < 0 ? raw : raw.slice(0, semi);
    const last = i === segments.length - 1;
    if (segment === '..') {
      if (out.length === 0) return fail('escapes-root');
      out.pop();
      trailingSlash = last;
    } else if (segment === '.' || segment === '') {
      trailingSlash = last;
    } else {
      out.push(segment);
      trailingSlash = false;
    }
  }
  const path = out.length === 0 ? '/' : `/${out.join('/')}${trailingSlash ? '/' : ''}`;
  return { ok: true, path, query, encodedSlash };
}
