// Explains one intent against a policy and a run's switches: the decision, and for a deny the verified smallest
// allowing entry; a destination no entry can open is named as such, with its address class, and gets none.
// Shared by `boundary policy explain`, the admin listener's /v1/explain and /v1/denials. Pure.

import type { PermanentCheck, PermanentRefusal } from '../net/destination.js';
import { decide } from './decide.js';
import { verifiedSuggestion } from './suggest.js';
import type { Decision, EgressIntent, Policy } from './types.js';

export type SuggestionOutcome = ReturnType<typeof verifiedSuggestion> | undefined;

export interface Explanation {
  readonly decision: Decision;
  readonly suggestion: SuggestionOutcome;
  /** Set when the destination is refused whatever the policy says (the proxy's `always-blocked` stage): the verdict is deny. */
  readonly blocked?: PermanentRefusal | undefined;
}

/** Why no suggestion is offered when the text the live policy was parsed from is not known. */
export const NO_POLICY_TEXT_HINT = 'the text of the policy in force is not available, so no entry can be verified';

/** The reason code the proxy's event gives a destination no policy can open. */
export const ALWAYS_BLOCKED_REASON = 'ssrf-denied';

/** The verdict the proxy gives: deny for an always-blocked destination, else the policy's. */
export function explainedVerdict(explanation: Explanation): Decision['verdict'] {
  return explanation.blocked === undefined ? explanation.decision.verdict : 'deny';
}

export function blockedHint(blocked: PermanentRefusal): string {
  return `the destination is always blocked (${blocked.check}, ${blocked.addressClass}); the refusal is permanent and no policy change can allow it`;
}

/**
 * The run's always-blocked check first (`permanent`), then decide(), then for a deny verifiedSuggestion() against
 * `policyText` (the text `policy` was parsed from). Without the text no suggestion is made: an unverified entry is
 * never offered as advice.
 */
export function explainIntent(policy: Policy, policyText: string | undefined, intent: EgressIntent, permanent?: PermanentCheck): Explanation {
  const decision = decide(policy, intent);
  const blocked = permanent?.(intent.host, intent.port);
  if (blocked !== undefined) return { decision, suggestion: { ok: false, hint: blockedHint(blocked) }, blocked };
  if (decision.verdict !== 'deny') return { decision, suggestion: undefined };
  if (policyText === undefined) return { decision, suggestion: { ok: false, hint: NO_POLICY_TEXT_HINT } };
  return { decision, suggestion: verifiedSuggestion({ policy, policyText, intent, decision }) };
}

/**
 * The `policy explain --json` object: { verdict, policy, endpointIndex, reason, detail, layer, rule, binaryIdentity,
 * suggestion?, hint? }, and for an always-blocked destination reason `ssrf-denied`, layer `ssrf`, check and addressClass.
 */
export function explanationJson({ decision, suggestion, blocked }: Explanation): Record<string, unknown> {
  const hints = {
    ...(suggestion?.ok === true ? { suggestion: suggestion.suggestion.yaml } : {}),
    ...(suggestion?.ok === false ? { hint: suggestion.hint } : {}),
  };
  if (blocked !== undefined) {
    return {
      verdict: 'deny',
      policy: null,
      endpointIndex: null,
      reason: ALWAYS_BLOCKED_REASON,
      detail: blocked.message,
      layer: 'ssrf',
      rule: null,
      check: blocked.check,
      addressClass: blocked.addressClass,
      binaryIdentity: decision.binaryIdentity,
      ...hints,
    };
  }
  return {
    verdict: decision.verdict,
    policy: decision.policy ?? null,
    endpointIndex: decision.endpointIndex ?? null,
    reason: decision.reason,
    detail: decision.detail,
    layer: decision.layer,
    rule: decision.rule ?? null,
    binaryIdentity: decision.binaryIdentity,
    ...hints,
  };
}
