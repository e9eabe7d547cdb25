// decide(policy, intent) -> Decision, and decide(policy, dnsIntent) -> DnsDecision: the only place a verdict is made
// (docs/policy.md#deny-precedence-and-enforcement, docs/destinations.md#shared-decision, docs/dns.md#query-handling).
// Pure and total: a refusal is a value with a reason, never an exception. Details never carry the query string.

import { isLocalName, KNOWN_METADATA_NAMES } from '../net/destination.js';
import { formatAuthority } from '../net/host.js';
import { type BinaryIdentity, type Distrusted, distrustedMatch, type IdentityClaim, type IdentityFailure, narrowByBinary, processContext, type ProcessClaim } from './binary-identity.js';
import { decidesGraphql, evaluateGraphql } from './decide-graphql.js';
import { decidesJsonRpc, evaluateJsonRpc } from './decide-jsonrpc.js';
import type { JsonRpcCall } from './jsonrpc-match.js';
import { parseQuery } from './query.js';
import type {
  Decision,
  DecisionReason,
  DnsDecision,
  DnsDecisionReason,
  DnsIntent,
  EgressIntent,
  Endpoint,
  HttpRequestView,
  L7Rule,
  Policy,
  Verdict,
} from './types.js';

// The EgressIntent overload stays last: `Parameters<typeof decide>` sees the last one, as before DNS had its own.
export function decide(policy: Policy, intent: DnsIntent): DnsDecision;
export function decide(policy: Policy, intent: EgressIntent): Decision;
export function decide(policy: Policy, intent: EgressIntent | DnsIntent): Decision | DnsDecision {
  return 'qtype' in intent ? decideName(policy, intent) : decideEgress(policy, intent);
}

function decideEgress(policy: Policy, intent: EgressIntent): Decision {
  const target = formatAuthority(intent.host, intent.port);
  const prior = intent.after;
  if (prior !== undefined && prior.verdict !== 'deny' && prior.layer === 'l4' && prior.generation === policy.generation) {
    return decideMatched(baseOfDecision(prior), prior.endpoints, intent, target);
  }
  const claim = intent.identity;
  const unnarrowed = baseOf(policy, claim);
  if (policy.entries.length === 0) {
    return refuse(unnarrowed, 'no-policy', `no network policy is in effect; ${target} is denied like all egress`);
  }
  const byPort = policy.endpointsForHost(intent.host).filter((e) => e.ports.includes(intent.port));
  if (byPort.length === 0) return refuse(unnarrowed, 'no-endpoint-matched', `endpoint ${target} is not allowed by any policy`);
  let base = unnarrowed;
  let matched: readonly Endpoint[] = byPort;
  if (claim !== undefined) {
    // docs/identity.md#matching: each endpoint's entry's binaries, against the process that opened the connection.
    const narrowed = narrowByBinary(byPort, claim);
    const subject = narrowed.subject;
    base = { ...unnarrowed, binaryIdentity: narrowed.identity, identityFailure: narrowed.failure, via: narrowed.via };
    if (subject !== undefined) base = { ...base, binary: subject.exe, binaryPid: subject.pid };
    matched = narrowed.endpoints;
    if (matched.length === 0) {
      // docs/identity.md#verification: a path the policy lists, whose file could not be verified, is named as such.
      const distrusted = subject === undefined ? undefined : distrustedMatch(byPort, subject);
      if (distrusted !== undefined && subject !== undefined) {
        const unverified = { ...base, binaryIdentity: 'unavailable' as const, identityFailure: distrusted.failure, binary: undefined, binaryPid: undefined };
        return refuse(unverified, 'identity-unavailable', distrustDetail(byPort, subject, distrusted, target));
      }
      return refuse(base, ...binaryRefusal(byPort, claim, subject, narrowed.unavailable, target));
    }
  }
  return decideMatched(base, matched, intent, target);
}

