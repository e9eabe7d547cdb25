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
  'encoded-backslash',
  'encoded-nul',
  'double-encoded',
  'dot-segment-lookalike',
  'escapes-root',
] as const;
type PathProblem = (typeof PATH_PROBLEMS)[number];

/** Per-endpoint escapes kept instead of refused (docs/policy.md#path-canonicalisation); an Endpoint is one. */
export interface PathEscapeOptions {
  readonly allowEncodedSlash?: boolean;
  readonly allowEncodedBackslash?: boolean;
  readonly allowEncodedNul?: boolean;
}

export type CanonicalTarget =
  | {
      readonly ok: true;
      /** Canonical path: starts with `/`, dot segments resolved, `;params` stripped, `//` collapsed. */
      readonly path: string;
      /** Raw query after `?` (still percent-encoded), or '' when absent. */
      readonly query: string;
      /** True when the canonical path still holds `%2F` (only possible with allowEncodedSlash). */
      readonly encodedSlash: boolean;
      /** True when it holds `%5C`, from `%5C` or a raw `\` (only possible with allowEncodedBackslash). */
      readonly encodedBackslash: boolean;
      /** True when it holds `%00` (only possible with allowEncodedNul). */
      readonly encodedNul: boolean;
      /**
       * The path as Windows and IIS read it, trailing dots and spaces cut from every segment (`/admin.` is `/admin`
       * there); present only when that differs from `path`. The proxy decides both and the stricter stands.
       */
      readonly strippedPath?: string;
    }
  | { readonly ok: false; readonly problem: PathProblem };

const HEX = '0123456789ABCDEF';
const SLASH = 0x2f;
const DOT = 0x2e;
const BACKSLASH = 0x5c;
const PERCENT = 0x25;
const DOUBLE_ESCAPE = /%25[0-9A-Fa-f]{2}/;

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
  return code === SLASH || code === DOT;
}

function fail(problem: PathProblem): CanonicalTarget {
  return { ok: false, problem };
}

/** Every set of escape options, indexed by bits (1 slash, 2 backslash, 4 NUL): one is picked per request, none made. */
const ESCAPE_OPTIONS: readonly PathEscapeOptions[] = Array.from({ length: 8 }, (_, bits) =>
  Object.freeze({ allowEncodedSlash: (bits & 1) !== 0, allowEncodedBackslash: (bits & 2) !== 0, allowEncodedNul: (bits & 4) !== 0 }),
);

/** The options any of `endpoints` grants: canonicalise with these, then check the deciding endpoint with refusedEscape(). */
export function escapeOptionsOf(endpoints: readonly PathEscapeOptions[]): PathEscapeOptions {
  let bits = 0;
  for (const e of endpoints) {
    if (e.allowEncodedSlash === true) bits |= 1;
    if (e.allowEncodedBackslash === true) bits |= 2;
    if (e.allowEncodedNul === true) bits |= 4;
  }
  return ESCAPE_OPTIONS[bits] as PathEscapeOptions;
}

/** The problem when the endpoint that decided does not allow an escape the canonical path kept; else undefined. */
export function refusedEscape(canon: Extract<CanonicalTarget, { ok: true }>, endpoint: PathEscapeOptions | undefined): PathProblem | undefined {
  if (canon.encodedSlash && endpoint?.allowEncodedSlash !== true) return 'encoded-slash';
  if (canon.encodedBackslash && endpoint?.allowEncodedBackslash !== true) return 'encoded-backslash';
  if (canon.encodedNul && endpoint?.allowEncodedNul !== true) return 'encoded-nul';
  return undefined;
}

/**
 * Canonicalises an origin-form request target (`/a/b?q`). `%2F`, `%5C` (and a raw `\`) and `%00` are refused unless
 * the matching option allows them; `%25` before two hex digits is always refused, so no origin can decode it twice.
 * Escapes are decoded before dot segments are resolved, so `/%2e%2e/x` is refused as climbing above the root.
 */
export function canonicalTarget(target: string, options: PathEscapeOptions = {}): CanonicalTarget {
  if (target.length > MAX_REQUEST_TARGET_CHARS) return fail('too-long');
  if (target.charCodeAt(0) !== SLASH) return fail('not-origin-form');
  let queryStart = -1;
  let needsWork = false;
  for (let i = 0; i < target.length; i++) {
    const code = target.charCodeAt(i);
    if (code <= 0x20 || code >= 0x7f) return fail('control-or-non-ascii');
    if (code === 35) return fail('fragment');
    if (code === 63 && queryStart < 0) queryStart = i;
    else if (queryStart < 0 && !needsWork) {
      needsWork = code === PERCENT || code === 59 || code === BACKSLASH || ((code === SLASH || code === DOT) && isSegmentEdge(target, code, i));
    }
  }
  const rawPath = queryStart < 0 ? target : target.slice(0, queryStart);
  const query = queryStart < 0 ? '' : target.slice(queryStart + 1);
  // Fast path: nothing to decode, strip or resolve.
  if (!needsWork) return { ok: true, path: rawPath, query, encodedSlash: false, encodedBackslash: false, encodedNul: false };
  const decoded = decodeEscapes(rawPath, options);
  if (typeof decoded === 'string') return fail(decoded);
  const resolved = resolveSegments(decoded.text);
  if (typeof resolved === 'string') return fail(resolved);
  const { encodedSlash, encodedBackslash, encodedNul } = decoded;
  const result = { ok: true, path: resolved.path, query, encodedSlash, encodedBackslash, encodedNul } as const;
  return resolved.strippedPath === undefined ? result : { ...result, strippedPath: resolved.strippedPath };
}

