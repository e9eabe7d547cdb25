// The GraphQL part of decide() (docs/policy.md#graphql-inspection), kept beside decide.ts: what the endpoints
// decide.ts selected for a request say about its parsed operations. Pure; decide.ts turns the outcome into a Decision.

import type { GraphqlOperation, GraphqlRequest } from './graphql-match.js';
import type { DecisionReason, Endpoint, HttpRequestView, L7Rule, Verdict } from './types.js';

/**
 * An endpoint whose rules decide GraphQL: `protocol: graphql`, or a websocket endpoint with GraphQL rules or a
 * persisted-query option, for its text messages (docs/policy.md#graphql-over-websocket).
 */
export function decidesGraphql(endpoint: Endpoint, method: string): boolean {
  if (endpoint.protocol === 'graphql') return true;
  if (endpoint.protocol !== 'websocket' || method !== 'WEBSOCKET_TEXT') return false;
  return hasGraphqlPolicy(endpoint);
}

/** OpenShell's opt-in for GraphQL over WebSocket: a GraphQL rule, a registry, or persisted_queries other than deny. */
export function hasGraphqlPolicy(endpoint: Endpoint): boolean {
  const o = endpoint.options;
  return [...endpoint.rules, ...endpoint.denyRules].some((r) => r.kind === 'graphql') || o.persistedQueries !== 'deny' || (o.graphqlPersistedQueries?.size ?? 0) > 0;
}

export interface GraphqlInput {
  /** `POST /graphql on host:port`, for details. */
  readonly said: string;
  readonly request: HttpRequestView;
  /** The most specific inspected endpoints for the path; at least one is `protocol: graphql`. */
  readonly selected: readonly Endpoint[];
  readonly missing: string;
  /** Undefined when the proxy did not parse the request: fail closed. */
  readonly graphql: GraphqlRequest | undefined;
  /** A policy miss's verdict on this endpoint (audit forwards it). */
  readonly soft: (endpoint: Endpoint) => Verdict;
}

export interface GraphqlOutcome {
  readonly verdict: Verdict;
  readonly reason: DecisionReason;
  readonly detail: string;
  readonly endpoint: Endpoint;
  readonly rule: string;
}

/**
 * An unreadable request is denied even under audit; then any deny rule of a selected endpoint (a REST one's too)
 * on any operation; then every operation (every batch item) must be allowed by each selected GraphQL endpoint,
 * so a broad REST rule beside it never lets a mutation through.
 */
export function evaluateGraphql(input: GraphqlInput): GraphqlOutcome {
  const { said, request, selected, missing, graphql, soft } = input;
  const gql = selected.filter((e) => decidesGraphql(e, request.method));
  const first = gql[0] as Endpoint;
  if (graphql === undefined || 'error' in graphql) {
    const why = graphql === undefined ? 'the request was not inspected' : graphql.error;
    return { verdict: 'deny', reason: 'graphql-rejected', detail: `GraphQL request rejected: ${why}; ${said} is denied`, endpoint: first, rule: missing };
  }
  for (const endpoint of selected) {
    for (const op of graphql.operations) {
      const seen = decidesGraphql(endpoint, request.method) ? resolved(endpoint, op) : undefined;
      const rule = endpoint.denyRules.find((r) => (seen !== undefined && r.matchesGraphql?.(seen) === true) || r.matchesHttp(request));
      if (rule !== undefined) {
        const detail = `GraphQL operation blocked by endpoint policy: ${describe(op)} in ${said} matches deny rule ${rule.text}`;
        return { verdict: soft(endpoint), reason: 'deny-rule-matched', detail, endpoint, rule: rule.text };
      }
    }
  }
  let allowedBy: L7Rule | undefined;
  for (const endpoint of gql) {
    for (const op of graphql.operations) {
      const seen = resolved(endpoint, op);
      if (seen === undefined) {
        const detail = `GraphQL persisted query is not registered: ${describe(op)} in ${said}`;
        return { verdict: soft(endpoint), reason: 'no-rule-matched', detail, endpoint, rule: missing };
      }
      const rule = endpoint.rules.find((r) => r.matchesGraphql?.(seen) === true);
      if (rule === undefined) {
        const detail = `GraphQL operation not permitted by policy ${endpoint.policy}: ${describe(seen)} in ${said}`;
        return { verdict: soft(endpoint), reason: 'no-rule-matched', detail, endpoint, rule: describe(seen) };
      }
      allowedBy ??= rule;
    }
  }
  // The envelope reader never yields an empty list; were it to, nothing was allowed.
  if (allowedBy === undefined) return { verdict: 'deny', reason: 'graphql-rejected', detail: `GraphQL request has no operation; ${said} is denied`, endpoint: first, rule: missing };
  const reason = first.access === undefined ? 'rule-allowed' : 'preset-allowed';
  return { verdict: 'allow', reason, detail: `${said} (${graphql.operations.map(describe).join('; ')}) is allowed by ${allowedBy.text}`, endpoint: first, rule: allowedBy.text };
}

/** A hash-only operation as its registry entry (hash first, then id), or undefined when it may not be used. */
function resolved(endpoint: Endpoint, op: GraphqlOperation): GraphqlOperation | undefined {
  if (!op.hashOnly) return op;
  if (endpoint.options.persistedQueries !== 'allow_registered') return undefined;
  const registry = endpoint.options.graphqlPersistedQueries;
  return (op.hash === undefined ? undefined : registry?.get(op.hash)) ?? (op.id === undefined ? undefined : registry?.get(op.id));
}

/** `mutation DeleteRepo {deleteRepository}`, or `persisted <hash>`: names and root fields only, never arguments. */
function describe(op: GraphqlOperation): string {
  if (op.hashOnly) return `persisted ${op.hash ?? op.id ?? '-'}`;
  return `${op.type} ${op.name ?? '-'} {${op.fields.join(', ')}}`;
}
