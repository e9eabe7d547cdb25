// The connection-level decisions of each policy for the claims every request on a connection shares (no identity in
// endpoint-only mode, nothing looked up): decide() is pure, so a host:port asked again under the same policy object
// gets the same frozen decision. A process claim (its pid and path are in the decision) is always decided anew.
// Used by the l4 stage and CONNECT's connect-l4: decide() reads no adapter, so their intents differ in nothing it reads.

import { decide } from '../policy/decide.js';
import { NOT_LOOKED_UP } from '../policy/binary-identity.js';
import type { Decision, EgressIntent, Policy } from '../policy/types.js';

/** Decisions remembered per policy and claim; the memo is emptied when it holds this many. */
export const MAX_REMEMBERED_L4_DECISIONS = 2_048;

interface Remembered {
  /** host -> port -> decision. */
  readonly byHost: Map<string, Map<number, Decision>>;
  size: number;
}

const remembered = (): Remembered => ({ byHost: new Map(), size: 0 });

/**
 * decide() for connection-level intents, remembered where the answer cannot differ; every other intent is decided.
 * `evaluate` is what decides (the stages hand a timed decide(): a remembered answer is not a decision to time).
 */
export function createL4Decisions(evaluate: (policy: Policy, intent: EgressIntent) => Decision = decide): (policy: Policy, intent: EgressIntent) => Decision {
  // A reload swaps in a new policy object: its decisions start empty, the old ones go with it.
  const byPolicy = new WeakMap<Policy, readonly [Remembered, Remembered]>();
  return function decideL4(policy, intent) {
    const { identity } = intent;
    if ((identity !== undefined && identity !== NOT_LOOKED_UP) || intent.method !== undefined || intent.after !== undefined) return evaluate(policy, intent);
    let kept = byPolicy.get(policy);
    if (kept === undefined) {
      kept = [remembered(), remembered()];
      byPolicy.set(policy, kept);
    }
    const memo = identity === undefined ? kept[0] : kept[1];
    let ports = memo.byHost.get(intent.host);
    const known = ports?.get(intent.port);
    if (known !== undefined) return known;
    const decision = evaluate(policy, intent);
    if (memo.size >= MAX_REMEMBERED_L4_DECISIONS) {
      memo.byHost.clear();
      memo.size = 0;
      ports = undefined;
    }
    if (ports === undefined) {
      ports = new Map();
      memo.byHost.set(intent.host, ports);
    }
    ports.set(intent.port, decision);
    memo.size++;
    return decision;
  };
}
