// Placeholder syntax (docs/credentials.md#placeholder-forms): the forms the workload holds in either family, finding them
// in text, and the fast, case- and encoding-insensitive marker test every leak scan uses; shaped placeholders
// (shaped.ts) are found by every one of them too. Never sees a secret value.

import { findShaped, hasShapedAnyCase, hasShapedLiteral, replaceShaped } from './shaped.js';

/**
 * The two spellings of the placeholder syntax: OpenShell's and that of its Ryno rename. boundary resolves the one
 * its `--placeholder-family` names and treats the other as reserved: never resolved, never forwarded
 * (docs/credentials.md#placeholder-families).
 */
export const PLACEHOLDER_FAMILIES = ['openshell', 'ryno'] as const;
export type PlaceholderFamily = (typeof PLACEHOLDER_FAMILIES)[number];
export const DEFAULT_PLACEHOLDER_FAMILY: PlaceholderFamily = 'openshell';
export const CANONICAL_PREFIXES: Readonly<Record<PlaceholderFamily, string>> = { openshell: 'openshell:resolve:env:', ryno: 'ryno:resolve:env:' };
export const ALIAS_MARKERS: Readonly<Record<PlaceholderFamily, string>> = { openshell: '-OPENSHELL-RESOLVE-ENV-', ryno: '-RYNO-RESOLVE-ENV-' };
export const MARKERS: readonly string[] = PLACEHOLDER_FAMILIES.flatMap((family) => [CANONICAL_PREFIXES[family], ALIAS_MARKERS[family]]);
/** Any marker in any ASCII case, without a lower-case copy of the text. Without the `u` flag, `i` folds no
 *  character beyond ASCII onto an ASCII letter, and no such character lower-cases to one of the markers' letters
 *  either (credentials-marker-scan.test.ts checks every one), so this finds what lower-casing would find. */
