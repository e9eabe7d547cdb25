// V13: endpoints that can match the same name on the same port must agree on tls and allowed_ips; inspected
// endpoints that can take the same request must also agree on protocol, enforcement, credential settings and
// mcp.versions.
// Candidate pairs come from the same exact-host and suffix buckets as the host index, and inside a bucket from
// an index by port and agreement key, so a valid policy costs linear time however many endpoints share a host.

import type { ReadContext } from './yaml-source.js';
import { report } from './yaml-source.js';
import type { EndpointDraft } from './validate-endpoint.js';
import { pathSelectorsOverlap } from './glob.js';
import { hostPatternsOverlap } from './match.js';

export interface PlacedDraft {
  readonly draft: EndpointDraft;
  /** Document order across the whole policy. */
  readonly order: number;
  readonly label: string;
}

/**
 * Ambiguous pairs reported before the check stops. Every pair is an error of its own, and n endpoints that all
 * disagree are n² pairs: listing a few hundred says what is wrong without the error growing quadratically.
 */
export const MAX_AMBIGUOUS_PAIRS_REPORTED = 200;

/** An endpoint with the keys two endpoints must share; computed once per endpoint, not once per pair. */
interface Keyed {
  readonly placed: PlacedDraft;
  /** tls and allowed_ips: must agree whenever two endpoints share a name and a port. */
  readonly wire: string;
  /** protocol, enforcement and credential settings: must agree when two inspected selectors tie. */
  readonly l7: string;
  readonly prefix: string;
}

/** One group's endpoints by port, then by wire key; inspected ones also by specificity and literal prefix. */
type GroupIndex = Map<number, Map<string, WireBucket>>;
interface WireBucket {
  readonly all: Keyed[];
  readonly bySpecificity: Map<number, SelectorBucket>;
}
interface SelectorBucket {
  /** literal prefix -> l7 key -> endpoints. */
  readonly byPrefix: Map<string, Map<string, Keyed[]>>;
  /** Distinct prefix lengths, so an ancestor lookup probes only lengths that exist. */
  readonly lengths: number[];
}

interface Found {
  readonly first: PlacedDraft;
  readonly second: PlacedDraft;
  readonly problem: string;
}

/** Reports each ambiguous pair once, at the later endpoint, naming the earlier one. */
export function checkAmbiguity(ctx: ReadContext, placed: readonly PlacedDraft[]): void {
  const keyed = new Map<PlacedDraft, Keyed>(placed.map((p) => [p, keyOf(p)]));
  const exact = new Map<string, Keyed[]>();
  const wild = new Map<string, Map<string, Keyed[]>>();
  const hostless: Keyed[] = [];
  for (const k of keyed.values()) {
    const m = k.placed.draft.matcher;
    if (m.kind === 'any') hostless.push(k);
    else if (m.kind === 'wildcard') push(bucketOf(wild, m.suffix), m.pattern ?? '', k);
    else push(exact, m.pattern ?? '', k);
  }
  const found = new Map<string, Found>();
  const full = (): boolean => found.size >= MAX_AMBIGUOUS_PAIRS_REPORTED;
  const consider = (a: PlacedDraft, b: PlacedDraft): void => {
    if (a === b || full()) return;
    const [first, second] = a.order < b.order ? [a, b] : [b, a];
    const key = `${first.order}:${second.order}`;
    if (found.has(key)) return;
    const problem = disagreement(first.draft, second.draft);
    if (problem !== undefined) found.set(key, { first, second, problem });
  };
  const indexes = new Map<readonly Keyed[], GroupIndex>();
  const indexOf = (group: readonly Keyed[]): GroupIndex => getOrCreate(indexes, group, () => buildIndex(group));
  // Every name one group matches, the other matches too: check both ways so each prefix relation is seen.
  const across = (a: readonly Keyed[], b: readonly Keyed[]): void => {
    for (const x of a) query(indexOf(b), x, consider);
    if (a !== b) for (const y of b) query(indexOf(a), y, consider);
  };
  for (const [name, group] of exact) {
    if (full()) break;
    across(group, group);
    if (group[0]?.placed.draft.matcher.kind === 'ip') continue;
    for (let dot = name.indexOf('.'); dot >= 0; dot = name.indexOf('.', dot + 1)) {
      for (const ws of wild.get(name.slice(dot + 1))?.values() ?? []) {
        if (ws[0]?.placed.draft.matcher.matches(name)) across(group, ws);
      }
    }
  }
  for (const [suffix, patterns] of wild) {
    const groups = [...patterns.values()];
    // Distinct patterns in one bucket are still compared pairwise; identical ones are one group.
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i] as Keyed[];
      across(g, g);
      for (let j = i + 1; j < groups.length; j++) if (overlap(g, groups[j] as Keyed[])) across(g, groups[j] as Keyed[]);
    }
    for (let dot = suffix.indexOf('.'); dot >= 0; dot = suffix.indexOf('.', dot + 1)) {
      for (const shorter of wild.get(suffix.slice(dot + 1))?.values() ?? []) {
        for (const g of groups) if (overlap(g, shorter)) across(g, shorter);
      }
    }
  }
  checkHostless(hostless, [...keyed.values()], consider);
  const pairs = [...found.values()].sort((a, b) => a.second.order - b.second.order || a.first.order - b.first.order);
  for (const { first, second, problem } of pairs) {
    report(ctx, second.draft.node, second.draft.yamlPath, 'POLICY_AMBIGUOUS',
      `${second.label} and ${first.label} can match the same host and port but disagree on ${problem}`);
  }
}

