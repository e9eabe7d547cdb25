// YAML text -> the policy readers' nodes (yaml-source.ts): js-yaml's event parser gives every node's offset, its
// constructor gives every scalar's value under the YAML 1.2 core schema, and one walk over both in step builds
// the tree. Aliases are resolved here to the anchored node itself (shared, never copied), so the readers never
// see one and a nested alias costs nothing to build; the expansions they stand for are counted for the limit.
// Why js-yaml and not the `yaml` library: docs/policy.md#the-yaml-parser (7x faster at 10,000 endpoints).

import {
  CORE_SCHEMA,
  constructFromEvents,
  EVENT_ID,
  type Event,
  parseEvents,
  realMapTag,
  SCALAR_STYLE,
  type ScalarEvent,
  YAMLException,
} from 'js-yaml';
import type { ErrorCode } from '../shared/errors.js';
import type { MapNode, Node, Pair, SeqNode } from './yaml-source.js';

/**
 * Maps keep their keys as written (`80:` is the number 80, which the readers refuse as a key) and in document
 * order; no merge keys (`<<` is an ordinary key, as in YAML 1.2), no timestamps, no binary.
 */
const SCHEMA = CORE_SCHEMA.withTags(realMapTag);

/** Collections nested deeper than this are a syntax error: a policy needs eight levels. */
const MAX_YAML_DEPTH = 64;
/**
 * Entries of one YAML list or map. OpenShell's parser refuses more, so a single `rules:` list of 10,001 entries
 * fails there; boundary refuses it too rather than load a file OpenShell would not (docs/policy.md#limits).
 */
export const MAX_YAML_COLLECTION_ENTRIES = 10_000;
/**
 * Parser events of one document (each scalar, alias, and the start and end of each list and map), OpenShell's
 * budget. A policy at MAX_POLICY_ENDPOINTS without rules is about 145,000.
 */
export const MAX_YAML_EVENTS = 300_000;
/** The merge key of YAML 1.1, refused in every map: no reader ever sees fields it did not write out. */
const MERGE_KEY = '<<';

export interface LoadedYaml {
  /** The one document's root; null for an empty text. */
  readonly contents: Node | null;
  /** Alias uses, each weighted by the aliases inside its anchor (what expanding them all would cost). */
  readonly aliasExpansions: number;
}

/**
 * A problem of the text as YAML: js-yaml's reason and, where it has one, its 1-based position, or the offset of
 * the node a limit or the merge-key rule refused; `code` when it is not a syntax error.
 */
export interface YamlProblem {
  readonly message: string;
  readonly line?: number;
  readonly column?: number;
  readonly offset?: number;
  readonly code?: ErrorCode;
}

export class YamlSyntaxError extends Error {
  readonly problem: YamlProblem;

  constructor(problem: YamlProblem) {
    super(problem.message);
    this.problem = problem;
  }
}

/**
 * Parses one YAML document; throws YamlSyntaxError for anything js-yaml refuses (duplicate keys included), a
 * merge key, and a document past MAX_YAML_EVENTS or with a collection past MAX_YAML_COLLECTION_ENTRIES.
 */
export function loadYaml(text: string): LoadedYaml {
  let events: Event[];
  let values: unknown[];
  try {
    events = parseEvents(text, { maxDepth: MAX_YAML_DEPTH });
    if (events.length > MAX_YAML_EVENTS) {
      throw new YamlSyntaxError({
        message: `the YAML has ${events.length} parser events, past MAX_YAML_EVENTS (${MAX_YAML_EVENTS})`,
        line: 1,
        column: 1,
        code: 'POLICY_LIMIT_YAML',
      });
    }
    values = constructFromEvents(events, { source: text, schema: SCHEMA });
  } catch (err) {
    if (!(err instanceof YAMLException)) throw err;
    const mark = err.mark;
    throw new YamlSyntaxError({
      message: err.reason,
      ...(mark === undefined ? {} : { line: mark.line + 1, column: mark.column + 1 }),
    });
  }
  if (values.length > 1) throw new YamlSyntaxError({ message: 'a policy is one YAML document; this text has several' });
  if (values.length === 0) return { contents: null, aliasExpansions: 0 };
  const walk = new Walk(text, events);
  // events[0] is the document; its content follows.
  walk.index = 1;
  const contents = walk.node(values[0]);
  return { contents, aliasExpansions: walk.expansions };
}

