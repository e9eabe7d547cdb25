// Query parsing and query matchers for HTTP rules (docs/policy.md#query-matching). Pure. The strict reading splits on `&`
// and decodes %XX only (never `+`); readings() adds every other way a common origin parses the same bytes.
// allow needs every value of each named key, in every reading, to match; deny fires on any value in any reading.

import { compileValueGlob, type Glob } from './glob.js';
import type { QueryParams } from './types.js';

export type QueryMode = 'allow' | 'deny';

interface QueryMatcher {
  /** Named keys in rule order; empty when the rule has no `query`. */
  readonly keys: readonly string[];
  matches(params: QueryParams): boolean;
  explain(params: QueryParams): string | undefined;
}

const NO_VALUES: readonly string[] = Object.freeze([]);

/** `ids[]`, `ids[0]`, `user[name]` -> `ids`, `ids`, `user`: PHP, Rails and qs hand these to the app under that name. */
function bracketBase(key: string): string | undefined {
  const open = key.indexOf('[');
  return open > 0 ? key.slice(0, open) : undefined;
}

function add(params: Map<string, string[]>, key: string, value: string): void {
  const values = params.get(key);
  if (values === undefined) params.set(key, [value]);
  else values.push(value);
}

/** The strict reading, and the other readings computed on first use; they are the strict one when no byte differs. */
class ParsedQuery extends Map<string, string[]> implements QueryParams {
  readonly #raw: string;
  #readings: ReadonlyMap<string, readonly string[]> | undefined;
  /** False while every reading is the strict one: no `;`, `+` or `%25`, no key with a capital. */
  #differs = false;

  constructor(raw: string) {
    super();
    this.#raw = raw;
    if (raw === '') return;
    this.#differs = raw.includes(';') || raw.includes('+') || raw.includes('%25');
    for (const piece of raw.split('&')) {
      if (piece === '') continue;
      const eq = piece.indexOf('=');
      const key = percentDecode(eq < 0 ? piece : piece.slice(0, eq));
      const value = eq < 0 ? '' : percentDecode(piece.slice(eq + 1));
      add(this, key, value);
      const base = bracketBase(key);
      if (base !== undefined) add(this, base, value);
      if (!this.#differs && key.toLowerCase() !== key) this.#differs = true;
    }
  }

  readings(): ReadonlyMap<string, readonly string[]> {
    if (!this.#differs) return this;
    this.#readings ??= queryReadings(this.#raw);
    return this.#readings;
  }
}

/**
 * Parses a raw query (without `?`). A key without `=` has the value ''. Empty pieces are skipped. A bracketed key
 * (`ids[]=1`) is also recorded under its base name (`ids`), so a rule on `ids` sees it.
 */
export function parseQuery(raw: string | undefined): QueryParams {
  return raw === undefined || raw === '' ? NO_QUERY : new ParsedQuery(raw);
}

/** The reading of an empty query, shared: QueryParams is read-only, and most requests have no query. */
const NO_QUERY: QueryParams = new ParsedQuery('');

/**
 * Every (key, value) any common origin could read, keys lower-cased: pieces split on `&` (WHATWG, Express, Go, Rails)
 * and also on `;` (Python's old parse_qsl, some Java servers); `%XX` decoded with `+` kept (RFC 3986) and as a space
 * (HTML forms, which most frameworks follow), and decoded again where that leaves an escape (apps that decode twice);
 * keys as written and by bracket base name; any case (ASP.NET).
 */
function queryReadings(raw: string): ReadonlyMap<string, readonly string[]> {
  const readings = new Map<string, string[]>();
  if (raw === '') return readings;
  const pieces = new Set(raw.split('&'));
  if (raw.includes(';')) for (const piece of raw.split(/[&;]/)) pieces.add(piece);
  for (const piece of pieces) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    const rawKey = eq < 0 ? piece : piece.slice(0, eq);
    const rawValue = eq < 0 ? '' : piece.slice(eq + 1);
    const forms = piece.includes('+') ? [piece, piece.replaceAll('+', ' ')] : [piece];
    for (const form of forms) {
      const plus = form !== piece;
      const key = percentDecode(plus ? rawKey.replaceAll('+', ' ') : rawKey);
      const value = percentDecode(plus ? rawValue.replaceAll('+', ' ') : rawValue);
      addReading(readings, key, value);
      if (key.includes('%') || value.includes('%')) addReading(readings, percentDecode(key), percentDecode(value));
    }
  }
  return readings;
}

function addReading(readings: Map<string, string[]>, key: string, value: string): void {
  const folded = key.toLowerCase();
  add(readings, folded, value);
  const base = bracketBase(folded);
  if (base !== undefined) add(readings, base, value);
}

/** Decodes `%XX` escapes as UTF-8 bytes; malformed escapes stay as written; `+` stays `+`. */
export function percentDecode(text: string): string {
  if (!text.includes('%')) return text;
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    const bytes = Buffer.from(run.replace(/%/g, ''), 'hex');
    return bytes.toString('utf8');
  });
}

/** `spec` maps each key to its globs (a plain string is one glob; `{any: [...]}` several). */
export function compileQueryMatcher(spec: ReadonlyMap<string, readonly string[]>, mode: QueryMode): QueryMatcher {
  const keys = [...spec.keys()];
  const compiled: [string, readonly Glob[]][] = [...spec].map(([key, globs]) => [key, globs.map(compileValueGlob)]);
  const valueMatches = (globs: readonly Glob[], value: string): boolean => globs.some((g) => g.matches(value));
  const readingsOf = (key: string, params: QueryParams): readonly string[] => params.readings().get(key.toLowerCase()) ?? NO_VALUES;
  const keyProblem = (key: string, globs: readonly Glob[], params: QueryParams): string | undefined => {
    if (mode === 'allow') {
      // Present as written for standards-following origins; every value any origin could read must match.
      if ((params.get(key)?.length ?? 0) === 0) return `query key ${key} is absent`;
      return readingsOf(key, params).every((v) => valueMatches(globs, v)) ? undefined : `a value of query key ${key} does not match`;
    }
    // A deny fires when any origin's reading has a matching value: `DEBUG=1`, `debug[]=1` and `x=0;debug=1` all count.
    const values = readingsOf(key, params);
    if (values.length === 0) return `query key ${key} is absent`;
    return values.some((v) => valueMatches(globs, v)) ? undefined : `no value of query key ${key} matches`;
  };
  const explain = (params: QueryParams): string | undefined => {
    for (const [key, globs] of compiled) {
      const problem = keyProblem(key, globs, params);
      if (problem !== undefined) return problem;
    }
    return undefined;
  };
  return Object.freeze({
    keys: Object.freeze(keys),
    matches: (params: QueryParams) => explain(params) === undefined,
    explain,
  });
}