/** The hostless form matches any name on its port; it only has to agree on tls (its allowed_ips is its point). */
function checkHostless(hostless: readonly Keyed[], all: readonly Keyed[], visit: (a: PlacedDraft, b: PlacedDraft) => void): void {
  if (hostless.length === 0) return;
  const byPort = new Map<number, Map<string, Keyed[]>>();
  for (const k of all) for (const port of k.placed.draft.ports) push(bucketOf(byPort, port), k.placed.draft.tls, k);
  for (const h of hostless) {
    for (const port of h.placed.draft.ports) {
      for (const [tls, others] of byPort.get(port) ?? []) {
        if (tls !== h.placed.draft.tls) for (const o of others) visit(h.placed, o.placed);
      }
    }
  }
}

function buildIndex(group: readonly Keyed[]): GroupIndex {
  const index: GroupIndex = new Map();
  for (const k of group) {
    const d = k.placed.draft;
    for (const port of d.ports) {
      const bucket = getOrCreate(bucketOf(index, port), k.wire, (): WireBucket => ({ all: [], bySpecificity: new Map() }));
      bucket.all.push(k);
      if (!d.inspected) continue;
      const selectors = getOrCreate(bucket.bySpecificity, d.selectorSpecificity, (): SelectorBucket => ({ byPrefix: new Map(), lengths: [] }));
      const prefix = d.selectorSpecificity === 0 ? '' : k.prefix;
      if (!selectors.byPrefix.has(prefix) && !selectors.lengths.includes(prefix.length)) selectors.lengths.push(prefix.length);
      push(bucketOf(selectors.byPrefix, prefix), k.l7, k);
    }
  }
  return index;
}

/**
 * Visits the members of an indexed group that `x` may disagree with: a different wire key on a shared port, or
 * an inspected selector that ties with x's (equal specificity; the member's literal prefix starts x's).
 */
function query(index: GroupIndex, x: Keyed, visit: (a: PlacedDraft, b: PlacedDraft) => void): void {
  const d = x.placed.draft;
  for (const port of d.ports) {
    for (const [wire, bucket] of index.get(port) ?? []) {
      if (wire !== x.wire) {
        for (const y of bucket.all) visit(x.placed, y.placed);
        continue;
      }
      if (!d.inspected) continue;
      const selectors = bucket.bySpecificity.get(d.selectorSpecificity);
      if (selectors === undefined) continue;
      const prefix = d.selectorSpecificity === 0 ? '' : x.prefix;
      for (const length of selectors.lengths) {
        if (length > prefix.length) continue;
        for (const [l7, ys] of selectors.byPrefix.get(prefix.slice(0, length)) ?? []) {
          if (l7 !== x.l7) for (const y of ys) visit(x.placed, y.placed);
        }
      }
    }
  }
}

