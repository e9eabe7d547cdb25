// Reading a YAML document node by node while collecting problems with their YAML path and 1-based line and
// column. Readers take (node, path, ctx), report and carry on; nothing here throws or knows the policy schema.

import {
  type Document,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  type LineCounter,
  type Node,
  type Pair,
  type YAMLMap,
  type YAMLSeq,
} from 'yaml';
import type { ErrorCode, Issue } from '../errors.js';

export interface ReadContext {
  readonly doc: Document;
  readonly lineCounter: LineCounter;
  readonly issues: Issue[];
  readonly warnings: Issue[];
  readonly source: string | undefined;
}

/** One `key: value` of a map; `value` is null for `key:` with nothing after it. */
export interface Field {
  readonly key: string;
  readonly keyNode: Node;
  readonly value: Node | null;
}

/** The last segment of a YAML path, for messages that already travel with their full path. */
export function leaf(path: string): string {
  return path.slice(path.lastIndexOf('.') + 1);
}

export function childPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path === '' ? key : `${path}.${key}`;
}

/** Records a problem at `node`; POLICY_WARN_* codes go to the warnings. */
export function report(ctx: ReadContext, node: Node | null | undefined, path: string, code: ErrorCode, message: string): void {
  const where = position(ctx, node);
  const issue: Issue = {
    code,
    path,
    message,
    ...where,
    ...(ctx.source === undefined ? {} : { source: ctx.source }),
  };
  (code.startsWith('POLICY_WARN_') ? ctx.warnings : ctx.issues).push(issue);
}

export function position(ctx: ReadContext, node: Node | null | undefined): { line?: number; column?: number } {
  const offset = node?.range?.[0];
  if (offset === undefined) return {};
  const { line, col } = ctx.lineCounter.linePos(offset);
  return { line, column: col };
}

export function resolve(ctx: ReadContext, node: Node | null): Node | null {
  if (node !== null && isAlias(node)) return (node.resolve(ctx.doc) as Node | undefined) ?? null;
  return node;
}

export function readMap(ctx: ReadContext, node: Node | null, path: string, what = 'a map'): YAMLMap | undefined {
  const resolved = resolve(ctx, node);
  if (resolved !== null && isMap(resolved)) return resolved;
  report(ctx, resolved, path, 'POLICY_TYPE', `${leaf(path) || 'the document'} must be ${what}`);
  return undefined;
}

export function readSeq(ctx: ReadContext, node: Node | null, path: string): YAMLSeq | undefined {
  const resolved = resolve(ctx, node);
  if (resolved !== null && isSeq(resolved)) return resolved;
  report(ctx, resolved, path, 'POLICY_TYPE', `${leaf(path)} must be a list`);
  return undefined;
}

/** The fields of a map in document order. Non-scalar keys are reported and skipped. */
export function fieldsOf(ctx: ReadContext, map: YAMLMap, path: string): Field[] {
  const fields: Field[] = [];
  for (const pair of map.items as Pair<Node | null, Node | null>[]) {
    const keyNode = pair.key;
    if (keyNode === null || !isScalar(keyNode) || keyNode.value === null || typeof keyNode.value === 'object') {
      report(ctx, keyNode ?? map, path, 'POLICY_TYPE', `${path || 'document'} has a key that is not a plain string`);
      continue;
    }
    fields.push({ key: String(keyNode.value), keyNode, value: pair.value });
  }
  return fields;
}

/** Reports every field not in `allowed` as POLICY_UNKNOWN_KEY; returns the known ones by name. */
export function knownFields(
  ctx: ReadContext,
  map: YAMLMap,
  path: string,
  allowed: readonly string[],
): Map<string, Field> {
  const known = new Map<string, Field>();
  for (const field of fieldsOf(ctx, map, path)) {
    if (allowed.includes(field.key)) known.set(field.key, field);
    else report(ctx, field.keyNode, childPath(path, field.key), 'POLICY_UNKNOWN_KEY', `unknown key ${field.key}`);
  }
  return known;
}

export function scalarValue(ctx: ReadContext, node: Node | null): unknown {
  const resolved = resolve(ctx, node);
  if (resolved === null) return null;
  return isScalar(resolved) ? resolved.value : resolved;
}

export function readString(ctx: ReadContext, field: Field | undefined, path: string): string | undefined {
  if (field === undefined) return undefined;
  const value = scalarValue(ctx, field.value);
  if (typeof value === 'string') return value;
  report(ctx, field.value ?? field.keyNode, path, 'POLICY_TYPE', `${leaf(path)} must be a string`);
  return undefined;
}

export function readBool(ctx: ReadContext, field: Field | undefined, path: string): boolean | undefined {
  if (field === undefined) return undefined;
  const value = scalarValue(ctx, field.value);
  if (typeof value === 'boolean') return value;
  report(ctx, field.value ?? field.keyNode, path, 'POLICY_TYPE', `${leaf(path)} must be true or false`);
  return undefined;
}

/** A positive integer; `min`/`max` bound it (reported with `code`). */
export function readInt(
  ctx: ReadContext,
  field: Field | undefined,
  path: string,
  bounds: { min: number; max: number; code: ErrorCode },
): number | undefined {
  if (field === undefined) return undefined;
  return intAt(ctx, field.value ?? field.keyNode, path, bounds);
}

export function intAt(
  ctx: ReadContext,
  node: Node | null,
  path: string,
  bounds: { min: number; max: number; code: ErrorCode },
): number | undefined {
  const value = scalarValue(ctx, node);
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    report(ctx, node, path, bounds.code === 'POLICY_PORT_INVALID' ? bounds.code : 'POLICY_TYPE', `${leaf(path)} must be an integer`);
    return undefined;
  }
  if (value < bounds.min || value > bounds.max) {
    report(ctx, node, path, bounds.code, `${leaf(path)} must be ${bounds.min}-${bounds.max}, got ${value}`);
    return undefined;
  }
  return value;
}

/** A list of strings; non-strings are reported and dropped. */
export function readStringList(ctx: ReadContext, field: Field | undefined, path: string): string[] | undefined {
  if (field === undefined) return undefined;
  const seq = readSeq(ctx, field.value, path);
  if (seq === undefined) return undefined;
  const out: string[] = [];
  (seq.items as (Node | null)[]).forEach((item, i) => {
    const value = scalarValue(ctx, item);
    if (typeof value === 'string') out.push(value);
    else report(ctx, item ?? seq, childPath(path, i), 'POLICY_TYPE', `${leaf(childPath(path, i))} must be a string`);
  });
  return out;
}

export function seqItems(seq: YAMLSeq): (Node | null)[] {
  return seq.items as (Node | null)[];
}
