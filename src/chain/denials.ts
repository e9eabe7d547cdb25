// Denials (docs/destinations.md#denial-responses): the JSON body an agent reads, its status and a bounded ASCII reason
// phrase for the status line (`403 Forbidden by policy: no endpoint for other.test:443`: a CONNECT client never shows the
// body, but it shows the reason phrase), and next_steps. Values only; proxy/answer.ts writes them.

import { STATUS_CODES } from '../shared/node-http.js';
import type { Adapter, Decision, DecisionReason, Policy } from '../policy/types.js';
import { type NextStep, policyNextSteps } from '../policy/suggest.js';
import { redactPlaceholders } from '../credentials/placeholder.js';
import type { InspectionRefusal } from './inspected-body.js';

/**
 * A reason phrase longer than this is cut (with `...`): it travels in a status line that clients print whole, and
 * a bounded line can never be used to stuff a log.
 */
export const MAX_REASON_PHRASE_LENGTH = 160;
// RFC 9110 reason-phrase is HTAB / SP / VCHAR / obs-text; we allow only SP and visible ASCII, so no CR/LF can split the head.
const UNSAFE_PHRASE_CHARS = /[^\x20-\x7e]/g;
const ELLIPSIS = '...';

const DENIAL_ERRORS = [
  'policy_denied',
  'ssrf_denied',
  'request_authority_mismatch',
  'unsupported_l7_protocol',
  'unsupported_proxy_scheme',
  'use_connect_for_https',
  'framing_header_lookalike',
  'method_override_invalid',
  'upstream_unreachable',
  // docs/running.md#corporate-upstream-proxy: the corporate proxy, not the origin, failed the dial.
  'upstream_proxy_refused',
  'upstream_proxy_unreachable',
  'upstream_proxy_timeout',
  'upstream_proxy_malformed',
  'upstream_protocol_error',
  'upstream_client_certificate_rejected',
  'tls_termination_unavailable',
  'too_many_connections',
  'too_many_connections_from_source',
  'uninspected_credentials',
  'credential_endpoint_mismatch',
  'credential_unavailable',
  'credential_body_too_large',
  'credential_response_unreadable',
  'invalid_graphql_request',
  'invalid_jsonrpc_request',
  'ambiguous_graphql_request',
  'duplicate_json_key',
  // docs/policy.md#mcp-protocol-revisions: an MCP request refused by its revision before policy, under audit too.
  'invalid_mcp_protocol_version_header',
  'unsupported_mcp_protocol_version',
  'mcp_protocol_version_not_allowed',
  'mcp_http_method_not_allowed',
  'invalid_mcp_request',
  'invalid_mcp_request_metadata',
  'lookup_rate_limited',
  'lookup_tunnel_suspected',
  'middleware_denied',
  'middleware_failed',
  'response_delivery_failed',
] as const;
export type DenialError = (typeof DENIAL_ERRORS)[number];

export interface Denial {
  readonly status: number;
  readonly error: DenialError;
  /** An object, or the array of a JSON-RPC batch answer. */
  readonly body: Readonly<Record<string, unknown>> | readonly unknown[];
  /** The status line's reason phrase: safeReasonPhrase() of the status text and a short why. */
  readonly reasonPhrase: string;
  /** Policy key for the X-Boundary-Policy header (L7 denials). */
  readonly policy?: string;
  /** The request was read whole, so the connection may serve the next one (JSON-RPC answers); else it is closed. */
  readonly keepAlive?: boolean;
  /** Sent as `Retry-After` (a rate limit). */
  readonly retryAfterSeconds?: number;
  /** Sent as `Allow`: the methods the target takes (a 405). */
  readonly allow?: string;
}

/** What a policy denial's next steps are worked out from: the live policy and the denied request, never its query. */
export interface DeniedRequest {
  readonly policy: Policy;
  readonly adapter: Adapter;
}

/**
 * `<status text><why>` with anything but SP and visible ASCII replaced by `?`, cut at MAX_REASON_PHRASE_LENGTH.
 * Callers build `why` from closed sets, normalised hosts, ports and methods only: never a path, query or placeholder.
 */
