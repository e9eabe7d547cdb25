// Size limits on one policy, checked before the expensive work they bound: bytes before the YAML parser runs,
// aliases before anything expands them, endpoints and rules (counted through aliases) before any is read.
// Pure; each breach is one issue with its own code, inside the usual POLICY_INVALID (docs/policy.md#limits).

import type { Issue } from '../shared/errors.js';
import { isMap, isSeq, type MapNode, mapGet, type Node, type ReadContext, report } from './yaml-source.js';

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
 * YAML alias uses, each weighted by the aliases inside its anchor (yaml-load.ts counts them). Shared rule
 * lists need a few dozen; nested aliases are how a small file expands to gigabytes.
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
export function aliasLimitIssue(expansions: number, source: string | undefined): Issue | undefined {
  if (expansions <= MAX_POLICY_ALIAS_COUNT) return undefined;
  return {
    code: 'POLICY_LIMIT_ALIASES',
    path: '',
    message: `YAML aliases expand ${expansions} times, past MAX_POLICY_ALIAS_COUNT (${MAX_POLICY_ALIAS_COUNT})`,
    line: 1,
    column: 1,
    ...(source === undefined ? {} : { source }),
  };
}

/** Counts endpoints and rules through aliases, without reading them; reports POLICY_LIMIT_ENDPOINTS / _RULES. */
export function checkCounts(ctx: ReadContext, policies: MapNode): void {
  let endpoints = 0;
  let rules = 0;
  // Bad keys and shapes are left to the readers, which report each once.
  for (const pair of policies.items) {
    const list = isMap(pair.value) ? mapGet(pair.value, 'endpoints') : undefined;
    if (!isSeq(list)) continue;
    endpoints += list.items.length;
    if (endpoints > MAX_POLICY_ENDPOINTS) break;
    for (const item of list.items) {
      if (isMap(item)) rules += lengthOf(mapGet(item, 'rules')) + lengthOf(mapGet(item, 'deny_rules'));
    }
  }
  if (endpoints > MAX_POLICY_ENDPOINTS) {
    report(ctx, policies, 'network_policies', 'POLICY_LIMIT_ENDPOINTS',
      `more than MAX_POLICY_ENDPOINTS (${MAX_POLICY_ENDPOINTS}) endpoints; split the policy or use wildcards`);
  } else if (rules > MAX_POLICY_RULES) {
    report(ctx, policies, 'network_policies', 'POLICY_LIMIT_RULES', `${rules} rules; the limit is MAX_POLICY_RULES (${MAX_POLICY_RULES})`);
  }
}

function lengthOf(node: Node | null | undefined): number {
  return isSeq(node) ? node.items.length : 0;
}
