// Glob compilers for rule paths (docs/policy.md#path-globs), query values (docs/policy.md#query-matching), binaries and the endpoint path selector
// (docs/policy.md#endpoint-path-selector). Pure; patterns are validated with globError() at load time and compiled once into token lists.
// Never a regex over the input: the workload picks paths and queries, and `^/[^/]*a[^/]*a[^/]*b$` backtracks.

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

// Character tokens: a char code (>= 0) is that literal; these take any run / any one character; a class is
// CLASS_BASE - its index (so -3, -4, ...).
const STAR = -1;
const ANY = -2;
const CLASS_BASE = -3;

interface CharPattern {
  readonly codes: readonly number[];
  readonly classes: readonly ((code: number) => boolean)[];
}

/** One segment of a segment-bounded glob. `star` and `any` come from a whole-segment `**`. */
type SegmentToken =
  | { readonly kind: 'star' }
  | { readonly kind: 'any' }
  | { readonly kind: 'literal'; readonly text: string }
  | { readonly kind: 'glob'; readonly pattern: CharPattern };

const SEGMENT_STAR: SegmentToken = { kind: 'star' };
const SEGMENT_ANY: SegmentToken = { kind: 'any' };
const GLOB_SYNTAX = /[*?[]/;

/** Why a glob is unusable (unterminated or empty class, bad range), or undefined when it compiles. */
export function globError(pattern: string, separator: Separator = '/'): string | undefined {
  try {
    segmentTokens(pattern, separator);
    charPattern(pattern);
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
  const tokens = segmentTokens(pattern, separator);
  const matches = GLOB_SYNTAX.test(pattern)
    ? (value: string): boolean => segmentsMatch(tokens, value, separator)
    : (value: string): boolean => value === pattern;
  return {
    source: pattern,
    matches,
    explain: (value) => (matches(value) ? undefined : `${JSON.stringify(value)} does not match ${pattern}`),
  };
}

/** Query value globs use `.` as the separator: `v1.*` matches `v1.2`, not `v1.2.3`; `**` matches anything. */
export function compileValueGlob(pattern: string): Glob {
  return compileGlob(pattern, '.');
}

/**
 * Binary globs (docs/identity.md#matching): `*` inside one path segment, `**` across any depth; a path without `*`
 * is compared as a string, so its `?` and `[` are literal, as in OpenShell. Only canonical absolute paths match:
 * `/usr/bin/../../tmp/evil` would otherwise pass `/usr/bin/**`.
 */
export function compileBinaryGlob(pattern: string): Glob {
  const glob: Pick<Glob, 'matches'> = pattern.includes('*') ? compileGlob(pattern, '/') : { matches: (path) => path === pattern };
  const matches = (path: string): boolean => isCanonicalAbsolute(path) && glob.matches(path);
  return {
    source: pattern,
    matches,
    explain: (path) => (matches(path) ? undefined : `${JSON.stringify(path)} does not match ${pattern}`),
  };
}

const MATCH_ALL_SELECTORS: ReadonlySet<string> = new Set(['', '**', '/**']);

/**
 * Endpoint path selector (docs/policy.md#endpoint-path-selector): empty, `**` and `/**` select every path; `/v1/**` also selects `/v1`; in other
 * patterns `*` may cross `/`. Specificity is the number of characters other than `*`.
 */
export function compilePathSelector(pattern: string | undefined): PathSelector {
  if (pattern === undefined || MATCH_ALL_SELECTORS.has(pattern)) {
    return { source: pattern, specificity: 0, matches: () => true };
  }
  const specificity = [...pattern].filter((c) => c !== '*').length;
  if (pattern.endsWith('/**')) {
    const base = charPattern(pattern.slice(0, -3));
    const below = { codes: [...base.codes, 0x2f, STAR], classes: base.classes };
    return {
      source: pattern,
      specificity,
      matches: (path) => charsMatch(base, path, 0, path.length) || charsMatch(below, path, 0, path.length),
    };
  }
  const whole = charPattern(pattern);
  return { source: pattern, specificity, matches: (path) => charsMatch(whole, path, 0, path.length) };
}

/**
 * Whether some path is selected by both selectors: the load-time ambiguity check (V13) asks it of two equally
 * specific selectors. Exact for literals, `?` and `*`; two classes, or a class and a literal it cannot be proved
 * to miss, count as sharing a character, so a doubt reports the pair rather than letting it load.
 */
export function pathSelectorsOverlap(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined || MATCH_ALL_SELECTORS.has(a) || MATCH_ALL_SELECTORS.has(b)) return true;
  const formsB = selectorForms(b);
  return selectorForms(a).some((pa) => formsB.some((pb) => charPatternsOverlap(pa, pb)));
}

/** The character patterns a selector is: `/v1/**` is both `/v1` and `/v1/` followed by anything. */
function selectorForms(pattern: string): CharPattern[] {
  if (!pattern.endsWith('/**')) return [charPattern(pattern)];
  const base = charPattern(pattern.slice(0, -3));
  return [base, { codes: [...base.codes, 0x2f, STAR], classes: base.classes }];
}

/**
 * A search over pairs of positions, one in each pattern: a star may take nothing (its position moves on alone) or
 * one character more (it stays); every other token takes exactly one. Some string fits both iff both ends meet.
 * At most (|a| + 1) x (|b| + 1) pairs, each visited once.
 */
function charPatternsOverlap(a: CharPattern, b: CharPattern): boolean {
  const width = b.codes.length + 1;
  const seen = new Set<number>();
  const pending = [0];
  while (pending.length > 0) {
    const at = pending.pop() as number;
    if (seen.has(at)) continue;
    seen.add(at);
    const i = Math.floor(at / width);
    const j = at % width;
    const ta = a.codes[i];
    const tb = b.codes[j];
    if (ta === undefined && tb === undefined) return true;
    if (ta === STAR) pending.push((i + 1) * width + j);
    if (tb === STAR) pending.push(i * width + j + 1);
    if (ta === undefined || tb === undefined || !mayShareChar(ta, a.classes, tb, b.classes)) continue;
    pending.push((ta === STAR ? i : i + 1) * width + (tb === STAR ? j : j + 1));
  }
  return false;
}

function mayShareChar(ta: number, classesA: CharPattern['classes'], tb: number, classesB: CharPattern['classes']): boolean {
  if (ta >= 0 && tb >= 0) return ta === tb;
  if (ta >= 0) return tb === STAR || charMatches(tb, ta, classesB);
  if (tb >= 0) return ta === STAR || charMatches(ta, tb, classesA);
  return true;
}

// Both matchers below are the greedy wildcard algorithm with one backtrack point, the last star. Every token
// other than a star takes exactly one item (a character, or a segment), so the blocks between stars have fixed
// widths and placing each as far left as it fits is optimal: exact, and O(items x tokens), never exponential.

/** Matches `value[start, end)` against character tokens. */
function charsMatch(pattern: CharPattern, value: string, start: number, end: number): boolean {
  const { codes, classes } = pattern;
  let t = 0;
  let i = start;
  let starToken = -1;
  let starItem = 0;
  while (i < end) {
    const token = t < codes.length ? (codes[t] as number) : undefined;
    if (token === STAR) {
      starToken = t;
      starItem = i;
      t++;
    } else if (token !== undefined && charMatches(token, value.charCodeAt(i), classes)) {
      t++;
      i++;
    } else if (starToken >= 0) {
      // The last star takes one more character; the block after it starts again one place to the right.
      starItem++;
      i = starItem;
      t = starToken + 1;
    } else {
      return false;
    }
  }
  while (codes[t] === STAR) t++;
  return t === codes.length;
}

function charMatches(token: number, code: number, classes: CharPattern['classes']): boolean {
  if (token >= 0) return token === code;
  if (token === ANY) return true;
  return (classes[CLASS_BASE - token] as (code: number) => boolean)(code);
}

/** Matches `value` split on `separator`, without splitting: `i` is the start of the current segment. */
function segmentsMatch(tokens: readonly SegmentToken[], value: string, separator: Separator): boolean {
  const length = value.length;
  let t = 0;
  let i = 0;
  let starToken = -1;
  let starItem = 0;
  // `i === length + 1` once the last segment (possibly empty) is consumed.
  while (i <= length) {
    const token = tokens[t];
    const end = segmentEnd(value, i, separator);
    if (token === SEGMENT_STAR) {
      starToken = t;
      starItem = i;
      t++;
    } else if (token !== undefined && segmentMatches(token, value, i, end)) {
      t++;
      i = end + 1;
    } else if (starToken >= 0) {
      starItem = segmentEnd(value, starItem, separator) + 1;
      i = starItem;
      t = starToken + 1;
    } else {
      return false;
    }
  }
  while (tokens[t] === SEGMENT_STAR) t++;
  return t === tokens.length;
}

function segmentEnd(value: string, start: number, separator: Separator): number {
  const end = value.indexOf(separator, start);
  return end < 0 ? value.length : end;
}

function segmentMatches(token: SegmentToken, value: string, start: number, end: number): boolean {
  switch (token.kind) {
    case 'any':
      return true;
    case 'literal':
      return end - start === token.text.length && value.startsWith(token.text, start);
    case 'glob':
      return charsMatch(token.pattern, value, start, end);
    case 'star':
      return false;
  }
}

/** A whole-segment `**` is one segment and then any more; other segments match exactly one segment. */
function segmentTokens(pattern: string, separator: Separator): SegmentToken[] {
  const tokens: SegmentToken[] = [];
  for (const segment of pattern.split(separator)) {
    if (segment === '**') tokens.push(SEGMENT_ANY, SEGMENT_STAR);
    else if (!GLOB_SYNTAX.test(segment)) tokens.push({ kind: 'literal', text: segment });
    else tokens.push({ kind: 'glob', pattern: charPattern(segment) });
  }
  return tokens;
}

/** `*` runs, `?`, `[...]` classes and literal characters (UTF-16 code units, as a regex without `u` sees them). */
function charPattern(text: string): CharPattern {
  const codes: number[] = [];
  const classes: ((code: number) => boolean)[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? '';
    if (c === '*') {
      while (text[i + 1] === '*') i++;
      codes.push(STAR);
    } else if (c === '?') {
      codes.push(ANY);
    } else if (c === '[') {
      const cls = readClass(text, i);
      codes.push(CLASS_BASE - classes.length);
      classes.push(cls.test);
      i = cls.end;
    } else {
      codes.push(text.charCodeAt(i));
    }
  }
  return { codes, classes };
}

class GlobSyntaxError extends Error {}

/** Reads `[...]` starting at `start`; a `]` first in the class is literal. Returns its test and the `]` index. */
function readClass(text: string, start: number): { test: (code: number) => boolean; end: number } {
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
  // A one-character regex: it cannot backtrack. A reversed range such as [z-a] throws here, at load.
  const re = new RegExp(`^[${negated ? '^' : ''}${body}]$`);
  return { test: (code) => re.test(String.fromCharCode(code)), end: i };
}

/** Starts with `/` and has no empty, `.` or `..` segment after the first. */
function isCanonicalAbsolute(path: string): boolean {
  if (!path.startsWith('/')) return false;
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i];
    if (segment === '.' || segment === '..' || (segment === '' && i < segments.length - 1)) return false;
  }
  return true;
}
