// How a denied JSON-RPC or MCP request is answered (docs/policy.md#denials-as-json-rpc-errors): every request id
// gets a JSON-RPC error in HTTP 200, so an MCP client reports the refusal to the agent as that call's error and
// the session goes on; a body without a readable id gets HTTP 400 with one error for id null; notifications
// and response frames alone get the L7 403. Also the calls' event fields. Shapes only; decides nothing.

import { errorAnswer, type JsonRpcErrorKind } from '../jsonrpc/answer.js';
import { type JsonRpcCall, type JsonRpcId, type JsonRpcRequest, shownName } from '../policy/jsonrpc-match.js';
import type { Decision } from '../policy/types.js';
import { type Denial, inspectionRefusalDetail, inspectionRefusalSteps, verbatimDenial } from './denials.js';
import type { InspectionRefusal } from './inspected-body.js';

/** Distinct methods (and tools) named in one decision event; the rest are counted, not listed. */
export const MAX_EVENT_CALLS = 32;

/** A body policy could not read at all (too large, compressed, multipart): 400, one error for id null. */
export function jsonRpcRejectedDenial(problem: string): Denial {
  const detail = `JSON-RPC request rejected before policy evaluation: ${problem}`;
  const body = errorAnswer([null], false, 'invalid-request', detail, { error: 'invalid_jsonrpc_request', detail });
  return verbatimDenial(400, 'invalid_jsonrpc_request', body as Denial['body'], ': JSON-RPC request not inspectable', { keepAlive: false });
}

/**
 * A body read whole but refused as read two ways (docs/policy.md#duplicate-json-keys): 400, one error for id null,
 * since which id a repeated key hides is itself what cannot be read.
 */
export function jsonRpcRefusalDenial(refusal: InspectionRefusal): Denial {
  const detail = inspectionRefusalDetail(refusal);
  const data = { error: 'duplicate_json_key', reason: refusal.reason, detail, next_steps: inspectionRefusalSteps(refusal) };
  const body = errorAnswer([null], false, 'invalid-request', detail, data);
  return verbatimDenial(400, 'duplicate_json_key', body as Denial['body'], ': JSON body repeats a key', { keepAlive: true });
}

/**
 * The answer to a denied request whose body was read (`jsonRpc` as decided); `otherwise` is the L7 403 for
 * what has no request id to answer (notifications, responses, the receive stream, a session end).
 */
export function jsonRpcDenial(jsonRpc: JsonRpcRequest | undefined, decision: Decision, otherwise: () => Denial): Denial {
  if (jsonRpc === undefined || jsonRpc.kind === 'receive-stream' || jsonRpc.kind === 'session-end') return otherwise();
  const policy = decision.policy;
  if (jsonRpc.kind === 'error' || decision.reason === 'jsonrpc-rejected') {
    const kind: JsonRpcErrorKind = jsonRpc.kind === 'error' ? jsonRpc.problem : 'invalid-request';
    const ids = jsonRpc.kind === 'error' ? jsonRpc.ids : requestIds(jsonRpc.calls);
    const data = { error: 'invalid_jsonrpc_request', reason: decision.reason, detail: decision.detail };
    // No id to answer: JSON-RPC's answer for an unreadable request is one error for id null, sent as a client error.
    if (ids.length === 0) {
      const body = errorAnswer([null], false, kind, decision.detail, data);
      return verbatimDenial(400, 'invalid_jsonrpc_request', body as Denial['body'], ': JSON-RPC request not inspectable', { policy, keepAlive: true });
    }
    const body = errorAnswer(ids, jsonRpc.batch, kind, decision.detail, data);
    return verbatimDenial(200, 'invalid_jsonrpc_request', body as Denial['body'], ': JSON-RPC request not inspectable', { policy, keepAlive: true });
  }
  const ids = requestIds(jsonRpc.calls);
  if (ids.length === 0) return otherwise();
  const denied = decision.calls?.[0];
  const message = `Denied by boundary policy ${policy ?? '-'}: ${decision.detail}`;
  const data = {
    error: 'policy_denied',
    policy: policy ?? null,
    reason: decision.reason,
    ...(denied === undefined ? {} : { method: denied.method, tool: denied.tool ?? null }),
  };
  const body = errorAnswer(ids, jsonRpc.batch, 'policy-denied', message, data);
  return verbatimDenial(200, 'policy_denied', body as Denial['body'], ` by policy: ${decision.reason}`, { policy, keepAlive: true });
}

function requestIds(calls: readonly JsonRpcCall[]): JsonRpcId[] {
  const ids: JsonRpcId[] = [];
  for (const call of calls) if (call.id !== undefined) ids.push(call.id);
  return ids;
}

/** `rpc_methods` and `tools` for the decision event: names only, never params; bounded (shownName's cut). */
export function callEventFields(calls: readonly JsonRpcCall[]): Record<string, unknown> {
  const methods = [...new Set(calls.map((c) => shownName(c.method)))];
  const tools = [...new Set(calls.flatMap((c) => (c.tool === undefined ? [] : [shownName(c.tool)])))];
  const fields: Record<string, unknown> = { rpc_methods: methods.slice(0, MAX_EVENT_CALLS) };
  if (tools.length > 0) fields.tools = tools.slice(0, MAX_EVENT_CALLS);
  if (methods.length > MAX_EVENT_CALLS || tools.length > MAX_EVENT_CALLS) fields.calls_truncated = true;
  return fields;
}
