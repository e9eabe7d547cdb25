// MCP request bodies read under one protocol revision (docs/policy.md#mcp-protocol-revisions): the revision's core
// methods, batches (2025-03-26 only, at most 64 messages), `_meta` agreeing with the revision, `initialize` alone,
// methods only servers send, the typed params of known methods (the MCP SDK's schemas, mcp-params.ts), strict tool
// names, and the sessionless revision's `_meta` and one message per POST. Pure; the chain holds the body.

import { readJson } from '../json/strict-json.js';
import type { JsonRpcCall, JsonRpcId, JsonRpcRequest } from '../policy/jsonrpc-match.js';
import { mcpParamsProblem } from './mcp-params.js';
import {
  BATCH_MCP_REVISION,
  MAX_MCP_BATCH_MESSAGES,
  type McpRevision,
  mcpMethodClass,
  META_CLIENT_CAPABILITIES,
  META_PROTOCOL_VERSION,
  isServerRequest,
  SESSIONLESS_MCP_REVISION,
} from './mcp-revisions.js';
import { isObject, isStrictToolName, printable, readEnvelope } from './message.js';

/** A `_meta` key: an optional prefix of dot-separated labels ending in `/`, then a name (MCP's key syntax). */
const META_KEY = /^(?:[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\/)?(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?$/;
/** Methods whose name the sessionless revision mirrors in `Mcp-Name`, and the params key it mirrors. */
const NAMED_PARAM: Readonly<Record<string, 'name' | 'uri'>> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' };

export interface McpOptions {
  readonly revision: McpRevision;
  readonly strictToolNames: boolean;
}

/** The one message of a body, as the sessionless revision's mirrored headers must repeat it. */
export interface McpSingle {
  readonly method: string;
  readonly request: boolean;
  /** `Mcp-Name`'s counterpart (params.name or params.uri) for the methods that have one. */
  readonly name: string | undefined;
  readonly named: boolean;
}

export type McpRead =
  | {
      readonly ok: true;
      readonly request: Extract<JsonRpcRequest, { kind: 'messages' }>;
      readonly bootstrap: boolean;
      /** Set when the body is one call (not a batch, not a response). */
      readonly single: McpSingle | undefined;
    }
  /** Not an MCP request of this revision: answered 400 `invalid_mcp_request`, under audit too. */
  | { readonly ok: false; readonly problem: string; readonly duplicateKey: boolean; readonly bootstrap: boolean };

class McpProblem extends Error {
  override readonly name = 'McpProblem';
}

/** Reads a held body under `options.revision`. */
export function readMcpBody(body: Buffer, options: McpOptions): McpRead {
  const read = readJson(body.toString('utf8'));
  if (read.kind === 'duplicate-key') return { ok: false, problem: read.refusal.problem, duplicateKey: true, bootstrap: false };
  if (read.kind === 'not-json') return { ok: false, problem: 'invalid JSON', duplicateKey: false, bootstrap: false };
  const json = read.value;
  const bootstrap = isBootstrap(json);
  try {
    return { ok: true, bootstrap, ...messages(json, options) };
  } catch (err) {
    if (err instanceof McpProblem) return { ok: false, problem: err.message, duplicateKey: false, bootstrap };
    throw err;
  }
}

/**
 * A legacy `initialize` request: one object with an id, whose `_meta` does not declare the sessionless revision.
 * Whether the revision allowlist applies to it is the caller's question.
 */
function isBootstrap(json: unknown): boolean {
  if (!isObject(json) || json.method !== 'initialize' || !('id' in json)) return false;
  const meta = isObject(json.params) ? json.params._meta : undefined;
  return !(isObject(meta) && meta[META_PROTOCOL_VERSION] === SESSIONLESS_MCP_REVISION);
}

function messages(json: unknown, options: McpOptions): Omit<Extract<McpRead, { ok: true }>, 'ok' | 'bootstrap'> {
  const batch = Array.isArray(json);
  if (!batch) {
    const message = readMessage(json, options, false);
    const calls = message === undefined ? [] : [message.call];
    return { request: { kind: 'messages', calls, responses: message === undefined ? 1 : 0, batch }, single: message?.single };
  }
  if (options.revision !== BATCH_MCP_REVISION) throw new McpProblem(`JSON-RPC batches are not accepted under MCP ${options.revision}`);
  if (json.length === 0) throw new McpProblem('empty batch');
  if (json.length > MAX_MCP_BATCH_MESSAGES) throw new McpProblem(`a batch holds ${json.length} messages; at most ${MAX_MCP_BATCH_MESSAGES} are accepted`);
  const calls: JsonRpcCall[] = [];
  let responses = 0;
  json.forEach((item: unknown, i: number) => {
    const message = readMessage(item, options, true, i);
    if (message === undefined) responses++;
    else calls.push(message.call);
  });
  return { request: { kind: 'messages', calls, responses, batch }, single: undefined };
}

/** One message: its call, or undefined for a response frame. */
function readMessage(item: unknown, options: McpOptions, batched: boolean, index?: number): { call: JsonRpcCall; single: McpSingle } | undefined {
  const at = index === undefined ? '' : `batch item ${index}: `;
  const fail = (why: string): McpProblem => new McpProblem(`${at}${why}`);
  const { revision } = options;
  const envelope = readEnvelope(item);
  if (envelope.kind === 'invalid') throw fail(envelope.error);
  if (envelope.kind === 'response') {
    if (revision === SESSIONLESS_MCP_REVISION) throw fail(`a client does not send JSON-RPC responses under MCP ${revision}`);
    return undefined;
  }
  const message = item as Record<string, unknown>;
  const { method } = envelope;
  const request = 'id' in message;
  if (request && !(typeof message.id === 'string' || Number.isInteger(message.id))) throw fail('id must be a string or an integer');
  const id: JsonRpcId | undefined = request ? (message.id as JsonRpcId) : undefined;
  const shown = (): string => printable(method, 128);
  const kind = mcpMethodClass(revision, method);
  if (kind === 'unavailable') throw fail(`method '${shown()}' is not available in MCP ${revision}`);
  if (request && isServerRequest(method)) throw fail(`'${shown()}' is a request only servers send`);
  if (method === 'initialize' && (batched || !request)) throw fail('initialize must be one request with an id, never batched');
  const params = message.params;
  checkMeta(params, options, request, fail);
  if (kind === 'core') {
    // Requests are checked as requests, notifications/* as notifications (the SDK's schemas by message kind).
    const problem = request === method.startsWith('notifications/') ? `'${shown()}' sent as a ${request ? 'request' : 'notification'}` : paramsProblem(method, params);
    if (problem !== undefined) throw fail(`invalid MCP ${request ? 'request' : 'notification'} params: ${problem}`);
  }
  const nameKey = kind === 'core' ? NAMED_PARAM[method] : undefined;
  const named = nameKey !== undefined && request;
  const name = named ? ((params as Record<string, unknown>)[nameKey] as string) : undefined;
  const tool = method === 'tools/call' && request ? name : undefined;
  if (tool !== undefined && options.strictToolNames && !isStrictToolName(tool)) {
    throw fail('MCP tool name must match ^[A-Za-z0-9_.-]{1,128}$ when strict_tool_names is enabled');
  }
  return { call: { method, tool, id, extension: kind === 'extension' }, single: { method, request, name, named } };
}

/** The SDK schema's problem, or the sessionless revision's own methods, whose shapes the SDK does not know yet. */
function paramsProblem(method: string, params: unknown): string | undefined {
  if (method === 'subscriptions/listen') return isObject(params) && isObject(params.notifications) ? undefined : 'params.notifications must be an object';
  if (method === 'server/discover') return params === undefined || isObject(params) ? undefined : 'params must be an object';
  return mcpParamsProblem(method, params);
}

/**
 * `params._meta`: a declared revision must be the selected one; under the sessionless revision every request
 * carries the revision and the client's capabilities, and every `_meta` key follows MCP's key syntax.
 */
function checkMeta(params: unknown, options: McpOptions, request: boolean, fail: (why: string) => McpProblem): void {
  const meta = isObject(params) ? params._meta : undefined;
  const declared = isObject(meta) ? meta[META_PROTOCOL_VERSION] : undefined;
  if (declared !== undefined && declared !== options.revision) {
    throw fail(`params._meta declares MCP ${typeof declared === 'string' ? printable(declared, 32) : 'a non-string revision'}, not the selected ${options.revision}`);
  }
  if (options.revision !== SESSIONLESS_MCP_REVISION) return;
  if (meta !== undefined && !isObject(meta)) throw fail('params._meta must be an object');
  for (const key of Object.keys(meta ?? {})) {
    if (!META_KEY.test(key)) throw fail(`params._meta key '${printable(key, 64)}' does not follow MCP key syntax`);
  }
  if (!request) return;
  if (!isObject(meta) || declared === undefined) throw fail(`a request under MCP ${options.revision} needs params._meta["${META_PROTOCOL_VERSION}"]`);
  if (!isObject(meta[META_CLIENT_CAPABILITIES])) throw fail(`a request under MCP ${options.revision} needs params._meta["${META_CLIENT_CAPABILITIES}"] (an object)`);
}
