// Field readers shared by the rule compilers (rules.ts, rules-jsonrpc.ts): a required string, a glob or
// `{ any: [...] }` matcher, and the glob check with the separator each kind of value is matched with.

import type { ErrorCode } from '../shared/errors.js';
import { ANY_MATCHER_KEYS } from './format.js';
import { globError } from './glob.js';
import {
  childPath,
  type Field,
  knownFields,
  type MapNode,
  type Node,
  type ReadContext,
  readMap,
  readString,
  readStringList,
  report,
  scalarValue,
} from './yaml-source.js';

/** A glob string or `{ any: [glob, ...] }` (non-empty). */
export function readMatcher(ctx: ReadContext, node: Node | null, path: string, code: ErrorCode, kind: GlobKind): string[] | undefined {
  const value = scalarValue(node);
  if (typeof value === 'string') return checkGlob(ctx, node, path, value, kind, code) ? [value] : undefined;
  const map = readMap(ctx, node, path, 'a glob string or { any: [...] }');
  if (map === undefined) return undefined;
  const anyField = knownFields(ctx, map, path, ANY_MATCHER_KEYS).get('any');
  if (anyField === undefined) {
    report(ctx, map, path, code, `${path} needs any: [glob, ...]`);
    return undefined;
  }
  const globs = readStringList(ctx, anyField, childPath(path, 'any'));
  if (globs === undefined) return undefined;
  if (globs.length === 0) {
    report(ctx, anyField.value, childPath(path, 'any'), code, 'any: [] matches nothing');
    return undefined;
  }
  return globs.every((g) => checkGlob(ctx, anyField.value, childPath(path, 'any'), g, kind, code)) ? globs : undefined;
}

export function requiredString(
  ctx: ReadContext,
  map: MapNode,
  fields: Map<string, Field>,
  key: string,
  path: string,
  code: ErrorCode,
): string | undefined {
  const field = fields.get(key);
  if (field === undefined) {
    report(ctx, map, childPath(path, key), code, `${key} is required`);
    return undefined;
  }
  const value = readString(ctx, field, childPath(path, key));
  if (value === '') {
    report(ctx, field.value, childPath(path, key), code, `${key} cannot be empty`);
    return undefined;
  }
  return value;
}

/** What a glob is matched against: a rule path, a query value (split on `.`), or an MCP tool name. */
export type GlobKind = 'path' | 'query-value' | 'name';

export function checkGlob(
  ctx: ReadContext,
  node: Node | null,
  path: string,
  pattern: string,
  kind: GlobKind,
  code: ErrorCode = 'POLICY_RULE_INVALID',
): boolean {
  // Validate with the separator the glob is compiled with: `[a.b]` is fine split on `/` but unterminated on `.`.
  const problem = globError(pattern, kind === 'path' ? '/' : '.');
  if (problem !== undefined) {
    report(ctx, node, path, code, problem);
    return false;
  }
  if (kind === 'path' && !pattern.startsWith('/') && !pattern.startsWith('*')) {
    report(ctx, node, path, code, `path ${pattern} must start with / (or be **)`);
    return false;
  }
  // OpenShell's glob library reads `{a,b}` as alternation, boundary's globs do not: refused, never matched literally.
  if (kind === 'name' && /[{}]/.test(pattern)) {
    report(ctx, node, path, code, `${pattern}: {a,b} alternation is not supported; list the names with any: [...]`);
    return false;
  }
  return true;
}
