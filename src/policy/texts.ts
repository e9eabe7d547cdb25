// The YAML texts recent policies were parsed from, by policy hash: explain's suggestions merge into the text of
// the policy in force. Bounded; holds policy text only (a policy never holds a secret, only provider names).

import { type ParseOptions, parsePolicy } from './parse.js';
import { emptyPolicy } from './store.js';
import type { Policy } from './types.js';

/** Texts kept: the policy in force, plus candidates parsed but refused or not yet swapped in. */
export const MAX_POLICY_TEXTS = 4;
/** The text of the deny-all policy (store.ts emptyPolicy()): a suggestion merges into it as into any other. */
const EMPTY_POLICY_TEXT = 'version: 1\n';

type ParseFunction = (text: string, options?: ParseOptions) => Policy;

export interface PolicyTexts {
  /** parsePolicy(), remembering the text under the parsed policy's hash. */
  readonly parse: ParseFunction;
  /** Remembers `text` as the text of `policy` (for a policy parsed elsewhere, e.g. off the event loop). */
  remember(policy: Policy, text: string): void;
  /** The text a policy with this hash was parsed from, if it is one of the last MAX_POLICY_TEXTS. */
  textFor(hash: string): string | undefined;
}

export function createPolicyTexts(): PolicyTexts {
  const texts = new Map<string, string>();
  const emptyHash = emptyPolicy().hash;
  function remember(policy: Policy, text: string): void {
    // Re-inserting moves the hash to the newest end, so the policy in force is never the one evicted.
    texts.delete(policy.hash);
    texts.set(policy.hash, text);
    while (texts.size > MAX_POLICY_TEXTS) {
      const oldest = texts.keys().next().value;
      if (oldest === undefined) break;
      texts.delete(oldest);
    }
  }
  return {
    parse(text, options) {
      const policy = parsePolicy(text, options);
      remember(policy, text);
      return policy;
    },
    remember,
    textFor(hash) {
      return texts.get(hash) ?? (hash === emptyHash ? EMPTY_POLICY_TEXT : undefined);
    },
  };
}
