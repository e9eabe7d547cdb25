// The smallest policy addition that would allow a denied intent, for `boundary policy explain`.
// Pure: builds a new network_policies entry, merges it into the policy text and re-decides to prove it
// allows; never widens an existing entry and never suggests around a deny rule.

import { dump } from 'js-yaml';
import { createRequire } from 'node:module';
import { isBoundaryError } from '../shared/errors.js';
import { ANY_BINARY } from './binary-identity.js';
import { decide } from './decide.js';
import { parsePolicy } from './parse.js';
import type { Decision, EgressIntent, Endpoint, Policy } from './types.js';

const loadYamlLibrary = (): typeof import('yaml') => createRequire(import.meta.url)('yaml') as typeof import('yaml');

/** Keys tried per host:port before giving up on a free `allow_<host>_<port>` name. */
const MAX_KEY_ATTEMPTS = 100;
// Characters with glob meaning in a rule path; a literal request path is matched with `?` in their place.
const PATH_GLOB_CHARS = /[*?[\]{}]/g;

interface Suggestion {
  /** The new `network_policies` key. */
  readonly key: string;
  /** The entry as plain data, ready for a YAML document. */
  readonly entry: Readonly<Record<string, unknown>>;
  /** `network_policies:` with the one new entry, as YAML text. */
  readonly yaml: string;
}

type SuggestionResult =
  | { readonly ok: true; readonly suggestion: Suggestion }
  | { readonly ok: false; readonly hint: string };

interface SuggestInput {
  readonly policy: Policy;
  readonly intent: EgressIntent;
  readonly decision: Decision;
}

/** A new entry that would allow `intent`, or a hint saying why adding one cannot help. */
function suggestAllow({ policy, intent, decision }: SuggestInput): SuggestionResult {
  if (decision.verdict !== 'deny') return { ok: false, hint: `already ${decision.verdict === 'allow' ? 'allowed' : 'forwarded (audit)'}` };
  const where = decision.policy === undefined ? '' : ` in ${decision.policy}#${decision.endpointIndex ?? '?'}`;
  if (decision.reason === 'deny-rule-matched') {
    const rule = decision.rule === undefined ? 'a deny rule' : `deny rule "${decision.rule}"`;
    return { ok: false, hint: `${rule}${where} matches; deny rules win over every allow, so narrow or remove it` };
  }
  if (decision.reason === 'unsupported-l7-protocol') {
    const protocol = decision.endpoint?.protocol ?? 'this protocol';
    return {
      ok: false,
      hint: `${protocol} requests are not inspected yet and are denied${where}; drop protocol to allow the host uninspected, or serve these paths from a rest endpoint`,
    };
  }
  if (decision.reason === 'identity-unavailable') {
    return { ok: false, hint: `the process could not be identified or verified (${decision.identityFailure ?? 'unknown'}); no entry can name its binary (docs/identity.md#failure-reasons)` };
  }
  const key = freeKey(policy, intent);
  // The process the decision names: of several holding the connection, the one refused.
  const exe = decision.binary ?? ANY_BINARY;
  const entry = { endpoints: [endpointFor(policy, intent, decision)], binaries: [{ path: exe }] };
  return { ok: true, suggestion: { key, entry, yaml: dump({ network_policies: { [key]: entry } }) } };
}

/** `policyText` with the suggested entry added under `network_policies` (comments and order kept). */
export function mergeSuggestion(policyText: string, suggestion: Suggestion): string {
  // The yaml library keeps comments and order where js-yaml cannot; loaded on first use, since a running
  // boundary only builds suggestions (dump above) and the library is a fifth of a booted heap's modules.
  const { parseDocument } = loadYamlLibrary();
  const doc = parseDocument(policyText);
  doc.setIn(['network_policies', suggestion.key], doc.createNode(suggestion.entry));
  return doc.toString();
}

/**
 * suggestAllow, then proof: the merged text must load and decide() must allow the same intent. A
 * suggestion that fails either check is withheld rather than printed as advice.
 */
export function verifiedSuggestion(input: SuggestInput & { readonly policyText: string }): SuggestionResult {
  const result = suggestAllow(input);
  if (!result.ok) return result;
  let merged: Policy;
  try {
    merged = parsePolicy(mergeSuggestion(input.policyText, result.suggestion), { source: 'suggestion' });
  } catch (err) {
    const why = isBoundaryError(err) ? err.issues.map((i) => i.code).join(', ') || err.code : String(err);
    return { ok: false, hint: `no single new entry allows this without conflicting with the policy (${why})` };
  }
  const after = decide(merged, input.intent);
  if (after.verdict !== 'allow') {
    return { ok: false, hint: `a new entry would still be denied (${after.reason}): ${after.detail}` };
  }
  return result;
}

function freeKey(policy: Policy, intent: EgressIntent): string {
  const taken = new Set(policy.entries.map((e) => e.key));
  const base = `allow_${intent.host.replace(/[^a-z0-9]+/gi, '_').replace(/^_+|_+$/g, '')}_${intent.port}`;
  if (!taken.has(base)) return base;
  for (let n = 2; n < MAX_KEY_ATTEMPTS; n += 1) {
    if (!taken.has(`${base}_${n}`)) return `${base}_${n}`;
  }
  return `${base}_${MAX_KEY_ATTEMPTS}`;
}