/** The decision once the endpoints at host:port that admit the connection's identity are known. */
function decideMatched(base: Base, matched: readonly Endpoint[], intent: EgressIntent, target: string): Decision {
  if (intent.method === undefined) return allowL4(base, target, matched, matched, '');
  const inspected = matched.filter((e) => e.inspected);
  if (inspected.length === 0) {
    return allowL4(base, target, bySelector(matched, intent.path), matched, '; the endpoint is not inspected, so method and path are not constrained');
  }
  const request: HttpRequestView = {
    method: intent.method.toUpperCase(),
    path: intent.path ?? '/',
    query: parseQuery(intent.query),
  };
  const missing = `${request.method} ${request.path}`;
  const selected = selectByPath(inspected, request.path);
  if (selected.length === 0) {
    // A path no inspected selector takes falls back to an L4 endpoint on the same host:port, never to the
    // rules of a less specific selector: OpenShell's selector picks the endpoint, it is not an access rule.
    const plain = matched.filter((e) => !e.inspected);
    if (plain.length > 0) return allowL4(base, target, bySelector(plain, request.path), matched, '; no inspected endpoint selects this path');
    return finish(base, {
      verdict: 'deny',
      reason: 'no-rule-matched',
      detail: `no inspected endpoint for ${target} selects path ${request.path}`,
      layer: 'l7',
      endpoint: undefined,
      endpoints: matched,
      rule: missing,
    });
  }
  if (selected.some((e) => decidesGraphql(e, request.method))) {
    const said = `${request.method} ${request.path} on ${target}`;
    const o = evaluateGraphql({ said, request, selected, missing, graphql: intent.graphql, soft: softVerdict });
    return l7(base, matched, o.verdict, o.reason, o.detail, o.endpoint, o.rule);
  }
  const authority = selected.find(decidesJsonRpc);
  if (authority !== undefined) {
    const said = `${request.method} ${request.path} on ${target}`;
    // OpenShell's union: every endpoint taking the path decides, not only the most specific (docs/policy.md#json-rpc-and-mcp-inspection).
    const domain = inspected.filter((e) => e.selectsPath(request.path)).sort(byPolicyKey);
    const o = evaluateJsonRpc({ said, request, domain, authority, missing, jsonRpc: intent.jsonRpc, soft: softVerdict });
    return l7(base, matched, o.verdict, o.reason, o.detail, o.endpoint, o.rule, o.calls);
  }
  return evaluateL7(base, { target, request, selected, matched, missing });
}

/**
 * May policy DNS map this name (docs/dns.md#query-handling)? Names that can never lead anywhere safe come first,
 * so a policy that lists `localhost` or a metadata name still gets no answer; then coverage by any endpoint.
 */
function decideName(policy: Policy, intent: DnsIntent): DnsDecision {
  const { host, qtype } = intent;
  // `2852039166` and friends are IP literals in disguise: never resolved, never mapped (docs/destinations.md#the-host-parsing-trap).
  if (intent.form !== 'name') return refuseName(policy, 'ip-literal-name', `${host} is an IP literal, not a name`);
  if (isLocalName(host)) return refuseName(policy, 'local-name', `${host} is a local name`);
  if (KNOWN_METADATA_NAMES.has(host)) return refuseName(policy, 'metadata-name', `${host} is a cloud metadata name`);
  const covering = policy.endpointsForHost(host);
  if (covering.length === 0) {
    return policy.entries.length === 0
      ? refuseName(policy, 'no-policy', `no network policy is in effect; ${host} is refused like all egress`)
      : refuseName(policy, 'no-endpoint-matched', `no policy endpoint covers ${host}`);
  }
  const endpoint = firstOfSmallestPolicy(covering);
  return Object.freeze({
    verdict: 'allow',
    reason: 'endpoint-allowed',
    detail: `${host} (${qtype}) is covered by policy ${endpoint.policy}`,
    policy: endpoint.policy,
    policyName: endpoint.policyName,
    endpointIndex: endpoint.index,
    endpoint,
    endpoints: covering,
    generation: policy.generation,
    policyHash: policy.hash,
  });
}

function refuseName(policy: Policy, reason: DnsDecisionReason, detail: string): DnsDecision {
  return Object.freeze({
    verdict: 'deny',
    reason,
    detail,
    policy: undefined,
    policyName: undefined,
    endpointIndex: undefined,
    endpoint: undefined,
    endpoints: [],
    generation: policy.generation,
    policyHash: policy.hash,
  });
}

function refuse(base: Base, reason: DecisionReason, detail: string): Decision {
  return finish(base, { verdict: 'deny', reason, detail, layer: 'l4', endpoint: undefined, endpoints: [], rule: undefined });
}

/** Connection-level allow by the first endpoint of the smallest matching policy key. */
function allowL4(base: Base, target: string, from: readonly Endpoint[], matched: readonly Endpoint[], note: string): Decision {
  const endpoint = firstOfSmallestPolicy(from);
  return finish(base, {
    verdict: 'allow',
    reason: 'endpoint-allowed',
    detail: `${target} is allowed by policy ${endpoint.policy}${note}`,
    layer: 'l4',
    endpoint,
    endpoints: matched,
    rule: undefined,
  });
}

