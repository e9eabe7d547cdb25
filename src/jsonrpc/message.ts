// JSON-RPC 2.0 request bodies read the way policy needs them (docs/policy.md#json-rpc-and-mcp-inspection): one
// message or a batch -> the calls (method), how many response frames rode along, or why the body is not JSON-RPC;
// and the envelope rules MCP bodies share (mcp-message.ts reads those per revision). JSON via json/strict-json.ts
// (a repeated key is refused). Pure: the chain holds the body (src/chain/inspected-body.ts).

import { type DuplicateKeyRefusal, readJson } from '../json/strict-json.js';
import type { JsonRpcCall, JsonRpcId, JsonRpcRequest } from '../policy/jsonrpc-match.js';

/** MCP tool names under `strict_tool_names` (OpenShell's pattern). */
const STRICT_TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** One message's envelope: a call's method, a response frame, or why it is neither. */
export type Envelope =
  | { readonly kind: 'call'; readonly method: string }
  | { readonly kind: 'response' }
  | { readonly kind: 'invalid'; readonly error: string };

/** A body read, or refused before policy because an object in it repeats a key (docs/policy.md#duplicate-json-keys). */
export type JsonRpcRead = JsonRpcRequest | { readonly refused: DuplicateKeyRefusal };

/**
 * A generic JSON-RPC request body. JSON.parse bounds itself: V8's parser is iterative (a million-deep nesting parses
 * in 0.4 s, no stack overflow), so does the duplicate check, and the body was cut at the endpoint's max_body_bytes
 * before it got here.
 */
export function parseJsonRpcBody(body: Buffer): JsonRpcRead {
  const read = readJson(body.toString('utf8'));
  if (read.kind === 'duplicate-key') return { refused: read.refusal };
  if (read.kind === 'not-json') return { kind: 'error', problem: 'parse-error', error: 'invalid JSON', ids: [], batch: false };
  const json = read.value;
  const batch = Array.isArray(json);
  const items: readonly unknown[] = Array.isArray(json) ? json : [json];
  if (batch && items.length === 0) return { kind: 'error', problem: 'invalid-request', error: 'empty batch', ids: [], batch };
  const calls: JsonRpcCall[] = [];
  let responses = 0;
  for (const item of items) {
    const envelope = readEnvelope(item);
    if (envelope.kind === 'invalid') {
      const error = batch ? `batch item invalid: ${envelope.error}` : envelope.error;
      return { kind: 'error', problem: 'invalid-request', error, ids: items.flatMap(requestId), batch };
    }
    if (envelope.kind === 'response') {
      responses++;
      continue;
    }
    const message = item as Record<string, unknown>;
    // Generic JSON-RPC does not look at id (OpenShell): answers use it only when it is a string, number or null.
    const id: JsonRpcId | undefined = 'id' in message ? (isId(message.id) ? message.id : null) : undefined;
    calls.push({ method: envelope.method, tool: undefined, id });
  }
  return { kind: 'messages', calls, responses, batch };
}

/** The JSON-RPC 2.0 envelope of one message, as both protocols read it. */
export function readEnvelope(item: unknown): Envelope {
  if (!isObject(item) || typeof item.jsonrpc !== 'string') return invalid("missing or non-string 'jsonrpc' field");
  if (item.jsonrpc !== '2.0') return invalid(`unsupported JSON-RPC version '${printable(item.jsonrpc, 32)}'`);
  const answer = 'result' in item || 'error' in item;
  if ('method' in item && answer) return invalid('JSON-RPC message includes both method and result/error');
  if (answer) {
    if ('result' in item && 'error' in item) return invalid('JSON-RPC response includes both result and error');
    if (!('id' in item)) return invalid('JSON-RPC response missing id');
    if (!isId(item.id)) return invalid('JSON-RPC response id must be a string, number or null');
    if ('error' in item && !isObject(item.error)) return invalid('JSON-RPC response error must be an object');
    return { kind: 'response' };
  }
  if (typeof item.method !== 'string') return invalid("missing or non-string 'method' field");
  return { kind: 'call', method: item.method };
}

/** A tool name `strict_tool_names` lets through (the check a tools/call's name gets). */
export function isStrictToolName(name: string): boolean {
  return STRICT_TOOL_NAME.test(name);
}

/** The id of a batch item that is a request, to answer it; nothing for notifications, responses and junk. */
function requestId(item: unknown): JsonRpcId[] {
  if (!isObject(item) || typeof item.method !== 'string' || !('id' in item)) return [];
  return typeof item.id === 'string' || typeof item.id === 'number' ? [item.id] : [];
}

function invalid(error: string): Envelope {
  return { kind: 'invalid', error };
}

function isId(v: unknown): v is JsonRpcId {
  return typeof v === 'string' || typeof v === 'number' || v === null;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Client-chosen text as shown in a detail: bounded, control characters as `?`. */
export function printable(text: string, max: number): string {
  return text.slice(0, max).replace(/[^\x20-\x7e]/g, '?');
}
