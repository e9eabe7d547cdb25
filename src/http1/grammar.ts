// The HTTP/1.1 character grammar in one place: the tchar table, field-value and request-target sets, the
// Content-Length digit limit, and their string and byte scanners. Pure tables and predicates; no parsing state.

/** 1 for each RFC 9110 tchar (methods and field names, in requests and responses alike), by byte or char code. */
export const TCHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TCHAR[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TCHAR[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) {
  TCHAR[c] = 1;
  TCHAR[c + 0x20] = 1;
}

/**
 * Content-Length digits, for requests read, requests written and responses read: 15 keeps the value a safe
 * integer and refuses 2^64-style values before any use.
 */
export const MAX_CONTENT_LENGTH_DIGITS = 15;

// The set node:http accepts for a header value (HTAB, SP, VCHAR, obs-text); CR, LF, NUL, >0xFF fail closed.
// Heads are latin1 text, so one char is one byte. Values and targets can be long (cookies, tokens, queries):
// there a RegExp scans a string about twice as fast as a charCodeAt loop.
export const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
// request-target: visible bytes only (no SP, no CTL).
export const BAD_TARGET = /[^\x21-\x7e\x80-\xff]/;

/** RFC 9110 token. A table loop: names are short, and on them it beats a RegExp test (~7 vs ~20 ns). */
export function isToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff || TCHAR[c] === 0) return false;
  }
  return true;
}

/**
 * ASCII case-insensitive `s === lower` without a lower-cased copy, for a token or a valid field value `s`.
 * `lower` is lower-case letters and `-` only: `c | 0x20` then matches exactly the two cases of each letter,
 * and `-` only itself or CR, which no token or field value holds.
 */
export function tokenEqualsLower(s: string, lower: string): boolean {
  if (s.length !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) if ((s.charCodeAt(i) | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

/** 1 to `max` ASCII digits. */
export function isDigits(s: string, max: number): boolean {
  if (s.length === 0 || s.length > max) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

/** Index of the first byte of `data` in [from, to) that is not a tchar, else `to`. */
export function tokenBytesEnd(data: Buffer, from: number, to: number): number {
  for (let i = from; i < to; i++) if (TCHAR[data[i] as number] === 0) return i;
  return to;
}

/** Index of the first byte in [from, to) that a field value may not hold (as BAD_VALUE), else `to`. */
export function valueBytesEnd(data: Buffer, from: number, to: number): number {
  for (let i = from; i < to; i++) {
    const c = data[i] as number;
    if (c < 0x20 ? c !== 0x09 : c === 0x7f) return i;
  }
  return to;
}

/** SP or HTAB: optional whitespace (OWS) around field values and list elements. */
export function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}
