// The policy document's nodes (built by yaml-load.ts, or from plain data by fromPlain) and the readers over
// them, collecting problems with their YAML path and 1-based line and column. Readers take (node, path, ctx),
// report and carry on; nothing here throws or knows the policy schema.

import type { ErrorCode, Issue } from '../shared/errors.js';

/** A scalar as the YAML 1.2 core schema reads it: string, number, boolean or null. */
export interface ScalarNode {
  readonly kind: 'scalar';
  readonly value: unknown;
  /** UTF-16 offset into the text; -1 for nodes built from plain data (plain-policy.ts). */
  readonly offset: number;
}

export interface SeqNode {
  readonly kind: 'seq';
  readonly items: readonly (Node | null)[];
  readonly offset: number;
}

export interface Pair {
  readonly key: Node | null;
  readonly value: Node | null;
}

export interface MapNode {
  readonly kind: 'map';
  readonly items: readonly Pair[];
  readonly offset: number;
}

/** A node of the policy document; aliases are already resolved to their anchor's node (yaml-load.ts). */
export type Node = ScalarNode | SeqNode | MapNode;

export const isMap = (node: Node | null | undefined): node is MapNode => node?.kind === 'map';
export const isSeq = (node: Node | null | undefined): node is SeqNode => node?.kind === 'seq';
export const isScalar = (node: Node | null | undefined): node is ScalarNode => node?.kind === 'scalar';

export interface ReadContext {
  /** The text offsets point into ('' for plain data: no positions). */
  readonly text: string;
  readonly issues: Issue[];
  readonly warnings: Issue[];
  readonly source: string | undefined;
  /** Offsets where each line starts, filled on the first report: a policy without problems never pays. */
  readonly lineStarts: number[];
}

export function readContext(text: string, source: string | undefined): ReadContext {
  return { text, issues: [], warnings: [], source, lineStarts: [] };
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
  const offset = node?.offset ?? -1;
  if (offset < 0 || offset > ctx.text.length) return {};
  return linePos(ctx, offset);
}

function linePos(ctx: ReadContext, offset: number): { line: number; column: number } {
  const starts = ctx.lineStarts;
  if (starts.length === 0) {
    starts.push(0);
    for (let i = ctx.text.indexOf('\n'); i >= 0; i = ctx.text.indexOf('\n', i + 1)) starts.push(i + 1);
  }
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] ?? 0) <= offset) lo = mid;
    else hi = mid - 1;
  }
  return { line: lo + 1, column: offset - (starts[lo] ?? 0) + 1 };
}

/** The node at `path` (map keys and sequence indexes) under `root`, or undefined where the document has none. */
export function nodeAt(root: Node | null, path: readonly (string | number)[]): Node | undefined {
  let node: Node | null | undefined = root;
  for (const step of path) {
    if (typeof step === 'number') node = isSeq(node) ? node.items[step] : undefined;
    else node = isMap(node) ? node.items.find((pair) => isScalar(pair.key) && pair.key.value === step)?.value : undefined;
    if (node === undefined || node === null) return undefined;
  }
  return node ?? undefined;
}

export function readMap(ctx: ReadContext, node: Node | null, path: string, what = 'a map'): MapNode | undefined {
  if (isMap(node)) return node;
  report(ctx, node, path, 'POLICY_TYPE', `${leaf(path) || 'the document'} must be ${what}`);
  return undefined;
}

export function readSeq(ctx: ReadContext, node: Node | null, path: string): SeqNode | undefined {
  if (isSeq(node)) return node;
  report(ctx, node, path, 'POLICY_TYPE', `${leaf(path)} must be a list`);
  return undefined;
}

/** The fields of a map in document order. Non-scalar keys are reported and skipped. */
export function fieldsOf(ctx: ReadContext, map: MapNode, path: string): Field[] {
  const fields: Field[] = [];
  const seen = new Set<string>();
  for (const pair of map.items) {
    const keyNode = pair.key;
    if (keyNode === null || !isScalar(keyNode) || keyNode.value === null || typeof keyNode.value === 'object') {
      report(ctx, keyNode ?? map, path, 'POLICY_TYPE', `${path || 'document'} has a key that is not a plain string`);
      continue;
    }
    const key = String(keyNode.value);
    // YAML keeps 80 and "80" apart; read as names they are one key, and the later one must not win silently.
    if (seen.has(key)) {
      report(ctx, keyNode, childPath(path, key), 'POLICY_YAML_SYNTAX', `duplicate key ${key}`);
      continue;
    }
    seen.add(key);
    fields.push({ key, keyNode, value: pair.value });
  }
  return fields;
}

/** Reports every field not in `allowed` as POLICY_UNKNOWN_KEY; returns the known ones by name. */
export function knownFields(
  ctx: ReadContext,
  map: MapNode,
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

export function scalarValue(node: Node | null): unknown {
  if (node === null) return null;
  return isScalar(node) ? node.value : node;
}

export function readString(ctx: ReadContext, field: Field | undefined, path: string): string | undefined {
  if (field === undefined) return undefined;
  const value = scalarValue(field.value);
  if (typeof value === 'string') return value;
  report(ctx, field.value ?? field.keyNode, path, 'POLICY_TYPE', `${leaf(path)} must be a string`);
  return undefined;
}

export function readBool(ctx: ReadContext, field: Field | undefined, path: string): boolean | undefined {
  if (field === undefined) return undefined;
  const value = scalarValue(field.value);
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
  const value = scalarValue(node);
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
    const value = scalarValue(item);
    if (typeof value === 'string') out.push(value);
    else report(ctx, item ?? seq, childPath(path, i), 'POLICY_TYPE', `${leaf(childPath(path, i))} must be a string`);
  });
  return out;
}

export function seqItems(seq: SeqNode): readonly (Node | null)[] {
  return seq.items;
}

/** The value under a string key, or undefined when the map has none. */
export function mapGet(map: MapNode, key: string): Node | null | undefined {
  for (const pair of map.items) if (isScalar(pair.key) && pair.key.value === key) return pair.value;
  return undefined;
}

/** The node's value as plain data (maps as objects with string keys), for the parse worker's reply. */
export function toPlain(node: Node | null): unknown {
  if (node === null) return null;
  if (node.kind === 'scalar') return node.value;
  if (node.kind === 'seq') return node.items.map(toPlain);
  const out: Record<string, unknown> = {};
  for (const pair of node.items) {
    // defineProperty: a key named __proto__ stays a key.
    Object.defineProperty(out, String(toPlain(pair.key)), { value: toPlain(pair.value), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** `key: value` without a position (nodes built from plain data). */
export function plainPair(key: string, value: Node | null): Pair {
  return { key: { kind: 'scalar', value: key, offset: -1 }, value };
}

/** Nodes for plain data (JSON.parse's output), without positions. */
export function fromPlain(value: unknown): Node | null {
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) return { kind: 'seq', items: value.map(fromPlain), offset: -1 };
  if (typeof value === 'object') {
    return { kind: 'map', items: Object.entries(value).map(([key, v]) => plainPair(key, fromPlain(v))), offset: -1 };
  }
  return { kind: 'scalar', value, offset: -1 };
}
