// V13: endpoints that can match the same name on the same port must agree on tls and allowed_ips; inspected
// endpoints that can take the same request must also agree on protocol, enforcement and credential settings.
// Candidate pairs come from the same exact-host and suffix buckets as the host index, not from all pairs.

import type { ReadContext } from './yaml-source.js';
import { report } from './yaml-source.js';
import type { EndpointDraft } from './validate-endpoint.js';
import { hostPatternsOverlap } from './match.js';

export interface PlacedDraft {
  readonly draft: EndpointDraft;
  /** Document order across the whole policy. */
  readonly order: number;
  readonly label: string;
}

/** Reports each ambiguous pair once, at the later endpoint, naming the earlier one. */
export function checkAmbiguity(ctx: ReadContext, placed: readonly PlacedDraft[]): void {
  const exact = new Map<string, PlacedDraft[]>();
  const wild = new Map<string, PlacedDraft[]>();
  const hostless: PlacedDraft[] = [];
  for (const p of placed) {
    const m = p.draft.matcher;
    if (m.kind === 'any') hostless.push(p);
    else if (m.kind === 'wildcard') push(wild, m.suffix, p);
    else push(exact, m.pattern ?? '', p);
  }
  const seen = new Set<string>();
  const check = (a: PlacedDraft, b: PlacedDraft): void => {
    if (a === b) return;
    const [first, second] = a.order < b.order ? [a, b] : [b, a];
    const key = `${first.order}:${second.order}`;
    if (seen.has(key)) return;
    seen.add(key);
    const problem = disagreement(first.draft, second.draft);
    if (problem === undefined) return;
    report(ctx, second.draft.node, second.draft.yamlPath, 'POLICY_AMBIGUOUS',
      `${second.label} and ${first.label} can match the same host and port but disagree on ${problem}`);
  };
  for (const group of exact.values()) pairsWithin(group, check);
  for (const [name, group] of exact) {
    if (group[0]?.draft.matcher.kind === 'ip') continue;
    for (let dot = name.indexOf('.'); dot >= 0; dot = name.indexOf('.', dot + 1)) {
      for (const w of wild.get(name.slice(dot + 1)) ?? []) {
        if (w.draft.matcher.matches(name)) for (const e of group) check(e, w);
      }
    }
  }
  for (const [suffix, group] of wild) {
    pairsWithin(group, (a, b) => hostPatternsOverlap(a.draft.matcher, b.draft.matcher) && check(a, b));
    for (let dot = suffix.indexOf('.'); dot >= 0; dot = suffix.indexOf('.', dot + 1)) {
      for (const shorter of wild.get(suffix.slice(dot + 1)) ?? []) {
        for (const w of group) if (hostPatternsOverlap(w.draft.matcher, shorter.draft.matcher)) check(w, shorter);
      }
    }
  }
  // The hostless form matches any name on its port; it only has to agree on tls (its allowed_ips is its point).
  for (const h of hostless) {
    for (const other of placed) {
      if (other === h || !sharePort(h.draft, other.draft) || h.draft.tls === other.draft.tls) continue;
      check(h, other);
    }
  }
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
  return undefined;
}

function sharePort(a: EndpointDraft, b: EndpointDraft): boolean {
  return a.ports.some((p) => b.ports.includes(p));
}

/**
 * Two path selectors tie for a request when equally specific and able to select a common path (docs/policy.md#endpoint-path-selector: a more
 * specific selector wins, so only ties are ambiguous). Overlap is judged on the literal prefix before any glob.
 */
function selectorsCollide(a: EndpointDraft, b: EndpointDraft): boolean {
  if (a.selectorSpecificity !== b.selectorSpecificity) return false;
  if (a.selectorSpecificity === 0) return true;
  const pa = literalPrefix(a.path ?? '');
  const pb = literalPrefix(b.path ?? '');
  return pa.startsWith(pb) || pb.startsWith(pa);
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

function pairsWithin(group: readonly PlacedDraft[], visit: (a: PlacedDraft, b: PlacedDraft) => unknown): void {
  for (let i = 0; i < group.length; i++) {
    for (let j = i + 1; j < group.length; j++) visit(group[i] as PlacedDraft, group[j] as PlacedDraft);
  }
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}