interface L7Input {
  readonly target: string;
  readonly request: HttpRequestView;
  readonly selected: readonly Endpoint[];
  readonly matched: readonly Endpoint[];
  readonly missing: string;
}

/** Deny rules win, then allow rules and presets, else no rule (docs/policy.md#deny-precedence-and-enforcement). Audit relaxes only rule misses and denies. */
function evaluateL7(base: Base, input: L7Input): Decision {
  const { target, request, selected, matched, missing } = input;
  const first = selected[0] as Endpoint;
  const said = `${request.method} ${request.path} on ${target}`;
  for (const endpoint of selected) {
    const rule = firstMatch(endpoint.denyRules, request);
    if (rule !== undefined) {
      const verdict = softVerdict(endpoint);
      return l7(base, matched, verdict, 'deny-rule-matched', `${said} matches deny rule ${rule.text}`, endpoint, rule.text);
    }
  }
  for (const endpoint of selected) {
    const rule = firstMatch(endpoint.rules, request);
    if (rule !== undefined) {
      const reason = endpoint.access === undefined ? 'rule-allowed' : 'preset-allowed';
      return l7(base, matched, 'allow', reason, `${said} is allowed by ${rule.text}`, endpoint, rule.text);
    }
  }
  const textFramesNeedInspection =
    request.method === 'WEBSOCKET_TEXT' && selected.some((e) => e.rules.some((r) => r.kind !== 'http'));
  if (textFramesNeedInspection) {
    return l7(base, matched, 'deny', 'unsupported-l7-protocol', `GraphQL over WebSocket is not inspected yet; ${said} is denied`, first, missing);
  }
  const verdict = softVerdict(first);
  return l7(base, matched, verdict, 'no-rule-matched', `no rule of policy ${first.policy} allows ${said}`, first, missing);
}

/** Audit endpoints forward would-be denies (verdict audit). */
function softVerdict(endpoint: Endpoint): Verdict {
  return endpoint.enforcement === 'audit' ? 'audit' : 'deny';
}

function l7(
  base: Base,
  matched: readonly Endpoint[],
  verdict: Verdict,
  reason: DecisionReason,
  detail: string,
  endpoint: Endpoint,
  rule: string,
  calls?: readonly JsonRpcCall[],
): Decision {
  return finish(base, { verdict, reason, detail, layer: 'l7', endpoint, endpoints: matched, rule, calls });
}

/**
 * L4 endpoints for a request with a path: the most specific whose `path` takes it, else all of them. An L4
 * endpoint's path never restricts traffic; it names the endpoint whose credential_binding may serve the request
 * (docs/policy.md#endpoint-path-selector), so the decision must carry that one.
 */
function bySelector(endpoints: readonly Endpoint[], path: string | undefined): readonly Endpoint[] {
  if (path === undefined) return endpoints;
  const selecting = selectByPath(endpoints, path);
  return selecting.length > 0 ? selecting : endpoints;
}

/** The endpoints whose selector takes `path`, keeping only the most specific (ties stay, in policy-key order). */
function selectByPath(endpoints: readonly Endpoint[], path: string): Endpoint[] {
  let best = -1;
  let out: Endpoint[] = [];
  for (const endpoint of endpoints) {
    if (!endpoint.selectsPath(path)) continue;
    if (endpoint.selectorSpecificity > best) {
      best = endpoint.selectorSpecificity;
      out = [endpoint];
    } else if (endpoint.selectorSpecificity === best) {
      out.push(endpoint);
    }
  }
  return out.sort(byPolicyKey);
}

function firstMatch(rules: readonly L7Rule[], request: HttpRequestView): L7Rule | undefined {
  for (const rule of rules) if (rule.kind === 'http' && rule.matchesHttp(request)) return rule;
  return undefined;
}

function firstOfSmallestPolicy(endpoints: readonly Endpoint[]): Endpoint {
  let best = endpoints[0] as Endpoint;
  for (const endpoint of endpoints) if (byPolicyKey(endpoint, best) < 0) best = endpoint;
  return best;
}

function byPolicyKey(a: Endpoint, b: Endpoint): number {
  if (a.policy !== b.policy) return a.policy < b.policy ? -1 : 1;
  return a.order - b.order;
}

interface Base {
  readonly generation: number;
  readonly policyHash: string;
  readonly binaryIdentity: BinaryIdentity;
  readonly binary: string | undefined;
  readonly binaryPid: number | undefined;
  readonly identityFailure: IdentityFailure | undefined;
  readonly via: ReadonlyMap<Endpoint, string> | undefined;
}

