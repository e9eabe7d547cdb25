// JSON-RPC error responses boundary writes itself (docs/policy.md#denials-as-json-rpc-errors): the codes, and
// error objects for the ids of a refused request. Pure; the proxy decides when and with which HTTP status.

import type { JsonRpcId, JsonRpcProblem } from '../policy/jsonrpc-match.js';

/**
 * The codes, one per kind of refusal. The standard ones for a body that is not JSON-RPC; boundary's own from the
 * implementation-defined server-error range (-32000 to -32099), clear of the MCP SDK's -32000, -32001, -32042.
 */
export const JSON_RPC_ERROR_CODES = {
  'parse-error': -32700,
  'invalid-request': -32600,
  'invalid-params': -32602,
  /** A call boundary's policy denied (a deny rule, or no allow rule). */
  'policy-denied': -32090,
  /** A tools/list answer boundary was asked to filter but could not hold (docs/policy.md#filtering-toolslist). */
  'tools-list-unfilterable': -32091,
} as const satisfies Record<JsonRpcProblem | 'policy-denied' | 'tools-list-unfilterable', number>;
export type JsonRpcErrorKind = keyof typeof JSON_RPC_ERROR_CODES;

export interface JsonRpcErrorObject {
  readonly jsonrpc: '2.0';
  readonly id: JsonRpcId;
  readonly error: { readonly code: number; readonly message: string; readonly data?: Readonly<Record<string, unknown>> };
}

export function errorResponse(id: JsonRpcId, kind: JsonRpcErrorKind, message: string, data?: Readonly<Record<string, unknown>>): JsonRpcErrorObject {
  const error = data === undefined ? { code: JSON_RPC_ERROR_CODES[kind], message } : { code: JSON_RPC_ERROR_CODES[kind], message, data };
  return { jsonrpc: '2.0', id, error };
}

/** One error per id, as a batch (an array) or the single object a single request is answered with. */
export function errorAnswer(ids: readonly JsonRpcId[], batch: boolean, kind: JsonRpcErrorKind, message: string, data?: Readonly<Record<string, unknown>>): unknown {
  const errors = ids.map((id) => errorResponse(id, kind, message, data));
  return batch ? errors : errors[0];
}
