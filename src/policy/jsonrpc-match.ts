// JSON-RPC and MCP rule matching (docs/policy.md#json-rpc-and-mcp-inspection): what one allow or deny rule says
// about one parsed call. Pure; the body parser is src/jsonrpc/message.ts, the verdict decide-jsonrpc.ts.

import { compileValueGlob } from './glob.js';

/** A method or tool name is cut to this many characters where it is shown (details, events): the workload picks it. */
export const MAX_SHOWN_NAME_CHARS = 128;

/** A request id as the wire carried it; undefined marks a notification. */
export type JsonRpcId = string | number | null;

/** One call (request or notification) as policy sees it: the method and, for MCP `tools/call`, the tool. Never params. */
export interface JsonRpcCall {
  readonly method: string;
  /** MCP `tools/call` only: `params.name`. Undefined for every other method and on json-rpc endpoints. */
  readonly tool: string | undefined;
  /** Kept for the proxy's JSON-RPC answer; policy never reads it. Undefined: a notification. */
  readonly id: JsonRpcId | undefined;
  /**
   * MCP only: not a core method of the request's protocol revision (docs/policy.md#mcp-rules-and-revisions), so
   * only an allow rule naming it exactly allows it. Absent on json-rpc endpoints.
   */
  readonly extension?: boolean;
}

/** Why a body could not be read as JSON-RPC, in the terms of the JSON-RPC error it is answered with. */
export const JSON_RPC_PROBLEMS = ['parse-error', 'invalid-request', 'invalid-params'] as const;
export type JsonRpcProblem = (typeof JSON_RPC_PROBLEMS)[number];

/** The parsed request fed to decide() for a JSON-RPC or MCP endpoint. */
export type JsonRpcRequest =
  /** A POST body (or any other method's body): its calls in order, and how many response frames rode along. */
  | { readonly kind: 'messages'; readonly calls: readonly JsonRpcCall[]; readonly responses: number; readonly batch: boolean }
  /** A bodiless GET asking for `text/event-stream`: the server-to-client stream. */
  | { readonly kind: 'receive-stream' }
  /** MCP only: a bodiless DELETE ending the session. */
  | { readonly kind: 'session-end' }
  /** Unreadable: denied even under audit. `ids` are the request ids that could still be read, to answer them. */
  | {
      readonly kind: 'error';
      readonly error: string;
      readonly problem: JsonRpcProblem;
      readonly ids: readonly JsonRpcId[];
      readonly batch: boolean;
    };

/** A compiled MCP rule: a method glob (absent: every method) and tool globs (absent: any tool, or none). */
export function compileMcpMatcher(method: string, tools: readonly string[] | undefined): (call: JsonRpcCall) => boolean {
  const methodGlob = compileValueGlob(method);
  const toolGlobs = tools?.map(compileValueGlob);
  return (call) => {
    if (call.method === '' || !methodGlob.matches(call.method)) return false;
    if (toolGlobs === undefined) return true;
    const tool = call.tool;
    return tool !== undefined && toolGlobs.some((g) => g.matches(tool));
  };
}

/** A json-rpc rule: the exact method, or `*` for every method (no other glob; validated at load). */
export function compileJsonRpcMatcher(method: string): (call: JsonRpcCall) => boolean {
  return method === '*' ? (call) => call.method !== '' : (call) => call.method === method;
}

/** `tools/call read_status`, `initialize`: what a call is, for details and events. Never params. */
export function describeCall(call: JsonRpcCall): string {
  return call.tool === undefined ? shownName(call.method) : `${shownName(call.method)} ${shownName(call.tool)}`;
}

/** A name as shown: control characters as `?` (OpenShell's rule), cut at MAX_SHOWN_NAME_CHARS. */
export function shownName(name: string): string {
  const cut = name.length > MAX_SHOWN_NAME_CHARS ? `${name.slice(0, MAX_SHOWN_NAME_CHARS)}...` : name;
  return cut.replace(/[\x00-\x1f\x7f]/g, '?');
}