export function safeReasonPhrase(status: number, why: string): string {
  const phrase = `${STATUS_CODES[status] ?? 'Error'}${why}`.replace(UNSAFE_PHRASE_CHARS, '?');
  return phrase.length <= MAX_REASON_PHRASE_LENGTH ? phrase : `${phrase.slice(0, MAX_REASON_PHRASE_LENGTH - ELLIPSIS.length)}${ELLIPSIS}`;
}

/** A JSON denial `{ error, ...fields }` with its reason phrase. */
export function denial(status: number, error: DenialError, fields: Record<string, unknown>, why: string, policy?: string): Denial {
  return { status, error, body: { error, ...fields }, reasonPhrase: safeReasonPhrase(status, why), ...(policy === undefined ? {} : { policy }) };
}

/** A denial whose body is written as given, not wrapped in `{ error, ... }`: a JSON-RPC answer (proxy/jsonrpc-denial.ts). */
export function verbatimDenial(
  status: number,
  error: DenialError,
  body: Denial['body'],
  why: string,
  options: { readonly policy?: string | undefined; readonly keepAlive: boolean },
): Denial {
  const policy = options.policy === undefined ? {} : { policy: options.policy };
  return { status, error, body, reasonPhrase: safeReasonPhrase(status, why), ...policy, keepAlive: options.keepAlive };
}

/** The phrase's why for a policy denial: the closed reason, in words, with the target (and method for L7). */
function policyWhy(reason: DecisionReason | 'policy-changed', target: string, method?: string): string {
  const what = method === undefined ? target : `${method} on ${target}`;
  switch (reason) {
    case 'no-policy':
      return ` by policy: no policy is in effect for ${target}`;
    case 'no-endpoint-matched':
      return ` by policy: no endpoint for ${target}`;
    case 'binary-not-allowed':
      return ` by policy: binary not allowed for ${target}`;
    case 'deny-rule-matched':
      return ` by policy: a deny rule matches ${what}`;
    case 'no-rule-matched':
      return ` by policy: no rule allows ${what}`;
    case 'unsupported-l7-protocol':
      return ` by policy: protocol not inspected for ${target}`;
    case 'policy-changed':
      return ` by policy: policy changed while connecting to ${target}`;
    default:
      return ` by policy: ${reason} for ${target}`;
  }
}

/** next_steps of a policy denial; the intent is rebuilt without a query, so no suggestion can carry one. */
function policySteps(request: DeniedRequest, decision: Decision, intent: { host: string; port: number; method?: string; path?: string }): readonly NextStep[] {
  return policyNextSteps({ policy: request.policy, decision, intent: { adapter: request.adapter, ...intent } });
}

export function connectPolicyDenial(host: string, port: number, target: string, decision: Decision, request: DeniedRequest): Denial {
  return denial(
    403,
    'policy_denied',
    { detail: `CONNECT ${target} not permitted by policy`, reason: decision.reason, next_steps: policySteps(request, decision, { host, port }) },
    policyWhy(decision.reason, target),
  );
}

export function forwardPolicyDenial(method: string, target: string, path: string, decision: Decision, request: DeniedRequest & { host: string; port: number }): Denial {
  return denial(
    403,
    'policy_denied',
    {
      detail: `${method} ${target}${path} not permitted by policy`,
      reason: decision.reason,
      next_steps: policySteps(request, decision, { host: request.host, port: request.port, method, path }),
    },
    policyWhy(decision.reason, target, method),
  );
}

export function policyChangedDenial(target: string): Denial {
  return denial(
    403,
    'policy_denied',
    {
      detail: `CONNECT ${target} denied: policy changed while connecting`,
      reason: 'policy-changed',
      next_steps: [{ kind: 'retry_after_reload', message: 'the policy was reloaded while connecting; retry once to be decided by the new policy' }],
    },
    policyWhy('policy-changed', target),
  );
}

/**
 * The L7 body: field-compatible with OpenShell; `path` is the canonical path, never the query. `rule` is the rule the
 * decision rests on, as `policy explain` names it: the deny rule that matched, or the allow rule that is missing
 * (`rule_missing` describes it field by field, null when a deny rule matched: no allow rule can win over it).
 */
