// The policy document as it crosses from parse-worker.ts to the main thread: JSON text cut per entry and per
// endpoint, so no single step (a structured-clone decode, a JSON.parse, building YAML nodes) grows with the
// policy. plainPolicySteps reads it back into YAML nodes and runs the usual readers over them.

import { Document, LineCounter, type Node, Pair, Scalar, YAMLMap, YAMLSeq } from 'yaml';
import type { Issue } from '../errors.js';
import type { Steps } from './compile.js';
import { readPolicySteps } from './parse.js';
import type { Policy } from './types.js';
import type { ReadContext } from './yaml-source.js';

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

/** Worker side: a validated document's JS value (yaml's toJS) cut into JSON pieces. */
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

/** Main side: the readers over YAML nodes built from the pieces; issues were found there, warnings come from there. */
export function* plainPolicySteps(plain: PlainPolicy, warnings: readonly Issue[], source: string | undefined): Steps<Policy> {
  const doc = new Document(null);
  const contents = doc.createNode(JSON.parse(plain.root)) as Node;
  if (plain.entries !== undefined && contents instanceof YAMLMap) {
    const policies = new YAMLMap();
    for (const { key, entry, endpoints } of plain.entries) {
      const value = doc.createNode(JSON.parse(entry)) as Node;
      if (endpoints !== undefined && value instanceof YAMLMap) {
        const seq = new YAMLSeq();
        for (const endpoint of endpoints) {
          seq.items.push(doc.createNode(JSON.parse(endpoint)));
          yield;
        }
        value.items.push(new Pair(new Scalar('endpoints'), seq));
      }
      policies.items.push(new Pair(new Scalar(key), value));
      yield;
    }
    contents.items.push(new Pair(new Scalar('network_policies'), policies));
  }
  const ctx: ReadContext = { doc, lineCounter: new LineCounter(), issues: [], warnings: [], source };
  return yield* readPolicySteps(ctx, contents, { checkAmbiguity: false, warnings });
}
