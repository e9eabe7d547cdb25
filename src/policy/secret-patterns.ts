// The load rules of the secret scanner's user `patterns` (docs/policy.md#secret-scanner): each a name and a regex that
// compiles, is ASCII, cannot match empty text, and that redos-detector finds free of catastrophic backtracking.
// Pure; middleware/secret-scan.ts compiles what passes.

import { createRequire } from 'node:module';

type SafetyCheck = typeof import('redos-detector').isSafePattern;
let isSafePattern: SafetyCheck | undefined;
/** redos-detector on first use (a policy with user patterns): about 0.8 MiB of idle heap in every other sidecar. */
function safetyCheck(): SafetyCheck {
  isSafePattern ??= (createRequire(import.meta.url)('redos-detector') as { isSafePattern: SafetyCheck }).isSafePattern;
  return isSafePattern;
}

/** User patterns per entry: each is one more pass over every body the entry reads. */
export const MAX_USER_PATTERNS = 16;
/** Characters of one user regex: keeps the backtracking analysis at load short, and patterns reviewable. */
export const MAX_USER_PATTERN_CHARS = 256;
/** Steps redos-detector may take on one pattern; a pattern it cannot clear within them is refused. */
const REDOS_MAX_STEPS = 5_000;
const PATTERN_NAME = /^[a-z][a-z0-9_]{0,31}$/;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** A user pattern as the scanner compiles it. */
export interface UserPattern {
  readonly name: string;
  readonly regex: string;
}

function patternProblem(item: unknown, i: number, names: Set<string>): string | undefined {
  const at = `patterns[${i}]`;
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return `${at} must be a map with name and regex`;
  const { name, regex, ...rest } = item as Record<string, unknown>;
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) return `${at} takes only name and regex, not ${extra}`;
  if (typeof name !== 'string' || !PATTERN_NAME.test(name)) return `${at}.name must be 1-32 characters of a-z 0-9 _, starting with a letter`;
  if (names.has(name)) return `${at}.name ${name} is used twice`;
  names.add(name);
  if (typeof regex !== 'string' || regex.length === 0) return `${at}.regex must be a non-empty string`;
  if (regex.length > MAX_USER_PATTERN_CHARS) return `${at}.regex is ${regex.length} characters; the limit is MAX_USER_PATTERN_CHARS (${MAX_USER_PATTERN_CHARS})`;
  // Bodies are read byte for byte as Latin-1, so only an ASCII pattern means what it says.
  if (!PRINTABLE_ASCII.test(regex)) return `${at}.regex must be printable ASCII`;
  let compiled: RegExp;
  try {
    compiled = new RegExp(regex);
  } catch {
    return `${at}.regex does not compile as a JavaScript regular expression`;
  }
  if (compiled.test('')) return `${at}.regex matches empty text`;
  const safety = safetyCheck()(regex, { maxSteps: REDOS_MAX_STEPS });
  if (!safety.safe) return `${at}.regex may backtrack catastrophically (${safety.error ?? 'unsafe'}); bound each repetition ({m,n}) and avoid nested or overlapping ones`;
  return undefined;
}

/** What is wrong with a secret-scan entry's `patterns`, or undefined (absent is accepted). */
export function userPatternsProblem(patterns: unknown): string | undefined {
  if (patterns === undefined) return undefined;
  if (!Array.isArray(patterns)) return 'patterns must be a list of { name, regex }';
  if (patterns.length > MAX_USER_PATTERNS) return `${patterns.length} patterns; the limit is MAX_USER_PATTERNS (${MAX_USER_PATTERNS})`;
  const names = new Set<string>();
  for (const [i, item] of patterns.entries()) {
    const problem = patternProblem(item, i, names);
    if (problem !== undefined) return problem;
  }
  return undefined;
}
