// The request-level decisions of each policy that continue from a connection-level allow (`after`): decide() is pure,
// and with `after` it reads nothing of the intent but the method, path and query (the host, port and identity are
// the allow's, and its endpoints are the ones matched), so the same request line under the same allow gets the same
// frozen decision. A request with a read body (GraphQL, JSON-RPC) or a process claim is always decided anew. Used by
// the l7 stage.

import { NOT_LOOKED_UP } from '../policy/binary-identity.js';
import { decide } from '../policy/decide.js';
import type { Decision, EgressIntent, Policy } from '../policy/types.js';

/** Decisions remembered per policy; the memo is emptied when it holds this many. */
export const MAX_REMEMBERED_L7_DECISIONS = 2_048;
/** Requests whose path and query together are longer are decided anew: the decision's texts hold the path. */
export const MAX_REMEMBERED_L7_TARGET_CHARS = 512;
/** Method and query variants kept per path under one allow; the oldest goes first. */
const MAX_VARIANTS_PER_PATH = 8;

interface Variant {
  /** The allow's own (the chain asks for no other); compared all the same, as decide()'s texts name them. */
  readonly host: string;
  readonly port: number;
  readonly method: string;
  readonly query: string | undefined;
  readonly decision: Decision;
}

interface Remembered {
  /** allow -> path -> its method and query variants. */
  byAllow: WeakMap<Decision, Map<string, Variant[]>>;
  size: number;
}

/**
 * decide() for request-level intents, remembered where the answer cannot differ; every other intent is decided.
 * `evaluate` is what decides (the l7 stage hands a timed decide(): a remembered answer is not a decision to time).
 */
export function createL7Decisions(evaluate: (policy: Policy, intent: EgressIntent) => Decision = decide): (policy: Policy, intent: EgressIntent) => Decision {
  // A reload swaps in a new policy object: its decisions start empty, the old ones go with it.
  const byPolicy = new WeakMap<Policy, Remembered>();
  return function decideL7(policy, intent) {
    const { after, method, path, query, identity } = intent;
    // decide() continues from `after` only on these terms (policy/decide.ts decideEgress); anything else is decided in full.
    const continues = after !== undefined && after.verdict !== 'deny' && after.layer === 'l4' && after.generation === policy.generation;
    if (!continues || method === undefined || path === undefined || intent.graphql !== undefined || intent.jsonRpc !== undefined) return evaluate(policy, intent);
    // A process claim's allow is made afresh for every request (l4-decisions.ts): nothing would be asked twice.
    if (identity !== undefined && identity !== NOT_LOOKED_UP) return evaluate(policy, intent);
    if (path.length + (query?.length ?? 0) > MAX_REMEMBERED_L7_TARGET_CHARS) return evaluate(policy, intent);
    let memo = byPolicy.get(policy);
    if (memo === undefined) {
      memo = { byAllow: new WeakMap(), size: 0 };
      byPolicy.set(policy, memo);
    }
    let paths = memo.byAllow.get(after);
    const variants = paths?.get(path);
    if (variants !== undefined) {
      for (let i = 0; i < variants.length; i++) {
        const known = variants[i] as Variant;
        if (known.method === method && known.query === query && known.host === intent.host && known.port === intent.port) return known.decision;
      }
    }
    const decision = evaluate(policy, intent);
    if (memo.size >= MAX_REMEMBERED_L7_DECISIONS) {
      memo.byAllow = new WeakMap();
      memo.size = 0;
      paths = undefined;
    }
    if (paths === undefined) {
      paths = new Map();
      memo.byAllow.set(after, paths);
    }
    const kept = paths.get(path);
    const variant = { host: intent.host, port: intent.port, method, query, decision };
    if (kept === undefined) paths.set(path, [variant]);
    else if (kept.length < MAX_VARIANTS_PER_PATH) kept.push(variant);
    else {
      kept.shift();
      kept.push(variant);
      return decision;
    }
    memo.size++;
    return decision;
  };
}