const ANY_MARKER = new RegExp(MARKERS.map((marker) => marker.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'i');
export const LONGEST_MARKER_CHARS = Math.max(...MARKERS.map((m) => m.length));
/** Text shorter than this holds no marker, even decoded: decoding never lengthens text, and only ASCII letters
 *  lower-case to the markers' letters. Most header values are shorter: they skip the scan. */
export const SHORTEST_MARKER_CHARS = Math.min(...MARKERS.map((m) => m.length));
/** Rounds of percent-decoding a leftover scan applies (`%253A` is two rounds from `:`). */
const MAX_DECODE_ROUNDS = 3;
const MAX_KEY_CHARS = 256;
/** What routing and logs see in place of a placeholder (docs/credentials.md#nothing-logged). */
const REDACTED_PLACEHOLDER = '[CREDENTIAL]';

const PLACEHOLDER_FORMS = ['canonical', 'revision', 'stable', 'alias'] as const;
type PlaceholderForm = (typeof PLACEHOLDER_FORMS)[number];

export interface PlaceholderRef {
  readonly form: PlaceholderForm;
  readonly key: string;
  /** The spelling it was written in; absent for boundary's own lookups by key (SigV4 keys), which use the scope's. */
  readonly family?: PlaceholderFamily;
  /** The pinned revision of the `v<rev>_KEY` form. */
  readonly revision?: number;
  /** Lower-case 64-hex handle of the `s<hex>_KEY` form. */
  readonly handle?: string;
}

export interface PlaceholderMatch {
  /** Offsets in the searched text; for an alias the span covers its whole token, prefix included. */
  readonly start: number;
  readonly end: number;
  readonly ref: PlaceholderRef;
}

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const NAME_CHAR = /[A-Za-z0-9_]/;
// Characters an alias prefix may hold (`sk-proj-...`): RFC 3986 unreserved, so a token stays one token.
const ALIAS_PREFIX_CHAR = /[A-Za-z0-9._~-]/;
const REVISION_FORM = /^v([0-9]{1,15})_(.+)$/;
const STABLE_FORM = /^s([0-9a-fA-F]{64})_(.+)$/;
const RESERVED_KEY = /^(?:v[0-9]+_|s[0-9a-fA-F]{64}_)/;

/** Why `key` cannot be a credential key, or undefined when it can. */
export function keyNameProblem(key: string): string | undefined {
  if (key.length === 0 || key.length > MAX_KEY_CHARS) return `must be 1-${MAX_KEY_CHARS} characters`;
  if (!ENV_KEY.test(key)) return 'must be an environment name: letters, digits and _, not starting with a digit';
  if (RESERVED_KEY.test(key)) return 'starts with a reserved v<digits>_ or s<64hex>_ prefix';
  return undefined;
}

export function canonicalPlaceholder(key: string, family: PlaceholderFamily = DEFAULT_PLACEHOLDER_FAMILY): string {
  return `${CANONICAL_PREFIXES[family]}${key}`;
}

export function revisionPlaceholder(key: string, revision: number, family: PlaceholderFamily = DEFAULT_PLACEHOLDER_FAMILY): string {
  return `${CANONICAL_PREFIXES[family]}v${revision}_${key}`;
}

export function stablePlaceholder(key: string, handle: string, family: PlaceholderFamily = DEFAULT_PLACEHOLDER_FAMILY): string {
  return `${CANONICAL_PREFIXES[family]}s${handle}_${key}`;
}

export function aliasPlaceholder(prefix: string, key: string, family: PlaceholderFamily = DEFAULT_PLACEHOLDER_FAMILY): string {
  return `${prefix}${ALIAS_MARKERS[family]}${key}`;
}

/** True when `text` holds a literal (exact-case) marker of either family, or a shaped placeholder: where a rewrite should look. */
export function hasLiteralMarker(text: string): boolean {
  return MARKERS.some((marker) => text.includes(marker)) || hasShapedLiteral(text);
}

function readName(text: string, from: number): number {
  let end = from;
  while (end < text.length && end - from <= MAX_KEY_CHARS + 80 && NAME_CHAR.test(text[end] ?? '')) end += 1;
  return end;
}

function parseCanonicalName(name: string, family: PlaceholderFamily): PlaceholderRef | undefined {
  const revision = REVISION_FORM.exec(name);
  if (revision !== null && keyNameProblem(revision[2] ?? '') === undefined) {
    return { form: 'revision', key: revision[2] ?? '', revision: Number(revision[1]), family };
  }
  const stable = STABLE_FORM.exec(name);
  if (stable !== null && keyNameProblem(stable[2] ?? '') === undefined) {
    return { form: 'stable', key: stable[2] ?? '', handle: (stable[1] ?? '').toLowerCase(), family };
  }
  return keyNameProblem(name) === undefined ? { form: 'canonical', key: name, family } : undefined;
}

/**
 * Every literal placeholder in `text`, in order, not overlapping. Only exact-case literal markers count:
 * anything else that looks like a marker (another case, percent-encoded) is left for the leftover scan.
 * An alias is recognised only when `aliasKeyExists(key)` (docs/credentials.md#placeholder-forms).
 */
export function findPlaceholders(text: string, aliasKeyExists: (key: string) => boolean): PlaceholderMatch[] {
  const found: PlaceholderMatch[] = [];
  for (const family of PLACEHOLDER_FAMILIES) findFamily(text, family, aliasKeyExists, found);
  // A shaped placeholder stands for one provider's key: resolved as its stable handle, in whichever family.
  for (const [start, end, ref] of findShaped(text)) found.push({ start, end, ref: { form: 'stable', key: ref.key, handle: ref.handle } });
  found.sort((a, b) => a.start - b.start);
  // A canonical placeholder inside an alias prefix cannot both be replaced; keep the first, the scan decides.
  const kept: PlaceholderMatch[] = [];
  for (const match of found) {
    const last = kept[kept.length - 1];
    if (last === undefined || match.start >= last.end) kept.push(match);
  }
  return kept;
}

function findFamily(text: string, family: PlaceholderFamily, aliasKeyExists: (key: string) => boolean, found: PlaceholderMatch[]): void {
  const prefix = CANONICAL_PREFIXES[family];
  let at = text.indexOf(prefix);
  while (at !== -1) {
    // `openshell:resolve:env:` does not hold `ryno:resolve:env:`, so a token is found in one family only.
    const nameEnd = readName(text, at + prefix.length);
    const ref = parseCanonicalName(text.slice(at + prefix.length, nameEnd), family);
    if (ref !== undefined) found.push({ start: at, end: nameEnd, ref });
    at = text.indexOf(prefix, Math.max(nameEnd, at + 1));
  }
  const marker = ALIAS_MARKERS[family];
  at = text.indexOf(marker);
  while (at !== -1) {
    const nameEnd = readName(text, at + marker.length);
    const key = text.slice(at + marker.length, nameEnd);
    if (keyNameProblem(key) === undefined && aliasKeyExists(key)) {
      let start = at;
      while (start > 0 && ALIAS_PREFIX_CHAR.test(text[start - 1] ?? '')) start -= 1;
      found.push({ start, end: nameEnd, ref: { form: 'alias', key, family } });
    }
    at = text.indexOf(marker, Math.max(nameEnd, at + 1));
  }
}

/** Replaces each match with `replace(match)`; the matches must come from findPlaceholders on this text. */
export function replaceMatches(
  text: string,
  matches: readonly PlaceholderMatch[],
  replace: (match: PlaceholderMatch) => string,
): string {
  let out = '';
  let from = 0;
  for (const match of matches) {
    out += text.slice(from, match.start) + replace(match);
    from = match.end;
  }
  return out + text.slice(from);
}

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  const lower = code | 0x20;
  if (lower >= 97 && lower <= 102) return lower - 87;
  return -1;
}

