// Host, method and port matchers used by decide.ts (docs/policy.md#host-matching, docs/policy.md#method-matching). Pure. Hosts are label-bounded and
// never match the apex; each matcher can explain() a miss. Globs live in glob.ts, query matchers in query.ts.

import { compileGlob, type Glob } from './glob.js';
import type { HostKind } from './types.js';

const HOST_LABEL_KINDS = ['literal', 'star', 'globstar', 'partial'] as const;
type HostLabelKind = (typeof HOST_LABEL_KINDS)[number];

interface HostLabel {
  readonly kind: HostLabelKind;
  readonly text: string;
}

export interface HostMatcher {
  /** Normalised pattern (`*.example.com`), or undefined for the hostless form. */
  readonly pattern: string | undefined;
  readonly kind: HostKind;
  /** Literal labels after the last wildcard label; the index key for wildcards. */
  readonly suffix: string;
  readonly labels: readonly HostLabel[];
  matches(name: string): boolean;
  explain(name: string): string | undefined;
}

/** Compiles a normalised policy host (host-pattern.ts). `undefined` is the hostless form: any name or IP. */
export function compileHostPattern(pattern: string | undefined, kind: HostKind): HostMatcher {
  if (pattern === undefined || kind === 'any') {
    return freezeMatcher(undefined, 'any', '', [], () => true);
  }
  if (kind !== 'wildcard') {
    const labels = pattern.split('.').map((text) => ({ kind: 'literal' as const, text }));
    return freezeMatcher(pattern, kind, pattern, labels, (name) => name === pattern);
  }
  const labels = pattern.split('.').map(toLabel);
  const tests = labels.map(labelTest);
  const globstar = labels[0]?.kind === 'globstar';
  const fixed = globstar ? tests.slice(1) : tests;
  const suffix = labels.slice(lastWildcard(labels) + 1).map((l) => l.text).join('.');
  const matches = (name: string): boolean => {
    if (name.length === 0 || !name.endsWith(suffix)) return false;
    const nameLabels = name.split('.');
    if (globstar ? nameLabels.length <= fixed.length : nameLabels.length !== fixed.length) return false;
    const offset = nameLabels.length - fixed.length;
    for (let i = 0; i < fixed.length; i++) {
      if (!(fixed[i] as (label: string) => boolean)(nameLabels[offset + i] ?? '')) return false;
    }
    return !(globstar && nameLabels.slice(0, offset).some((l) => l === ''));
  };
  return freezeMatcher(pattern, kind, suffix, labels, matches);
}

/** True when some name could match both patterns (used by the V13 ambiguity check). */
export function hostPatternsOverlap(a: HostMatcher, b: HostMatcher): boolean {
  if (a.kind === 'any' || b.kind === 'any') return true;
  if (a.kind === 'ip' || b.kind === 'ip') return a.kind === b.kind && a.pattern === b.pattern;
  if (a.kind === 'exact') return b.matches(a.pattern ?? '');
  if (b.kind === 'exact') return a.matches(b.pattern ?? '');
  const aStar = a.labels[0]?.kind === 'globstar';
  const bStar = b.labels[0]?.kind === 'globstar';
  const restA = aStar ? a.labels.slice(1) : a.labels;
  const restB = bStar ? b.labels.slice(1) : b.labels;
  if (!aStar && !bStar && restA.length !== restB.length) return false;
  if (aStar && !bStar && restB.length <= restA.length) return false;
  if (bStar && !aStar && restA.length <= restB.length) return false;
  const n = Math.min(restA.length, restB.length);
  for (let i = 1; i <= n; i++) {
    if (!labelsIntersect(restA[restA.length - i] as HostLabel, restB[restB.length - i] as HostLabel)) return false;
  }
  return true;
}

interface MethodMatcher {
  readonly method: string;
  matches(requestMethod: string): boolean;
  explain(requestMethod: string): string | undefined;
}

/** Rule methods (docs/policy.md#method-matching): case-insensitive, `*` any, GET implies HEAD, OPTIONS never implied. */
export function compileMethod(ruleMethod: string): MethodMatcher {
  const method = ruleMethod.toUpperCase();
  const matches = (requestMethod: string): boolean => {
    if (method === '*') return true;
    const request = requestMethod.toUpperCase();
    return request === method || (method === 'GET' && request === 'HEAD');
  };
  return Object.freeze({
    method,
    matches,
    explain: (requestMethod: string) =>
      matches(requestMethod) ? undefined : `method ${requestMethod.toUpperCase()} is not ${method}`,
  });
}

function freezeMatcher(
  pattern: string | undefined,
  kind: HostKind,
  suffix: string,
  labels: readonly HostLabel[],
  matches: (name: string) => boolean,
): HostMatcher {
  return Object.freeze({
    pattern,
    kind,
    suffix,
    labels: Object.freeze(labels.map((l) => Object.freeze(l))),
    matches,
    explain: (name: string) =>
      matches(name) ? undefined : `${name} does not match ${pattern ?? '(any host)'}`,
  });
}

function toLabel(text: string): HostLabel {
  if (text === '**') return { kind: 'globstar', text };
  if (text === '*') return { kind: 'star', text };
  if (text.includes('*')) return { kind: 'partial', text };
  return { kind: 'literal', text };
}

function labelTest(label: HostLabel): (name: string) => boolean {
  switch (label.kind) {
    case 'literal':
      return (name) => name === label.text;
    case 'star':
    case 'globstar':
      return (name) => name.length > 0;
    case 'partial': {
      const glob = partialLabelGlob(label.text);
      return (name) => name.length > 0 && glob.matches(name);
    }
  }
}

/** `*-ai`: `*` is any run of characters other than `.`. A glob, not a regex: the workload picks the label. */
function partialLabelGlob(text: string): Glob {
  return compileGlob(text, '.');
}

function lastWildcard(labels: readonly HostLabel[]): number {
  let last = -1;
  labels.forEach((label, i) => {
    if (label.kind !== 'literal') last = i;
  });
  return last;
}

function labelsIntersect(x: HostLabel, y: HostLabel): boolean {
  if (x.kind === 'star' || y.kind === 'star') return true;
  if (x.kind === 'literal' && y.kind === 'literal') return x.text === y.text;
  if (x.kind === 'literal') return partialLabelGlob(y.text).matches(x.text);
  if (y.kind === 'literal') return partialLabelGlob(x.text).matches(y.text);
  // Two single-label globs share a name when their literal prefixes and suffixes are compatible.
  const px = x.text.slice(0, x.text.indexOf('*'));
  const py = y.text.slice(0, y.text.indexOf('*'));
  const sx = x.text.slice(x.text.lastIndexOf('*') + 1);
  const sy = y.text.slice(y.text.lastIndexOf('*') + 1);
  return (px.startsWith(py) || py.startsWith(px)) && (sx.endsWith(sy) || sy.endsWith(sx));
}
