// The JSON-RPC and MCP part of decide() (docs/policy.md#json-rpc-and-mcp-inspection), kept beside decide.ts: what
// the endpoints that take a request's path say about its parsed calls. Pure; decide.ts makes the Decision.

import { describeCall, type JsonRpcCall, type JsonRpcRequest } from './jsonrpc-match.js';
import type { DecisionReason, Endpoint, HttpRequestView, L7Rule, Verdict } from './types.js';

/** Calls named in an allow's detail; a longer batch is summed up, so the event stays bounded. */
export const MAX_DETAIL_CALLS = 8;

/** An endpoint whose rules decide JSON-RPC calls. */
export function decidesJsonRpc(endpoint: Endpoint): boolean {
  return endpoint.protocol === 'mcp' || endpoint.protocol === 'json-rpc';
}

export interface JsonRpcInput {
  /** `POST /mcp on host:port`, for details. */
  readonly said: string;
  readonly request: HttpRequestView;
  /**
   * Every inspected endpoint whose selector takes the path, not only the most specific: a request is allowed
   * when any of them allows it (a REST one by method and path) and denied when any deny rule of any matches.
   */
  readonly domain: readonly Endpoint[];
  /** The most specific json-rpc or mcp endpoint: its protocol says how the body was read. */
  readonly authority: Endpoint;
  readonly missing: string;
  /** Undefined when the proxy did not parse the request: fail closed. */
  readonly jsonRpc: JsonRpcRequest | undefined;
  /** A policy miss's verdict on this endpoint (audit forwards it). */
  readonly soft: (endpoint: Endpoint) => Verdict;
}

export interface JsonRpcOutcome {
  readonly verdict: Verdict;
  readonly reason: DecisionReason;
  readonly detail: string;
  readonly endpoint: Endpoint;
  readonly rule: string;
  /** Every call when allowed; the denied call when one was. */
  readonly calls: readonly JsonRpcCall[];
}

/**
 * Hard denials first (unreadable body; a client-sent response on json-rpc), even under audit. Then each call in
 * order, as the only call: a deny rule of any endpoint denies, else some endpoint must allow it. The first
 * denied call denies the whole request (a batch included) with its reason.
 */
export function evaluateJsonRpc(input: JsonRpcInput): JsonRpcOutcome {
  const { said, authority, missing, jsonRpc } = input;
  const rejected = (why: string): JsonRpcOutcome => ({
    verdict: 'deny',
    reason: 'jsonrpc-rejected',
    detail: `JSON-RPC request rejected: ${why}; ${said} is denied`,
    endpoint: authority,
    rule: missing,
    calls: [],
  });
  if (jsonRpc === undefined) return rejected('the request was not inspected');
  if (jsonRpc.kind === 'error') return rejected(jsonRpc.error);
  if (jsonRpc.kind === 'messages' && jsonRpc.responses > 0 && authority.protocol === 'json-rpc') {
    return rejected('JSON-RPC response frames are not permitted from client to server');
  }
  const http = denyByHttp(input);
  if (http !== undefined) return http;
  if (jsonRpc.kind !== 'messages' || jsonRpc.calls.length === 0) return bodiless(input, jsonRpc);
  let allowedBy: L7Rule | undefined;
  for (const call of jsonRpc.calls) {
    const verdict = decideCall(input, call);
    if (verdict.verdict !== 'allow') return verdict;
    allowedBy ??= verdict.by;
  }
  const more = jsonRpc.calls.length - MAX_DETAIL_CALLS;
  const shown = jsonRpc.calls.slice(0, MAX_DETAIL_CALLS).map(describeCall).join(', ') + (more > 0 ? ` and ${more} more` : '');
  const by = allowedBy?.text ?? missing;
  return { verdict: 'allow', reason: 'rule-allowed', detail: `${said} (${shown}) is allowed by ${by}`, endpoint: authority, rule: by, calls: jsonRpc.calls };
}

/** A REST deny rule of an endpoint in the domain matches the request's method and path: nothing of it is allowed. */
function denyByHttp(input: JsonRpcInput): JsonRpcOutcome | undefined {
  for (const endpoint of input.domain) {
    const rule = endpoint.denyRules.find((r) => r.kind === 'http' && r.matchesHttp(input.request));
    if (rule === undefined) continue;
    const detail = `${input.said} matches deny rule ${rule.text} of policy ${endpoint.policy}`;
    return { verdict: input.soft(endpoint), reason: 'deny-rule-matched', detail, endpoint, rule: rule.text, calls: [] };
  }
  return undefined;
}

/**
 * No call to decide: the server-to-client stream (GET), a session's end (DELETE), or only response frames
 * (POSTed answers to the server's own requests). An mcp endpoint taking the path allows them; a json-rpc one
 * does not; a REST rule may, by method and path.
 */
