// Glob compilers for rule paths (reference §3.5), query values (§3.8), binaries and the endpoint path selector
// (§3.6). Pure; patterns are validated with globError() at load time and compiled once into closures.

/** A compiled glob. `explain()` says why a value missed, or returns undefined when it matches. */
export interface Glob {
  readonly source: string;
  matches(value: string): boolean;
  explain(value: string): string | undefined;
}

/** The endpoint path selector; `specificity` orders competing endpoints (most specific wins). */
export interface PathSelector {
  readonly source: string | undefined;
  readonly specificity: number;
  matches(path: string): boolean;
}

type Separator = '/' | '.';

/** Why a glob is unusable (unterminated or empty class, bad range), or undefined when it compiles. */
export function globError(pattern: string): string | undefined {
  try {
    new RegExp(strictSource(pattern, '/'));
    new RegExp(looseSource(pattern));
    return undefined;
  } catch (err) {
    return err instanceof GlobSyntaxError ? err.message : `not a valid glob: ${String(pattern)}`;
  }
}

/**
 * Segment-bounded glob: `*` and `?` stay inside one segment; a whole-segment `**` spans one or more segments
 * (an empty segment counts, so `/repos/**` matches `/repos/` but not `/repos`); `**` next to other characters
 * acts as `*`; `[...]` and `[!...]` are classes. Case-sensitive.
 */
export function compileGlob(pattern: string, separator: Separator = '/'): Glob {
  const re = new RegExp(strictSource(pattern, separator));
  return {
    source: pattern,
    matches: (value) => re.test(value),
    explain: (value) => (re.test(value) ? undefined : `${JSON.stringify(value)} does not match ${pattern}`),
  };
}

/** Query value globs use `.` as the separator: `v1.*` matches `v1.2`, not `v1.2.3`; `**` matches anything. */
export function compileValueGlob(pattern: string): Glob {
  return compileGlob(pattern, '.');
}

/** Binary globs: `*` inside one path segment, `**` across any depth. */
export function compileBinaryGlob(pattern: string): Glob {
  return compileGlob(pattern, '/');
}

const MATCH_ALL_SELECTORS: ReadonlySet<string> = new Set(['', '**', '/**']);

/**
 * Endpoint path selector (§3.6): empty, `**` and `/**` select every path; `/v1/**` also selects `/v1`; in other
 * patterns `*` may cross `/`. Specificity is the number of characters other than `*`.
 */
export function compilePathSelector(pattern: string | undefined): PathSelector {
  if (pattern === undefined || MATCH_ALL_SELECTORS.has(pattern)) {
    return { source: pattern, specificity: 0, matches: () => true };
  }
  const specificity = [...pattern].filter((c) => c !== '*').length;
  const re = pattern.endsWith('/**')
    ? new RegExp(`^${looseSource(pattern.slice(0, -3))}(?:/.*)?$`)
    : new RegExp(`^${looseSource(pattern)}$`);
  return { source: pattern, specificity, matches: (path) => re.test(path) };
}

class GlobSyntaxError extends Error {}

function strictSource(pattern: string, separator: Separator): string {
  const sep = escapeRegExp(separator);
  const notSep = `[^${sep}]`;
  const segments = pattern.split(separator).map((segment) =>
    segment === '**' ? `${notSep}*(?:${sep}${notSep}*)*` : segmentSource(segment, notSep, sep),
  );
  return `^${segments.join(sep)}$`;
}

function segmentSource(segment: string, notSep: string, sep: string): string {
  let out = '';
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i] ?? '';
    if (c === '*') {
      while (segment[i + 1] === '*') i++;
      out += `${notSep}*`;
    } else if (c === '?') {
      out += notSep;
    } else if (c === '[') {
      const cls = readClass(segment, i);
      out += `(?!${sep})${cls.source}`;
      i = cls.end;
    } else {
      out += escapeRegExp(c);
    }
  }
  return out;
}

function looseSource(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] ?? '';
    if (c === '*') {
      while (pattern[i + 1] === '*') i++;
      out += '.*';
    } else if (c === '?') {
      out += '.';
    } else if (c === '[') {
      const cls = readClass(pattern, i);
      out += cls.source;
      i = cls.end;
    } else {
      out += escapeRegExp(c);
    }
  }
  return out;
}

/** Reads `[...]` starting at `start`; a `]` first in the class is literal. Returns the regex and the `]` index. */
function readClass(text: string, start: number): { source: string; end: number } {
  let i = start + 1;
  let negated = false;
  if (text[i] === '!' || text[i] === '^') {
    negated = true;
    i++;
  }
  let body = '';
  const first = i;
  for (; i < text.length; i++) {
    const c = text[i] ?? '';
    if (c === ']' && i > first) break;
    body += c === '\\' || c === ']' || c === '[' || c === '^' ? `\\${c}` : c;
  }
  if (i >= text.length) throw new GlobSyntaxError(`unterminated character class in ${text}`);
  return { source: `[${negated ? '^' : ''}${body}]`, end: i };
}

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');
}