/** Endpoints that can match intent.host on intent.port: the new endpoint must agree with them (V13). */
function overlapping(policy: Policy, intent: EgressIntent): Endpoint[] {
  const byHost = policy.endpointsForHost(intent.host);
  const hostless = policy.endpoints.filter((e) => e.host === undefined && !byHost.includes(e));
  return [...byHost, ...hostless].filter((e) => e.ports.includes(intent.port));
}

function endpointFor(policy: Policy, intent: EgressIntent, decision: Decision): Record<string, unknown> {
  const others = overlapping(policy, intent);
  const endpoint: Record<string, unknown> = { host: intent.host, port: intent.port };
  // Agree on tls and allowed_ips with every endpoint that can match the same name and port.
  if (others.some((e) => e.tls === 'skip')) endpoint.tls = 'skip';
  const pinned = others.find((e) => e.allowedIps.length > 0);
  if (pinned) endpoint.allowed_ips = [...pinned.allowedIps];

  const selected = decision.endpoint?.inspected ? decision.endpoint : inspectedFor(others, intent);
  if (selected !== undefined) {
    // The connection is inspected anyway: join it with the same protocol, selector, enforcement and
    // credential settings, and a rule for exactly this request.
    endpoint.protocol = selected.protocol;
    if (selected.path !== undefined) endpoint.path = selected.path;
    endpoint.enforcement = selected.enforcement;
    Object.assign(endpoint, credentialFields(selected));
    if (selected.allowEncodedSlash) endpoint.allow_encoded_slash = true;
    if (intent.method === undefined) endpoint.access = 'read-only';
    else endpoint.rules = [{ allow: ruleFor(intent) }];
  } else if (others.length === 0 && intent.method !== undefined) {
    // Nothing inspects this host yet: a rest endpoint with one rule is narrower than an open tunnel.
    endpoint.protocol = 'rest';
    endpoint.enforcement = 'enforce';
    endpoint.rules = [{ allow: ruleFor(intent) }];
  }
  if (endpoint.rules !== undefined && intent.path?.includes('%2F')) endpoint.allow_encoded_slash = true;
  return endpoint;
}

function inspectedFor(others: readonly Endpoint[], intent: EgressIntent): Endpoint | undefined {
  const candidates = others.filter((e) => e.inspected && (intent.path === undefined || e.selectsPath(intent.path)));
  candidates.sort((a, b) => b.selectorSpecificity - a.selectorSpecificity);
  return candidates[0];
}

function ruleFor(intent: EgressIntent): { method: string; path: string } {
  return { method: intent.method ?? 'GET', path: (intent.path ?? '/').replace(PATH_GLOB_CHARS, '?') };
}

function credentialFields(endpoint: Endpoint): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (endpoint.credentialProvider !== undefined) out.credential_binding = { provider: endpoint.credentialProvider };
  if (endpoint.requestBodyCredentialRewrite) out.request_body_credential_rewrite = true;
  if (endpoint.websocketCredentialRewrite) out.websocket_credential_rewrite = true;
  if (endpoint.allowUninspectedCredentials) out.allow_uninspected_credentials = true;
  return out;
}

/** Closed set: what a denial's `next_steps` entries tell a client to do (docs/destinations.md#denial-responses). */
export const NEXT_STEP_KINDS = [
  'add_policy_entry',
  'narrow_deny_rule',
  'change_protocol',
  'not_allowable',
  'set_allowed_ips',
  'use_bound_endpoint',
  'retry_after_reload',
  'fix_request',
  'retry_later',
] as const;
export type NextStepKind = (typeof NEXT_STEP_KINDS)[number];

export interface NextStep {
  readonly kind: NextStepKind;
  /** One sentence for a person or an agent; names hosts, ports, methods and policy keys, never a query or secret. */
  readonly message: string;
  /** For `add_policy_entry`: the `network_policies` YAML to add (suggestAllow's, unverified: explain verifies). */
  readonly yaml?: string;
}

/**
 * The next steps for a policy denial: the entry to add (suggestAllow), or why adding one cannot help (a deny rule
 * wins; an uninspected protocol). Unverified, unlike verifiedSuggestion: the denial path has no policy text to merge
 * into, so the message points at `boundary policy explain`, which proves a snippet before printing it.
 */
export function policyNextSteps(input: SuggestInput): readonly NextStep[] {
  const { decision } = input;
  if (decision.verdict !== 'deny') return [];
  const result = suggestAllow(input);
  if (result.ok) {
    return [
      {
        kind: 'add_policy_entry',
        message: `add network_policies.${result.suggestion.key} to the policy (\`boundary policy explain\` verifies it against the full policy)`,
        yaml: result.suggestion.yaml,
      },
    ];
  }
  const kind = decision.reason === 'deny-rule-matched' ? 'narrow_deny_rule' : decision.reason === 'identity-unavailable' ? 'not_allowable' : 'change_protocol';
  return [{ kind, message: result.hint }];
}
