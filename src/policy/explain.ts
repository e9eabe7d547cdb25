// Explains one intent against a policy: the decision, and for a deny the verified smallest allowing entry.
// Shared by `boundary policy explain`, the admin listener's /v1/explain and /v1/denials. Pure.

import { decide } from './decide.js';
import { verifiedSuggestion } from './suggest.js';
import type { Decision, EgressIntent, Policy } from './types.js';

export type SuggestionOutcome = ReturnType<typeof verifiedSuggestion> | undefined;

export interface Explanation {
  readonly decision: Decision;
  readonly suggestion: SuggestionOutcome;
}

/** Why no suggestion is offered when the text the live policy was parsed from is not known. */
export const NO_POLICY_TEXT_HINT = 'the text of the policy in force is not available, so no entry can be verified';

/**
 * decide(), then for a deny verifiedSuggestion() against `policyText` (the text `policy` was parsed from).
 * Without the text no suggestion is made: an unverified entry is never offered as advice.
 */
export function explainIntent(policy: Policy, policyText: string | undefined, intent: EgressIntent): Explanation {
  const decision = decide(policy, intent);
  if (decision.verdict !== 'deny') return { decision, suggestion: undefined };
  if (policyText === undefined) return { decision, suggestion: { ok: false, hint: NO_POLICY_TEXT_HINT } };
  return { decision, suggestion: verifiedSuggestion({ policy, policyText, intent, decision }) };
}

/** The `policy explain --json` object: { verdict, policy, endpointIndex, reason, detail, layer, rule, suggestion?, hint? }. */
export function explanationJson({ decision, suggestion }: Explanation): Record<string, unknown> {
  return {
    verdict: decision.verdict,
    policy: decision.policy ?? null,
    endpointIndex: decision.endpointIndex ?? null,
    reason: decision.reason,
    detail: decision.detail,
    layer: decision.layer,
    rule: decision.rule ?? null,
    ...(suggestion?.ok === true ? { suggestion: suggestion.suggestion.yaml } : {}),
    ...(suggestion?.ok === false ? { hint: suggestion.hint } : {}),
  };
}
