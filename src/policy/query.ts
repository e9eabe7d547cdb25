// Query parsing and query matchers for HTTP rules (docs/policy.md#query-matching). Pure. Decodes %XX only (never `+`);
// allow needs every value of each named key to match, deny fires on any single matching value.

import { compileValueGlob, type Glob } from './glob.js';
import type { QueryParams } from './types.js';

export type QueryMode = 'allow' | 'deny';

interface QueryMatcher {
  /** Named keys in rule order; empty when the rule has no `query`. */
  readonly keys: readonly string[];
  matches(params: QueryParams): boolean;
  explain(params: QueryParams): string | undefined;
}

/** Parses a raw query (without `?`). A key without `=` has the value ''. Empty pieces are skipped. */
export function parseQuery(raw: string | undefined): QueryParams {
  const params = new Map<string, string[]>();
  if (raw === undefined || raw === '') return params;
  for (const piece of raw.split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    const key = percentDecode(eq < 0 ? piece : piece.slice(0, eq));
    const value = eq < 0 ? '' : percentDecode(piece.slice(eq + 1));
    const values = params.get(key);
    if (values === undefined) params.set(key, [value]);
    else values.push(value);
  }
  return params;
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
  const keyProblem = (key: string, globs: readonly Glob[], params: QueryParams): string | undefined => {
    const values = params.get(key);
    if (values === undefined || values.length === 0) return `query key ${key} is absent`;
    if (mode === 'allow') {
      return values.every((v) => valueMatches(globs, v)) ? undefined : `a value of query key ${key} does not match`;
    }
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