/** One round of lenient percent-decoding, byte-wise (`%XX` -> char XX); malformed escapes stay as they are. */
export function percentDecodeLoose(text: string): string {
  if (!text.includes('%')) return text;
  let out = '';
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i];
    if (ch === '%' && i + 2 < text.length) {
      const high = hexValue(text.charCodeAt(i + 1));
      const low = hexValue(text.charCodeAt(i + 2));
      if (high >= 0 && low >= 0) {
        out += String.fromCharCode(high * 16 + low);
        i += 2;
        continue;
      }
    }
    out += ch;
  }
  return out;
}

function hasRawMarker(text: string): boolean {
  return ANY_MARKER.test(text) || hasShapedAnyCase(text);
}

/**
 * True when `text` holds a marker in any case, literally or after up to MAX_DECODE_ROUNDS rounds of
 * percent-decoding. This is the fail-closed test: it does not care whether the key exists.
 */
export function containsMarker(text: string): boolean {
  if (text.length < SHORTEST_MARKER_CHARS) return false;
  let current = text;
  for (let round = 0; round <= MAX_DECODE_ROUNDS; round += 1) {
    if (hasRawMarker(current)) return true;
    const next = percentDecodeLoose(current);
    if (next === current) return false;
    current = next;
  }
  return false;
}

const RAW_CANONICAL_TOKEN = /(?:openshell|ryno):resolve:env:[A-Za-z0-9_]*/gi;
const RAW_ALIAS_TOKEN = /[A-Za-z0-9._~-]*-(?:OPENSHELL|RYNO)-RESOLVE-ENV-[A-Za-z0-9_]*/gi;
const PIECE_DELIMITERS = /([/&=?;,\s])/;

/**
 * `text` with placeholders replaced by `[CREDENTIAL]`, for routing and logs. Literal tokens are replaced
 * exactly; a piece (between `/ & = ? ; ,` or space) that still holds an encoded marker is replaced whole.
 */
export function redactPlaceholders(text: string): string {
  if (!containsMarker(text)) return text;
  const literal = replaceShaped(text.replace(RAW_CANONICAL_TOKEN, REDACTED_PLACEHOLDER).replace(RAW_ALIAS_TOKEN, REDACTED_PLACEHOLDER), REDACTED_PLACEHOLDER);
  if (!containsMarker(literal)) return literal;
  return literal
    .split(PIECE_DELIMITERS)
    .map((piece) => (containsMarker(piece) ? REDACTED_PLACEHOLDER : piece))
    .join('');
}
