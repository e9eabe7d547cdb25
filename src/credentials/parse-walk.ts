// The credentials YAML walk shared by parse.ts and parse-grant.ts: located issues, typed reads, map entries with
// their allowed keys, and value_from references. Pure.

import { isAlias, isMap, isScalar, type LineCounter, type YAMLMap } from 'yaml';
import type { ErrorCode, Issue } from '../shared/errors.js';
import { Secret } from './secret.js';
import type { PlaceholderFormat } from './shaped.js';
import { secretValueProblem } from './set.js';

export type EnvValueSpec =
  | { readonly kind: 'literal'; readonly value: Secret }
  | { readonly kind: 'file'; readonly path: string }
  | { readonly kind: 'env'; readonly name: string };

export interface Located {
  readonly path: string;
  readonly line?: number;
  readonly column?: number;
}

export interface EnvEntrySpec {
  readonly key: string;
  readonly value: EnvValueSpec;
  /** The shape of its placeholder (docs/credentials.md#shaped-placeholders); the placeholder forms otherwise. */
  readonly format?: PlaceholderFormat | undefined;
  /** Where the entry is, so a value_from problem found later still points at its line. */
  readonly at: Located;
}

export interface Walk {
  readonly issues: Issue[];
  readonly lines: LineCounter;
  readonly source: string | undefined;
}

export function locate(walk: Walk, node: unknown, path: string): Located {
  const range = (node as { range?: readonly number[] } | null)?.range;
  if (range === undefined || range[0] === undefined) return { path };
  const { line, col } = walk.lines.linePos(range[0]);
  return { path, line, column: col };
}

export function report(walk: Walk, code: ErrorCode, node: unknown, path: string, message: string): void {
  const at = locate(walk, node, path);
  walk.issues.push({ code, message, ...at, ...(walk.source === undefined ? {} : { source: walk.source }) });
}

export function asMap(walk: Walk, node: unknown, path: string): YAMLMap | undefined {
  if (isMap(node)) return node;
  report(walk, 'CREDENTIALS_TYPE', node, path, isAlias(node) ? 'YAML aliases are not supported' : 'expected a map');
  return undefined;
}

export function asString(walk: Walk, node: unknown, path: string): string | undefined {
  if (isScalar(node) && typeof node.value === 'string') return node.value;
  report(walk, 'CREDENTIALS_TYPE', node, path, 'expected a string (quote numbers and booleans)');
  return undefined;
}

/** OpenShell provider-credential fields boundary does not implement. */
const UNSUPPORTED_PROVIDER_KEYS: ReadonlySet<string> = new Set(['token_grant', 'auth_style', 'header_name']);

/** Map entries with scalar string keys; other keys are reported. Unknown keys are reported when `allowed` is set. */
export function entries(walk: Walk, map: YAMLMap, path: string, allowed?: readonly string[]): [string, unknown, unknown][] {
  const out: [string, unknown, unknown][] = [];
  for (const pair of map.items) {
    if (!isScalar(pair.key) || typeof pair.key.value !== 'string') {
      report(walk, 'CREDENTIALS_TYPE', pair.key, path, 'keys must be strings');
      continue;
    }
    const key = pair.key.value;
    if (allowed !== undefined && !allowed.includes(key)) {
      const where = path === '' ? key : `${path}.${key}`;
      // OpenShell's provider-profile token grants (OAuth client credentials with a SPIFFE JWT-SVID): refused by name,
      // never accepted and ignored; boundary's own are `token_grants` (docs/credentials.md#token-grants).
      const why = UNSUPPORTED_PROVIDER_KEYS.has(key) ? 'OpenShell token grants are not supported by boundary (see token_grants)' : 'unknown key';
      report(walk, 'CREDENTIALS_UNKNOWN_KEY', pair.key, where, `${why} (expected ${allowed.join(', ')})`);
      continue;
    }
    out.push([key, pair.value, pair.key]);
  }
  return out;
}

/** `also`: keys read elsewhere beside value_from (an env entry's `format`). */
export function readEnvValue(walk: Walk, node: unknown, path: string, also: readonly string[] = []): EnvValueSpec | undefined {
  if (isScalar(node) && typeof node.value === 'string') {
    const problem = secretValueProblem(node.value);
    if (problem === undefined) return { kind: 'literal', value: new Secret(node.value) };
    report(walk, 'CREDENTIALS_VALUE_INVALID', node, path, `value ${problem}`);
    return undefined;
  }
  if (!isMap(node)) {
    report(walk, 'CREDENTIALS_TYPE', node, path, 'expected a string (quote numbers) or { value_from: { file | env } }');
    return undefined;
  }
  const outer = entries(walk, node, path, ['value_from', ...also]).filter(([key]) => key === 'value_from');
  const fromNode = outer[0]?.[1];
  const fromMap = outer.length === 1 ? asMap(walk, fromNode, `${path}.value_from`) : undefined;
  const onlyAlso = node.items.every((pair) => isScalar(pair.key) && also.includes(String(pair.key.value)));
  if (outer.length === 0 && onlyAlso) report(walk, 'CREDENTIALS_TYPE', node, path, 'needs value_from');
  if (fromMap === undefined) return undefined;
  const sources = entries(walk, fromMap, `${path}.value_from`, ['file', 'env']);
  const [kind, valueNode] = sources[0] ?? ['', undefined];
  if (sources.length !== 1 || fromMap.items.length !== 1) {
    report(walk, 'CREDENTIALS_TYPE', fromMap, `${path}.value_from`, 'needs exactly one of file or env');
    return undefined;
  }
  const text = asString(walk, valueNode, `${path}.value_from.${kind}`);
  if (text === undefined) return undefined;
  if (text.length === 0 || /[\u0000\r\n]/.test(text)) {
    report(walk, 'CREDENTIALS_TYPE', valueNode, `${path}.value_from.${kind}`, 'must be non-empty, without CR, LF or NUL');
    return undefined;
  }
  return kind === 'file' ? { kind: 'file', path: text } : { kind: 'env', name: text };
}