function overlap(a: readonly Keyed[], b: readonly Keyed[]): boolean {
  const ma = a[0]?.placed.draft.matcher;
  const mb = b[0]?.placed.draft.matcher;
  return ma !== undefined && mb !== undefined && hostPatternsOverlap(ma, mb);
}

function keyOf(placed: PlacedDraft): Keyed {
  const d = placed.draft;
  return {
    placed,
    wire: JSON.stringify([d.tls, d.allowedIps.join(',')]),
    l7: JSON.stringify([d.protocol, d.enforcement, credentialKey(d), mcpVersionsKey(d)]),
    prefix: literalPrefix(d.path ?? ''),
  };
}

function disagreement(a: EndpointDraft, b: EndpointDraft): string | undefined {
  if (!sharePort(a, b)) return undefined;
  if (a.tls !== b.tls) return 'tls';
  if (a.hostKind === 'any' || b.hostKind === 'any') return undefined;
  if (a.allowedIps.join(',') !== b.allowedIps.join(',')) return 'allowed_ips';
  if (!a.inspected || !b.inspected || !selectorsCollide(a, b)) return undefined;
  if (a.protocol !== b.protocol) return 'protocol';
  if (a.enforcement !== b.enforcement) return 'enforcement';
  if (credentialKey(a) !== credentialKey(b)) return 'credential settings';
  if (mcpVersionsKey(a) !== mcpVersionsKey(b)) return 'mcp.versions';
  return undefined;
}

/** MCP endpoints taking one request select its revision from one list (docs/policy.md#mcp-protocol-revisions). */
function mcpVersionsKey(e: EndpointDraft): string {
  return e.protocol === 'mcp' ? e.options.mcpVersions.join(',') : '';
}

function sharePort(a: EndpointDraft, b: EndpointDraft): boolean {
  return a.ports.some((p) => b.ports.includes(p));
}

/**
 * Two path selectors tie for a request when equally specific and able to select a common path (docs/policy.md#endpoint-path-selector: a more
 * specific selector wins, so only ties are ambiguous). The literal prefixes before any glob must be one the other's
 * start (the index finds pairs by them), and then the selectors must share a path: `/api/` + `*` + `/read` and
 * `/api/` + `*` + `/list` tie and never meet.
 */
function selectorsCollide(a: EndpointDraft, b: EndpointDraft): boolean {
  if (a.selectorSpecificity !== b.selectorSpecificity) return false;
  if (a.selectorSpecificity === 0) return true;
  const pa = literalPrefix(a.path ?? '');
  const pb = literalPrefix(b.path ?? '');
  return (pa.startsWith(pb) || pb.startsWith(pa)) && pathSelectorsOverlap(a.path, b.path);
}

function literalPrefix(pattern: string): string {
  const i = pattern.search(/[*?[]/);
  return i < 0 ? pattern : pattern.slice(0, i);
}

function credentialKey(e: EndpointDraft): string {
  return JSON.stringify([
    e.credentialProvider ?? null,
    e.requestBodyCredentialRewrite,
    e.websocketCredentialRewrite,
    e.allowUninspectedCredentials,
    e.credentialSigning ?? null,
    e.signingService ?? null,
    e.signingRegion ?? null,
  ]);
}

function bucketOf<K, K2, V>(map: Map<K, Map<K2, V>>, key: K): Map<K2, V> {
  return getOrCreate(map, key, () => new Map<K2, V>());
}

function getOrCreate<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  const found = map.get(key);
  if (found !== undefined) return found;
  const made = make();
  map.set(key, made);
  return made;
}

function push<K, T>(map: Map<K, T[]>, key: K, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}
