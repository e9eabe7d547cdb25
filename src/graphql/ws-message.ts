// GraphQL over WebSocket (docs/policy.md#graphql-over-websocket): a client text message of graphql-transport-ws
// or the legacy graphql-ws protocol, classified for policy. Control messages pass; an operation is read like a
// POST envelope; anything else is an error (the relay closes with 1008). Pure.

import { type DuplicateKeyRefusal, readJson } from '../json/strict-json.js';
import type { GraphqlRequest } from '../policy/graphql-match.js';
import { graphqlFromEnvelope } from './envelope.js';

/** Messages that carry no operation: always allowed (OpenShell's list for both protocols). */
const CONTROL_TYPES: ReadonlySet<string> = new Set(['connection_init', 'connection_terminate', 'ping', 'pong', 'complete', 'stop']);
/** `subscribe` (graphql-transport-ws) and `start` (graphql-ws) carry an operation in `payload`. */
const OPERATION_TYPES: ReadonlySet<string> = new Set(['subscribe', 'start']);

export type GraphqlWsMessage =
  | { readonly kind: 'control'; readonly type: string }
  | { readonly kind: 'operation'; readonly request: GraphqlRequest }
  /** Read two ways (docs/policy.md#duplicate-json-keys): refused whatever the policy says. */
  | { readonly kind: 'refused'; readonly refusal: DuplicateKeyRefusal };

export function classifyGraphqlWsMessage(text: string): GraphqlWsMessage {
  const json = readJson(text);
  if (json.kind === 'duplicate-key') return { kind: 'refused', refusal: json.refusal };
  if (json.kind === 'not-json') return failed('GraphQL WebSocket message is not JSON');
  const message = json.value;
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return failed('GraphQL WebSocket message must be an object');
  const { type, id, payload } = message as Record<string, unknown>;
  if (typeof type !== 'string') return failed('GraphQL WebSocket message has no type');
  if (CONTROL_TYPES.has(type)) return { kind: 'control', type };
  if (!OPERATION_TYPES.has(type)) return failed(`GraphQL WebSocket message type "${type}" is not supported`);
  if (typeof id !== 'string' || id === '') return failed(`GraphQL WebSocket ${type} needs a non-empty string id`);
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return failed(`GraphQL WebSocket ${type} needs an object payload`);
  return { kind: 'operation', request: graphqlFromEnvelope(payload as Record<string, unknown>) };
}

function failed(error: string): GraphqlWsMessage {
  return { kind: 'operation', request: { error } };
}