/** The identity fields a connection-level allow was made with, for a decision that continues from it. */
function baseOfDecision(decision: Decision): Base {
  return {
    generation: decision.generation,
    policyHash: decision.policyHash,
    binaryIdentity: decision.binaryIdentity,
    binary: decision.binary,
    binaryPid: decision.binaryPid,
    identityFailure: decision.identityFailure,
    via: decision.grantedBy,
  };
}

/** The decision's identity fields before any endpoint matched: a failed lookup did not matter yet. */
function baseOf(policy: Policy, claim: IdentityClaim | undefined): Base {
  const process = claim?.kind === 'process';
  return {
    generation: policy.generation,
    policyHash: policy.hash,
    binaryIdentity: claim === undefined ? 'endpoint-only' : process ? 'process' : 'not-needed',
    binary: process ? claim.exe : undefined,
    binaryPid: process ? claim.pid : undefined,
    identityFailure: undefined,
    via: undefined,
  };
}

function policyKeys(byPort: readonly Endpoint[]): string {
  return [...new Set(byPort.map((e) => e.policy))].sort().join(', ');
}

/** Why no endpoint at host:port stood after the binaries check: an unknown process, or one not listed. */
function binaryRefusal(byPort: readonly Endpoint[], claim: IdentityClaim, subject: ProcessClaim | undefined, unavailable: boolean, target: string): [DecisionReason, string] {
  const keys = policyKeys(byPort);
  if (claim.kind === 'unavailable' && unavailable) {
    const why = claim.detail === undefined ? claim.failure : `${claim.failure}: ${claim.detail}`;
    return ['identity-unavailable', `the process that opened the connection to ${target} could not be identified (${why}); policy ${keys} needs its binary`];
  }
  if (claim.kind === 'process') {
    const named = subject ?? claim;
    // Of several processes holding the connection, the one refused is named, with the others after it.
    const others = [claim, ...(claim.holders ?? [])].filter((h) => h !== named);
    const shared = others.length === 0 ? '' : `; the connection is also held by ${others.map((h) => `pid ${h.pid ?? '?'} ${h.exe}`).join(', ')}, and every holder must be allowed`;
    return ['binary-not-allowed', `binary ${named.exe} is not allowed to reach ${target} by policy ${keys} (check its binaries list and symlinks)${processContext(named)}${shared}`];
  }
  return ['binary-not-allowed', `policy ${keys} lists no binaries, so no process may reach ${target} (list paths, or "/**" for any)`];
}

/** A listed path whose file failed verification: the path and why, never a hash (docs/identity.md#verification). */
function distrustDetail(byPort: readonly Endpoint[], subject: ProcessClaim, distrusted: Distrusted, target: string): string {
  const pid = subject.pid === undefined ? '' : ` (pid ${subject.pid})`;
  const what = distrusted.path === subject.exe ? 'its executable' : 'its ancestor';
  return `the process that opened the connection to ${target}${pid} could not be verified: ${what} ${distrusted.path} failed with ${distrusted.failure}; policy ${policyKeys(byPort)} lists that path`;
}

interface Outcome {
  readonly verdict: Verdict;
  readonly reason: DecisionReason;
  readonly detail: string;
  readonly layer: 'l4' | 'l7';
  readonly endpoint: Endpoint | undefined;
  readonly endpoints: readonly Endpoint[];
  readonly rule: string | undefined;
  readonly calls?: readonly JsonRpcCall[] | undefined;
}

/** One literal with every field, so each decision has the same shape. `endpoints` is a fresh array per call. */
function finish(base: Base, outcome: Outcome): Decision {
  const endpoint = outcome.endpoint;
  return Object.freeze({
    verdict: outcome.verdict,
    reason: outcome.reason,
    detail: outcome.detail,
    policy: endpoint?.policy,
    policyName: endpoint?.policyName,
    endpointIndex: endpoint?.index,
    endpoint,
    endpoints: outcome.endpoints,
    generation: base.generation,
    policyHash: base.policyHash,
    layer: outcome.layer,
    binaryIdentity: base.binaryIdentity,
    binary: base.binary,
    binaryPid: base.binaryPid,
    binaryAncestor: endpoint === undefined ? undefined : base.via?.get(endpoint),
    grantedBy: base.via,
    identityFailure: base.identityFailure,
    rule: outcome.rule,
    calls: outcome.calls,
  });
}
