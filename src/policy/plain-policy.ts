// The policy document as it crosses from parse-worker.ts to the main thread: JSON text cut per entry and per
// endpoint, so no single step (a structured-clone decode, a JSON.parse, building YAML nodes) grows with the
// policy. plainPolicySteps reads it back into the readers' nodes and runs the usual readers over them.

import type { Issue } from '../shared/errors.js';
import type { Steps } from './compile.js';
import { readPolicySteps } from './parse.js';
import type { Policy } from './types.js';
import { fromPlain, isMap, type Node, type Pair, plainPair, readContext } from './yaml-source.js';

export interface PlainPolicy {
  /** JSON of the document without network_policies. */
  readonly root: string;
  /** network_policies when it is a map; each entry without its endpoints, then each endpoint. */
  readonly entries: readonly PlainEntry[] | undefined;
}

interface PlainEntry {
  readonly key: string;
  readonly entry: string;
  readonly endpoints: readonly string[] | undefined;
}

type Json = Record<string, unknown>;

const isRecord = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Worker side: a validated document's plain value (yaml-source.ts toPlain) cut into JSON pieces. */
export function toPlainPolicy(data: unknown): PlainPolicy {
  if (!isRecord(data)) return { root: JSON.stringify(data), entries: undefined };
  const { network_policies: policies, ...rest } = data;
  if (!isRecord(policies)) return { root: JSON.stringify(data), entries: undefined };
  const entries = Object.entries(policies).map(([key, value]): PlainEntry => {
    if (!isRecord(value) || !Array.isArray(value.endpoints)) return { key, entry: JSON.stringify(value), endpoints: undefined };
    const { endpoints, ...fields } = value;
    return { key, entry: JSON.stringify(fields), endpoints: endpoints.map((e: unknown) => JSON.stringify(e)) };
  });
  return { root: JSON.stringify(rest), entries };
}

/** Main side: the readers over nodes built from the pieces; issues were found there, warnings come from there. */
export function* plainPolicySteps(plain: PlainPolicy, warnings: readonly Issue[], source: string | undefined, middlewareServices: readonly string[] = []): Steps<Policy> {
  const root = fromPlain(JSON.parse(plain.root));
  let contents = root;
  if (plain.entries !== undefined && isMap(root)) {
    const policies: Pair[] = [];
    for (const { key, entry, endpoints } of plain.entries) {
      let value = fromPlain(JSON.parse(entry));
      if (endpoints !== undefined && isMap(value)) {
        const items: (Node | null)[] = [];
        for (const endpoint of endpoints) {
          items.push(fromPlain(JSON.parse(endpoint)));
          yield;
        }
        value = { ...value, items: [...value.items, plainPair('endpoints', { kind: 'seq', items, offset: -1 })] };
      }
      policies.push(plainPair(key, value));
      yield;
    }
    contents = { ...root, items: [...root.items, plainPair('network_policies', { kind: 'map', items: policies, offset: -1 })] };
  }
  return yield* readPolicySteps(readContext('', source, middlewareServices), contents, { checkAmbiguity: false, warnings });
}