// `//`, `/.` and a `.` ending a segment (`/admin.`) need the slow path: the last for the stripped reading.
function isSegmentEdge(target: string, code: number, i: number): boolean {
  const next = target.charCodeAt(i + 1);
  if (code === SLASH) return isSlashOrDot(next);
  return code === DOT && (next === SLASH || next === 63 || Number.isNaN(next));
}

interface Decoded {
  readonly text: string;
  readonly encodedSlash: boolean;
  readonly encodedBackslash: boolean;
  readonly encodedNul: boolean;
}

// 1. Escapes: decode unreserved, uppercase the rest, refuse malformed ones, double encoding and the opt-in escapes.
function decodeEscapes(rawPath: string, options: PathEscapeOptions): Decoded | PathProblem {
  let text = '';
  let encodedSlash = false;
  let encodedBackslash = false;
  let encodedNul = false;
  for (let i = 0; i < rawPath.length; i++) {
    const code = rawPath.charCodeAt(i);
    // Windows, IIS and some frameworks read a raw `\` as `/`: it is the same character as `%5C` and kept only as that.
    if (code === BACKSLASH) {
      if (options.allowEncodedBackslash !== true) return 'encoded-backslash';
      encodedBackslash = true;
      text += '%5C';
      continue;
    }
    if (code !== PERCENT) {
      text += rawPath[i];
      continue;
    }
    const hi = hexValue(rawPath.charCodeAt(i + 1));
    const lo = hexValue(rawPath.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) return 'bad-escape';
    const value = hi * 16 + lo;
    i += 2;
    if (isUnreserved(value)) {
      text += String.fromCharCode(value);
      continue;
    }
    if (value === SLASH) {
      if (options.allowEncodedSlash !== true) return 'encoded-slash';
      encodedSlash = true;
    } else if (value === BACKSLASH) {
      if (options.allowEncodedBackslash !== true) return 'encoded-backslash';
      encodedBackslash = true;
    } else if (value === 0) {
      // C-backed origins end the string at NUL: `/admin%00.png` is `/admin` to them.
      if (options.allowEncodedNul !== true) return 'encoded-nul';
      encodedNul = true;
    }
    text += `%${HEX[hi]}${HEX[lo]}`;
  }
  // `%252e` is `%2e` once decoded and `.` to an origin that decodes twice: no reading of it is safe to match. Checked
  // on the output, so `%25%32%65` (which decodes to `%252E`) is caught too.
  if (text.includes('%25') && DOUBLE_ESCAPE.test(text)) return 'double-encoded';
  return { text, encodedSlash, encodedBackslash, encodedNul };
}

const TRAILING_SPACE = '%20';

/** A segment without its trailing dots and spaces, as Windows path APIs cut them. */
function stripTrailing(segment: string): string {
  const last = segment.charCodeAt(segment.length - 1);
  // Most segments end in neither: `.` or the `0` of `%20`.
  if (last !== DOT && last !== 48) return segment;
  let end = segment.length;
  for (;;) {
    if (end > 0 && segment.charCodeAt(end - 1) === DOT) end--;
    else if (end >= 3 && segment.endsWith(TRAILING_SPACE, end)) end -= 3;
    else return segment.slice(0, end);
  }
}

// 2-3. Segments: strip `;params` first (so `..;` cannot hide traversal), then resolve dots, collapse `//`.
function resolveSegments(decoded: string): { path: string; strippedPath?: string } | PathProblem {
  const segments = decoded.split('/');
  const out: string[] = [];
  let stripped = false;
  let trailingSlash = false;
  for (let i = 1; i < segments.length; i++) {
    const raw = segments[i] ?? '';
    const semi = raw.indexOf(';');
    const segment = semi < 0 ? raw : raw.slice(0, semi);
    const last = i === segments.length - 1;
    if (segment === '..') {
      if (out.length === 0) return 'escapes-root';
      out.pop();
      trailingSlash = last;
    } else if (segment === '.' || segment === '') {
      trailingSlash = last;
    } else {
      const cut = stripTrailing(segment);
      // `...`, `..%20`, `.%20`: nothing or a dot segment once Windows cuts them, so a climb no check here sees.
      if (cut === '') return 'dot-segment-lookalike';
      if (cut !== segment) stripped = true;
      out.push(segment);
      trailingSlash = false;
    }
  }
  const path = joinSegments(out, trailingSlash);
  return stripped ? { path, strippedPath: joinSegments(out.map(stripTrailing), trailingSlash) } : { path };
}

function joinSegments(parts: readonly string[], trailingSlash: boolean): string {
  return parts.length === 0 ? '/' : `/${parts.join('/')}${trailingSlash ? '/' : ''}`;
}
