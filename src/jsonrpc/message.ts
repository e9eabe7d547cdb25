// JSON-RPC 2.0 request bodies read the way policy needs them (docs/policy.md#json-rpc-and-mcp-inspection): one
// message or a batch -> the calls (method; for MCP tools/call, the tool), how many response frames rode along,
// or why the body is not JSON-RPC. JSON via json/strict-json.ts (a repeated key is refused); MCP params via the
// SDK's schemas (mcp-params.ts). Pure: the proxy holds the body (src/proxy/inspected-body.ts).

import { type DuplicateKeyRefusal, readJson } from '../json/strict-json.js';
import type { JsonRpcCall, JsonRpcId, JsonRpcProblem, JsonRpcRequest } from '../policy/jsonrpc-match.js';
import { mcpParamsProblem } from './mcp-params.js';

/** MCP tool names under `strict_tool_names` (OpenShell's pattern). */
const STRICT_TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** How a body is read: generic JSON-RPC, or MCP with its typed params and tool names. */
export type JsonRpcMode = { readonly mcp: false } | { readonly mcp: true; readonly strictToolNames: boolean };

type Message =
  | { readonly kind: 'call'; readonly call: JsonRpcCall }
  | { readonly kind: 'response' }
  | { readonly kind: 'error'; readonly problem: JsonRpcProblem; readonly error: string };

class MessageError extends Error {
  override readonly name = 'MessageError';
  readonly problem: JsonRpcProblem;
  constructor(problem: JsonRpcProblem, message: string) {
    super(message);
    this.problem = problem;
  }
}

/** A body read, or refused before policy because an object in it repeats a key (docs/policy.md#duplicate-json-keys). */
export type JsonRpcRead = JsonRpcRequest | { readonly refused: DuplicateKeyRefusal };

/**
 * A request body. JSON.parse bounds itself: V8's parser is iterative (a million-deep nesting parses in 0.4 s,
 * no stack overflow), so does the duplicate check, and the body was cut at the endpoint's max_body_bytes before
 * it got here.
 */
export function parseJsonRpcBody(body: Buffer, mode: JsonRpcMode): JsonRpcRead {
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
    const message = readMessage(item, mode);
    if (message.kind === 'error') {
      const error = batch ? `batch item invalid: ${message.error}` : message.error;
      return { kind: 'error', problem: message.problem, error, ids: items.flatMap(requestId), batch };
    }
    if (message.kind === 'response') responses++;
    else calls.push(message.call);
  }
  return { kind: 'messages', calls, responses, batch };
}

function readMessage(item: unknown, mode: JsonRpcMode): Message {
  try {
    return classify(item, mode);
  } catch (err) {
    if (err instanceof MessageError) return { kind: 'error', problem: err.problem, error: err.message };
    throw err;
  }
}

function classify(item: unknown, mode: JsonRpcMode): Message {
  if (!isObject(item) || typeof item.jsonrpc !== 'string') throw invalid("missing or non-string 'jsonrpc' field");
  if (item.jsonrpc !== '2.0') throw invalid(`unsupported JSON-RPC version '${printable(item.jsonrpc)}'`);
  const answer = 'result' in item || 'error' in item;
  if ('method' in item && answer) throw invalid('JSON-RPC message includes both method and result/error');
  if (answer) {
    if ('result' in item && 'error' in item) throw invalid('JSON-RPC response includes both result and error');
    if (!('id' in item)) throw invalid('JSON-RPC response missing id');
    if (!isId(item.id)) throw invalid('JSON-RPC response id must be a string, number or null');
    if ('error' in item && !isObject(item.error)) throw invalid('JSON-RPC response error must be an object');
    return { kind: 'response' };
  }
  if (typeof item.method !== 'string') throw invalid("missing or non-string 'method' field");
  const method = item.method;
  const hasId = 'id' in item;
  // Generic JSON-RPC does not look at id (OpenShell): answers use it only when it is a string, number or null.
  const id: JsonRpcId | undefined = hasId && isId(item.id) ? item.id : hasId ? null : undefined;
  if (!mode.mcp) return { kind: 'call', call: { method, tool: undefined, id } };
  if (hasId && !(typeof item.id === 'string' || Number.isInteger(item.id))) throw invalid('invalid MCP request: id must be a string or an integer');
  // Requests are checked as requests, notifications/* as notifications; the other pairings are extension messages.
  const problem = hasId === method.startsWith('notifications/') ? undefined : mcpParamsProblem(method, item.params);
  if (problem !== undefined) throw new MessageError('invalid-params', `invalid MCP ${hasId ? 'request' : 'notification'} params: ${problem}`);
  if (method !== 'tools/call' || !hasId) return { kind: 'call', call: { method, tool: undefined, id } };
  // Only tools/call exposes a param to policy, and only its name (the schema made it a string).
  const tool = (item.params as { name: string }).name;
  if (mode.strictToolNames && !isStrictToolName(tool)) {
    throw new MessageError('invalid-params', 'MCP tool name must match ^[A-Za-z0-9_.-]{1,128}$ when strict_tool_names is enabled');
  }
  return { kind: 'call', call: { method, tool, id } };
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

function invalid(message: string): MessageError {
  return new MessageError('invalid-request', message);
}

function isId(v: unknown): v is JsonRpcId {
  return typeof v === 'string' || typeof v === 'number' || v === null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A version string as shown in a detail: bounded, control characters as `?`. */
function printable(text: string): string {
  return text.slice(0, 32).replace(/[^\x20-\x7e]/g, '?');
}
