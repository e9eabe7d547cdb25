// Size limits on one policy, checked before the expensive work they bound: bytes before the YAML parser runs,
// aliases before anything expands them, endpoints and rules (counted through aliases) before any is read.
// Pure; each breach is one issue with its own code, inside the usual POLICY_INVALID (docs/policy.md#limits).

import { type Document, isMap, isSeq, type Node, type YAMLMap } from 'yaml';
import type { Issue } from '../errors.js';
import { type ReadContext, report, resolve } from './yaml-source.js';

/**
 * Largest policy text, in UTF-8 bytes. A policy at MAX_POLICY_ENDPOINTS with rules runs to about 1.1 MB; four
 * times that leaves room for comments and long rule lists while keeping a parse to a few seconds off the loop.
 */
export const MAX_POLICY_BYTES = 4 * 1024 * 1024;
/**
 * Endpoints across all entries. The largest policy we ship or have seen has a handful; 10,000 covers a fleet
 * wide allow-list of every internal service, and compiles in well under a second.
 */
export const MAX_POLICY_ENDPOINTS = 10_000;
/** rules plus deny_rules entries across all endpoints: five per endpoint at the endpoint limit. */
export const MAX_POLICY_RULES = 50_000;
/**
 * YAML alias expansions, weighted by the aliases inside each target (the yaml library's maxAliasCount). Shared
 * rule lists need a few dozen; nested aliases are how a small file expands to gigabytes.
 */
export const MAX_POLICY_ALIAS_COUNT = 100;

/** The POLICY_LIMIT_BYTES issue for a policy of `bytes` bytes, or undefined when it fits. */
export function bytesLimitIssue(bytes: number, source: string | undefined): Issue | undefined {
  if (bytes <= MAX_POLICY_BYTES) return undefined;
  return {
    code: 'POLICY_LIMIT_BYTES',
    path: '',
    message: `the policy is ${bytes} bytes; the limit is MAX_POLICY_BYTES (${MAX_POLICY_BYTES})`,
    line: 1,
    column: 1,
    ...(source === undefined ? {} : { source }),
  };
}

/** The POLICY_LIMIT_ALIASES issue when expanding the document's aliases would pass MAX_POLICY_ALIAS_COUNT. */
export function aliasLimitIssue(doc: Document, source: string | undefined): Issue | undefined {
  try {
    // Expanding is the only way to count aliases inside aliases; a document without an anchor has none.
    if (!hasAnchor(doc.contents as Node | null)) return undefined;
    doc.toJS({ maxAliasCount: MAX_POLICY_ALIAS_COUNT });
    return undefined;
  } catch {
    return {
      code: 'POLICY_LIMIT_ALIASES',
      path: '',
      message: `YAML aliases expand past MAX_POLICY_ALIAS_COUNT (${MAX_POLICY_ALIAS_COUNT})`,
      line: 1,
      column: 1,
      ...(source === undefined ? {} : { source }),
    };
  }
}

/** Counts endpoints and rules through aliases, without reading them; reports POLICY_LIMIT_ENDPOINTS / _RULES. */
export function checkCounts(ctx: ReadContext, policies: YAMLMap): void {
  let endpoints = 0;
  let rules = 0;
  // Bad keys and shapes are left to the readers, which report each once.
  for (const pair of policies.items) {
    const list = seqOf(ctx, mapOf(ctx, pair.value)?.get('endpoints', true));
    if (list === undefined) continue;
    endpoints += list.length;
    if (endpoints > MAX_POLICY_ENDPOINTS) break;
    for (const item of list) {
      const endpoint = mapOf(ctx, item);
      rules += (seqOf(ctx, endpoint?.get('rules', true))?.length ?? 0) + (seqOf(ctx, endpoint?.get('deny_rules', true))?.length ?? 0);
    }
  }
  if (endpoints > MAX_POLICY_ENDPOINTS) {
    report(ctx, policies, 'network_policies', 'POLICY_LIMIT_ENDPOINTS',
      `more than MAX_POLICY_ENDPOINTS (${MAX_POLICY_ENDPOINTS}) endpoints; split the policy or use wildcards`);
  } else if (rules > MAX_POLICY_RULES) {
    report(ctx, policies, 'network_policies', 'POLICY_LIMIT_RULES', `${rules} rules; the limit is MAX_POLICY_RULES (${MAX_POLICY_RULES})`);
  }
}

function mapOf(ctx: ReadContext, node: unknown): YAMLMap | undefined {
  const resolved = resolve(ctx, (node ?? null) as Node | null);
  return resolved !== null && isMap(resolved) ? resolved : undefined;
}

function seqOf(ctx: ReadContext, node: unknown): readonly unknown[] | undefined {
  const resolved = resolve(ctx, (node ?? null) as Node | null);
  return resolved !== null && isSeq(resolved) ? resolved.items : undefined;
}

function hasAnchor(node: Node | null): boolean {
  if (node === null) return false;
  if (node.anchor !== undefined) return true;
  if (isMap(node)) return node.items.some((pair) => hasAnchor(pair.key as Node | null) || hasAnchor(pair.value as Node | null));
  if (isSeq(node)) return node.items.some((item) => hasAnchor(item as Node | null));
  return false;
}