function bodiless(input: JsonRpcInput, jsonRpc: Exclude<JsonRpcRequest, { kind: 'error' }>): JsonRpcOutcome {
  const { said, request, domain, authority, missing } = input;
  const what = jsonRpc.kind === 'receive-stream' ? 'the receive stream' : jsonRpc.kind === 'session-end' ? 'the session end' : 'response frames';
  const mcp = domain.find((e) => e.protocol === 'mcp' && (jsonRpc.kind !== 'messages' || request.method === 'POST'));
  if (mcp !== undefined) {
    return { verdict: 'allow', reason: 'rule-allowed', detail: `${said} (${what}) is allowed on mcp endpoint of policy ${mcp.policy}`, endpoint: mcp, rule: `${request.method} (${what})`, calls: [] };
  }
  const rest = httpAllow(domain, request);
  if (rest !== undefined) {
    return { verdict: 'allow', reason: 'rule-allowed', detail: `${said} (${what}) is allowed by ${rest.text}`, endpoint: authority, rule: rest.text, calls: [] };
  }
  return { verdict: input.soft(authority), reason: 'no-rule-matched', detail: `no rule of policy ${authority.policy} allows ${what} in ${said}`, endpoint: authority, rule: missing, calls: [] };
}

type CallVerdict = JsonRpcOutcome & { readonly by?: L7Rule };

function decideCall(input: JsonRpcInput, call: JsonRpcCall): CallVerdict {
  const { said, request, domain, authority } = input;
  const post = request.method === 'POST';
  const shown = describeCall(call);
  const mcp = authority.protocol === 'mcp';
  for (const endpoint of domain) {
    const rule = post ? endpoint.denyRules.find((r) => r.matchesCall?.(call) === true) : undefined;
    if (rule === undefined) continue;
    const detail = mcp
      ? `MCP request blocked by a deny rule (${rule.text}) of policy ${endpoint.policy}`
      : `${shown} in ${said} matches deny rule ${rule.text} of policy ${endpoint.policy}`;
    return { verdict: input.soft(endpoint), reason: 'deny-rule-matched', detail, endpoint, rule: rule.text, calls: [call] };
  }
  for (const endpoint of domain) {
    const by = post ? callAllow(endpoint, call) : undefined;
    if (by !== undefined) return { verdict: 'allow', reason: 'rule-allowed', detail: '', endpoint, rule: by.text, calls: [call], by };
  }
  // An MCP extension method is allowed only by an MCP rule naming it exactly, never by a REST rule.
  const rest = call.extension === true ? undefined : httpAllow(domain, request);
  if (rest !== undefined) return { verdict: 'allow', reason: 'rule-allowed', detail: '', endpoint: authority, rule: rest.text, calls: [call], by: rest };
  const why = !post
    ? `${shown} sent with ${request.method}: JSON-RPC rules allow POST only in ${said}`
    : mcp
      ? mcpMissWhy(call, authority.policy)
      : `no rule of policy ${authority.policy} allows ${shown} in ${said}`;
  return { verdict: input.soft(authority), reason: 'no-rule-matched', detail: why, endpoint: authority, rule: shown, calls: [call] };
}

/** The fixed reason an MCP call was not allowed (docs/policy.md#mcp-rules-and-revisions): names no client data. */
function mcpMissWhy(call: JsonRpcCall, policy: string): string {
  if (call.extension === true) return `MCP extension method has no matching exact allow rule in policy ${policy}`;
  if (call.method === 'tools/call') return `MCP tool call has no matching allow rule in policy ${policy}`;
  return `MCP core method is not permitted by policy ${policy}`;
}

/** The method profile's implicit rule, named in details. */
const PROFILE_RULE: L7Rule = Object.freeze({ kind: 'mcp', text: '* (mcp.allow_all_known_mcp_methods)', matchesHttp: () => false });

/**
 * An allow rule of this endpoint matching the call. An MCP extension method needs a rule naming it exactly (no glob,
 * no `*`, not the profile). Under the MCP method profile every core method of the request's revision is allowed,
 * except tools/call on an endpoint whose allow rules name tools: then a tool rule must match.
 */
function callAllow(endpoint: Endpoint, call: JsonRpcCall): L7Rule | undefined {
  if (call.extension === true) return endpoint.rules.find((r) => r.mcpMethod === call.method && r.matchesCall?.(call) === true);
  const rule = endpoint.rules.find((r) => r.matchesCall?.(call) === true);
  if (rule !== undefined || endpoint.protocol !== 'mcp' || !endpoint.options.mcpAllowAllKnownMethods || call.method === '') return rule;
  if (call.method === 'tools/call' && endpoint.rules.some((r) => r.scopesTools === true)) return undefined;
  return PROFILE_RULE;
}

function httpAllow(domain: readonly Endpoint[], request: HttpRequestView): L7Rule | undefined {
  for (const endpoint of domain) {
    const rule = endpoint.rules.find((r) => r.kind === 'http' && r.matchesHttp(request));
    if (rule !== undefined) return rule;
  }
  return undefined;
}
