// Matchers for a provider's own `endpoints` list: host (exact, or the policy wildcard grammar of
// docs/policy.md#host-patterns, docs/policy.md#host-matching), port, and an optional path glob with rule-glob semantics (docs/policy.md#path-globs). Pure; compiled once at load.

import { normaliseHost } from '../net/host.js';

const MAX_PATH_GLOB_CHARS = 1_024;

export type Compiled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string };

const WILDCARD_LABEL = /^[a-z0-9_*-]+$/;

function fail<T>(message: string): Compiled<T> {
  return { ok: false, message };
}

function labelRegex(label: string): RegExp {
  const body = label
    .split('*')
    .map((part) => part.replace(/[.\\^$+?()[\]{}|-]/g, '\\$&'))
    .join('[^.]*');
  return new RegExp(`^${body}$`);
}

/** Host pattern -> predicate over a normalised host (lower-case, no trailing dot, canonical IP). */
export function compileHostPattern(raw: string): Compiled<(host: string) => boolean> {
  if (!raw.includes('*')) {
    const host = normaliseHost(raw);
    if (!host.ok) return fail(host.message);
    const exact = host.host;
    return { ok: true, value: (candidate) => candidate === exact };
  }
  const pattern = raw.toLowerCase().replace(/\.$/, '');
  const labels = pattern.split('.');
  if (labels.length < 3) return fail('a wildcard host needs at least three labels (no TLD wildcards)');
  if (labels.some((label) => label.length === 0 || !WILDCARD_LABEL.test(label))) {
    return fail('a wildcard host holds only letters, digits, -, _ and * in non-empty labels');
  }
  if ((labels[labels.length - 1] ?? '').includes('*')) return fail('the last label cannot be a wildcard');
  const [first = '', ...rest] = labels;
  for (const label of rest) {
    if (label.includes('*') && label !== '*') return fail('only the first label may hold a partial or ** wildcard');
  }
  if (first.includes('**') && first !== '**') return fail('** must be a whole label');
  const fixed = rest.map((label) => (label === '*' ? undefined : label));
  const firstMatch = first === '**' ? undefined : labelRegex(first);
  return {
    ok: true,
    value: (host) => {
      const parts = host.split('.');
      if (first === '**' ? parts.length < labels.length : parts.length !== labels.length) return false;
      const tail = parts.slice(parts.length - rest.length);
      for (let i = 0; i < rest.length; i += 1) {
        const want = fixed[i];
        const got = tail[i] ?? '';
        if (got.length === 0 || (want !== undefined && got !== want)) return false;
      }
      const head = parts.slice(0, parts.length - rest.length);
      if (head.some((label) => label.length === 0)) return false;
      return firstMatch === undefined || (head.length === 1 && firstMatch.test(head[0] ?? ''));
    },
  };
}

function classRegex(glob: string, start: number): { text: string; end: number } | undefined {
  const close = glob.indexOf(']', start + 2);
  if (close === -1) return undefined;
  let body = glob.slice(start + 1, close);
  const negate = body.startsWith('!');
  if (negate) body = body.slice(1);
  if (body.length === 0 || body.includes('/') || body.includes('[')) return undefined;
  const escaped = body.replace(/[\\\]^]/g, '\\$&');
  return { text: negate ? `[^/${escaped}]` : `[${escaped}]`, end: close + 1 };
}

function segmentRegex(segment: string): string | undefined {
  let out = '';
  for (let i = 0; i < segment.length; i += 1) {
    const ch = segment[i] ?? '';
    if (ch === '*') {
      // `**` next to other characters acts as `*` (docs/policy.md#path-globs).
      while (segment[i + 1] === '*') i += 1;
      out += '[^/]*';
    } else if (ch === '?') {
      out += '[^/]';
    } else if (ch === '[') {
      const cls = classRegex(segment, i);
      if (cls === undefined) return undefined;
      out += cls.text;
      i = cls.end - 1;
    } else {
      out += ch.replace(/[.\\^$+(){}|\]]/g, '\\$&');
    }
  }
  return out;
}

/**
 * Path glob -> predicate over a canonical path without query. `*` and `?` stay in one segment; a whole
 * `**` segment spans one or more segments; `**` or `/**` alone matches every path. Case-sensitive.
 */
export function compilePathGlob(glob: string): Compiled<(path: string) => boolean> {
  if (glob.length === 0 || glob.length > MAX_PATH_GLOB_CHARS) return fail(`must be 1-${MAX_PATH_GLOB_CHARS} characters`);
  if (glob === '**' || glob === '/**') return { ok: true, value: () => true };
  if (!glob.startsWith('/')) return fail('must start with /');
  if (/[\u0000-\u0020\u007f#]/.test(glob)) {
    return fail('must not contain whitespace, control characters or #');
  }
  let source = '^';
  for (const segment of glob.slice(1).split('/')) {
    if (segment === '**') {
      source += '(?:/[^/]*)+';
      continue;
    }
    const body = segmentRegex(segment);
    if (body === undefined) return fail('has an unterminated or invalid [...] class');
    source += `/${body}`;
  }
  const regex = new RegExp(`${source}$`);
  return { ok: true, value: (path) => regex.test(path) };
}