class Walk {
  index = 0;
  expansions = 0;
  /** Offset just past the last event read: where an empty scalar (`key:` with no value) is placed. */
  private last = 0;
  private readonly anchors = new Map<string, { readonly node: Node | null; readonly weight: number }>();
  private readonly text: string;
  private readonly events: readonly Event[];

  constructor(text: string, events: readonly Event[]) {
    this.text = text;
    this.events = events;
  }

  node(value: unknown): Node | null {
    const event = this.events[this.index++];
    if (event === undefined) throw mismatch();
    if (event.type === EVENT_ID.ALIAS) {
      const target = this.anchors.get(this.text.slice(event.anchorStart, event.anchorEnd));
      if (target === undefined) throw mismatch();
      this.expansions += target.weight;
      this.last = event.anchorEnd;
      return target.node;
    }
    const before = this.expansions;
    let built: Node | null;
    if (event.type === EVENT_ID.SCALAR) built = this.scalar(event, value);
    else if (event.type === EVENT_ID.SEQUENCE && Array.isArray(value)) built = this.sequence(event.start, value);
    else if (event.type === EVENT_ID.MAPPING && value instanceof Map) built = this.mapping(event.start, value);
    else throw mismatch();
    if (event.anchorStart >= 0) {
      this.anchors.set(this.text.slice(event.anchorStart, event.anchorEnd), { node: built, weight: 1 + this.expansions - before });
    }
    return built;
  }

  private scalar(event: ScalarEvent, value: unknown): Node | null {
    const start = firstOffset(event);
    if (start < 0) {
      // Nothing written at all: the readers treat it as an absent value, as for `key:` at a line's end.
      if (value === null) return null;
      return { kind: 'scalar', value, offset: this.last };
    }
    this.last = event.valueEnd >= 0 ? event.valueEnd : start;
    return { kind: 'scalar', value, offset: start };
  }

  private sequence(offset: number, values: readonly unknown[]): SeqNode {
    this.last = offset;
    if (values.length > MAX_YAML_COLLECTION_ENTRIES) throw tooMany('list', values.length, offset);
    const items: (Node | null)[] = [];
    for (const value of values) items.push(this.node(value));
    this.pop();
    return { kind: 'seq', items, offset };
  }

  private mapping(offset: number, values: ReadonlyMap<unknown, unknown>): MapNode {
    this.last = offset;
    if (values.size > MAX_YAML_COLLECTION_ENTRIES) throw tooMany('map', values.size, offset);
    const items: Pair[] = [];
    for (const [key, value] of values) {
      const keyNode = this.node(key);
      // Quoted too: a key that reads as a merge in one parser and as a name in another is refused in both spellings.
      if (key === MERGE_KEY) {
        throw new YamlSyntaxError({ message: 'YAML merge keys (<<) are not supported: write the fields out', offset: keyNode?.offset ?? offset });
      }
      items.push({ key: keyNode, value: this.node(value) });
    }
    this.pop();
    return { kind: 'map', items, offset };
  }

  private pop(): void {
    if (this.events[this.index++]?.type !== EVENT_ID.POP) throw mismatch();
  }
}

/** Where a scalar's text starts: its opening quote when quoted; -1 when nothing was written. */
function firstOffset(event: ScalarEvent): number {
  if (event.valueStart < 0) return -1;
  const quoted = event.style === SCALAR_STYLE.SINGLE_QUOTED || event.style === SCALAR_STYLE.DOUBLE_QUOTED;
  return quoted ? event.valueStart - 1 : event.valueStart;
}

function tooMany(kind: 'list' | 'map', entries: number, offset: number): YamlSyntaxError {
  return new YamlSyntaxError({
    message: `a YAML ${kind} has ${entries} entries, past MAX_YAML_COLLECTION_ENTRIES (${MAX_YAML_COLLECTION_ENTRIES})`,
    offset,
    code: 'POLICY_LIMIT_YAML',
  });
}

/** The events and the constructed values disagree: a tag outside the core schema built something else. */
function mismatch(): YamlSyntaxError {
  return new YamlSyntaxError({ message: 'unsupported YAML: use plain maps, lists and scalars' });
}