export function l7PolicyDenial(request: { method: string; path: string; host: string; port: number }, decision: Decision, denied: DeniedRequest): Denial {
  const { method, path, host, port } = request;
  const protocol = decision.endpoint?.protocol ?? 'rest';
  const denyRule = decision.reason === 'deny-rule-matched';
  return denial(
    403,
    'policy_denied',
    {
      policy: decision.policy ?? null,
      rule: decision.rule ?? null,
      detail: decision.detail,
      reason: decision.reason,
      layer: 'l7',
      protocol,
      method,
      path,
      host,
      port,
      rule_missing: denyRule ? null : { type: `${protocol}_allow`, layer: 'l7', method, path, host, port },
      next_steps: policySteps(denied, decision, { host, port, method, path }),
    },
    policyWhy(decision.reason, `${host}:${port}`, method),
    decision.policy ?? '-',
  );
}

/** SSRF checks that no policy can lift; the rest depend on the endpoint's allowed_ips (docs/destinations.md#validation-plans). */
const UNLIFTABLE_SSRF_CHECKS: ReadonlySet<string> = new Set(['self-address', 'always-blocked', 'metadata-name', 'local-name', 'invalid-host', 'control-plane-port']);

function ssrfSteps(target: string, check: string): readonly NextStep[] {
  if (UNLIFTABLE_SSRF_CHECKS.has(check)) {
    return [{ kind: 'not_allowable', message: `${target} is always blocked by the SSRF rules (${check}): the refusal is permanent and no policy change can allow it` }];
  }
  if (check === 'no-addresses') return [{ kind: 'not_allowable', message: `${target} has no address that passed validation; check its DNS` }];
  return [{
    kind: 'set_allowed_ips',
    message: `${target} resolved to addresses the endpoint does not allow (${check}); list them in the endpoint's allowed_ips only if this internal destination is intended`,
  }];
}

export function ssrfDenial(target: string, check: string, message: string): Denial {
  return denial(403, 'ssrf_denied', { detail: `${target} blocked: ${check} check failed`, check, message, next_steps: ssrfSteps(target, check) }, ` by SSRF rules: ${check} for ${target}`);
}

export function authorityMismatchDenial(expected: string): Denial {
  return denial(
    403,
    'request_authority_mismatch',
    { message: `the request authority must equal the tunnel target ${expected}` },
    `: request authority must be the tunnel target ${expected}`,
  );
}

export function unsupportedL7Denial(detail: string): Denial {
  return denial(403, 'unsupported_l7_protocol', { detail }, ': protocol not supported on an inspected route');
}

/** docs/policy.md#graphql-inspection: a GraphQL body boundary cannot inspect is refused before policy is asked. */
export function graphqlRejectedDenial(problem: string): Denial {
  return denial(400, 'invalid_graphql_request', { detail: `GraphQL request rejected before policy evaluation: ${problem}` }, ': GraphQL request not inspectable');
}

/** The event's and the answer's sentence for a request refused as read two ways (docs/policy.md#one-reading). */
export function inspectionRefusalDetail(refusal: InspectionRefusal): string {
  // The problem names a key the client chose: placeholders are shown as `[CREDENTIAL]`, as everywhere else.
  const problem = redactPlaceholders(refusal.problem);
  return refusal.reason === 'graphql-ambiguous'
    ? `GraphQL request refused: ${problem}`
    : `request body refused: ${problem}; parsers that keep the first value and parsers that keep the last would read different requests`;
}

/** What the client changes: never a policy entry, since no policy lets a request through that is read two ways. */
export function inspectionRefusalSteps(refusal: InspectionRefusal): readonly NextStep[] {
  const message =
    refusal.reason === 'graphql-ambiguous'
      ? 'send query, operationName, variables and extensions in one place: the JSON body of a POST sent as application/json, or the query string of a GET without a body; each once, spelled exactly, percent-encoded'
      : 'send every key at most once in each JSON object of the body';
  return [{ kind: 'fix_request', message }];
}

/** docs/policy.md#one-reading: a GraphQL request read two ways, or a body repeating a key on a GraphQL endpoint. */
export function inspectionRefusalDenial(refusal: InspectionRefusal): Denial {
  const error = refusal.reason === 'graphql-ambiguous' ? 'ambiguous_graphql_request' : 'duplicate_json_key';
  const why = refusal.reason === 'graphql-ambiguous' ? ': GraphQL request can be read two ways' : ': JSON body repeats a key';
  const fields = { detail: inspectionRefusalDetail(refusal), reason: refusal.reason, next_steps: inspectionRefusalSteps(refusal) };
  return denial(400, error, fields, why);
}

/** docs/credentials.md#inspectable-routes-only: a credentialed route that cannot be inspected (`tls: skip`, raw TCP). */
export function uninspectedCredentialsDenial(target: string): Denial {
  return denial(
    403,
    'uninspected_credentials',
    { detail: `${target} carries credentials but its route is not inspected; set allow_uninspected_credentials to permit it` },
    `: credentials on an uninspected route to ${target}`,
  );
}

// Fixed words per credential error: the refusal's own message may name a key the workload sent, so it stays in the body.
const CREDENTIAL_WHY: Readonly<Record<string, string>> = {
  credential_endpoint_mismatch: ': credential is bound to another endpoint',
  credential_unavailable: ': credential unavailable',
  credential_body_too_large: ': body too large for credential rewrite',
};

/** A credential rewrite refusal: `{ error, message }` exactly as the credentials module phrased it. */
export function credentialDenial(refusal: { readonly status: number; readonly error: DenialError; readonly message: string }): Denial {
  const steps: readonly NextStep[] =
    refusal.error === 'credential_endpoint_mismatch'
      ? [{ kind: 'use_bound_endpoint', message: 'the placeholder names a credential bound to another endpoint; send it only to the endpoint its provider is bound to' }]
      : [];
  return denial(refusal.status, refusal.error, { message: refusal.message, next_steps: steps }, CREDENTIAL_WHY[refusal.error] ?? '');
}

/**
 * An answer on a credentialed route that boundary cannot scan for the credentials it holds (docs/credentials.md#echoed-secrets):
 * a content coding it asked the origin not to use. `coding` is the origin's header value, cut to a token.
 */
export function unreadableResponseDenial(coding: string): Denial {
  const named = /^[A-Za-z0-9._+-]{1,32}$/.test(coding) ? coding : 'an unknown coding';
  return denial(
    502,
    'credential_response_unreadable',
    {
      message: `the origin answered in ${named} although asked for an unencoded answer; boundary cannot check such an answer for the credentials bound to this endpoint`,
      next_steps: [],
    },
    ': answer cannot be checked for credentials',
  );
}

export function tooManyConnectionsDenial(limit: number): Denial {
  return denial(503, 'too_many_connections', { detail: `the proxy holds its limit of ${limit} connections` }, ': proxy connection limit reached');
}

/** The source address holds its share of the listener (proxy/admission.ts): the rest is kept for other sources. */
export function tooManyConnectionsFromSourceDenial(perSource: number): Denial {
  return denial(
    503,
    'too_many_connections_from_source',
    { detail: `this source address holds its share of ${perSource} proxy connections` },
    ': proxy connection limit for this source reached',
  );
}

export function unsupportedSchemeDenial(scheme: string): Denial {
  return denial(400, 'unsupported_proxy_scheme', { detail: `scheme ${scheme} is not supported by this proxy` }, ': scheme not supported by this proxy');
}

export function useConnectDenial(): Denial {
  return denial(
    400,
    'use_connect_for_https',
    { detail: 'https:// URLs must be sent through a CONNECT tunnel (set HTTPS_PROXY), not in absolute form' },
    ': use CONNECT for https URLs',
  );
}

/**
 * docs/destinations.md#framing-header-lookalikes: a name such as `Transfer_Encoding` is read as the framing header
 * by origins behind a CGI/WSGI-style mapping. `folds_into` is the framing name, never the client's spelling.
 */
export function framingLookalikeDenial(foldsInto: string): Denial {
  return denial(
    400,
    'framing_header_lookalike',
    { detail: `a header name folds into ${foldsInto} when _ is read as -; send the real header or rename it`, folds_into: foldsInto },
    `: header name folds into ${foldsInto}`,
  );
}

/** docs/destinations.md#method-override-headers: an override that cannot be decided (repeated, a list, not a token). */
export function methodOverrideDenial(problem: string): Denial {
  return denial(
    400,
    'method_override_invalid',
    { detail: 'send at most one X-HTTP-Method-Override, X-HTTP-Method or X-Method-Override header, with a single method', problem },
    `: method override refused (${problem})`,
  );
}
