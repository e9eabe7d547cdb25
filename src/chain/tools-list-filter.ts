// `mcp.filter_tools_list` (boundary extension, docs/policy.md#filtering-toolslist): the answers to an allowed
// request's tools/list calls list only the tools policy would let the client call. A JSON answer is held whole,
// an SSE answer event by event (the rest of the stream streams on unchanged); an answer that cannot be held or
// read becomes a JSON-RPC error for those ids, never the unfiltered list. Calls are still decided one by one.

import type { H1Handler } from '../http1/h1-client.js';
import { isStrictToolName } from '../jsonrpc/message.js';
import { createSseRewriter } from '../jsonrpc/sse.js';
import { filterToolsListText, unfilterableAnswer } from '../jsonrpc/tools-list.js';
import { decide } from '../policy/decide.js';
import type { JsonRpcId } from '../policy/jsonrpc-match.js';
import type { Decision, Policy } from '../policy/types.js';

/** The largest tools/list answer (a JSON body, or one SSE event) held to be filtered. */
export const MAX_TOOLS_LIST_BYTES = 4 * 1024 * 1024;

export interface ToolsListPlan {
  /** Is a response with this id an answer to filter? */
  isAnswer(id: JsonRpcId): boolean;
  /** These answers passed (filtered). */
  answered(ids: readonly JsonRpcId[]): void;
  /** The ids the error that stands in for an answer boundary cannot filter is addressed to. */
  owed(): JsonRpcId[];
  /** No answer is left to filter: the rest of the stream passes unread. */
  done(): boolean;
  /** May the client call this tool (policy does not deny it; its name passes strict_tool_names)? */
  keep(tool: string): boolean;
}

/**
 * The plan for an allowed request to an endpoint that filters tools/list: a POST's own tools/list calls, or any
 * answer on a GET stream. MCP servers send answers on a GET only to a client resuming a broken POST stream
 * (Last-Event-ID), and boundary keeps no session to know which ids those were; so every response on a GET that
 * lists tools is filtered, and an event too large to read becomes an error addressed to no id (JSON-RPC's null).
 */
export function toolsListPlan(policy: Policy, decision: Decision, request: { host: string; port: number; path: string; method: string }): ToolsListPlan | undefined {
  const endpoint = decision.endpoint;
  if (endpoint?.protocol !== 'mcp' || !endpoint.options.mcpFilterToolsList) return undefined;
  const strict = endpoint.options.mcpStrictToolNames;
  const seen = new Map<string, boolean>();
  const keep = (tool: string): boolean => {
    let kept = seen.get(tool);
    if (kept === undefined) {
      // The same question a tools/call of this tool would put to decide(); audit would forward it, so it stays.
      const call = { method: 'tools/call', tool, id: 0 };
      const jsonRpc = { kind: 'messages' as const, calls: [call], responses: 0, batch: false };
      kept = (!strict || isStrictToolName(tool)) && decide(policy, { adapter: 'l7', host: request.host, port: request.port, path: request.path, method: 'POST', jsonRpc }).verdict !== 'deny';
      seen.set(tool, kept);
    }
    return kept;
  };
  if (request.method === 'GET') return { isAnswer: () => true, answered: () => undefined, owed: () => [null], done: () => false, keep };
  if (decision.calls === undefined) return undefined;
  const pending = new Set<JsonRpcId>();
  for (const call of decision.calls) if (call.method === 'tools/list' && call.id !== undefined) pending.add(call.id);
  if (pending.size === 0) return undefined;
  return {
    isAnswer: (id) => pending.has(id),
    answered(ids) {
      for (const id of ids) pending.delete(id);
    },
    owed: () => [...pending],
    done: () => pending.size === 0,
    keep,
  };
}

/**
 * Upstream headers asking for an unencoded answer, gRPC messages included: a compressed tools/list could not be
 * read, nor a compressed answer scanned for echoed credentials (response-chain.ts).
 */
export function identityEncoding(headers: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = (headers[i] ?? '').toLowerCase();
    if (name !== 'accept-encoding' && name !== 'grpc-accept-encoding') out.push(headers[i] ?? '', headers[i + 1] ?? '');
  }
  out.push('accept-encoding', 'identity');
  return out;
}

/** The first value of header `name` (lower case) in a flat `[name, value, ...]` list. */
export function header(headers: readonly string[], name: string): string | undefined {
  for (let i = 0; i < headers.length; i += 2) if ((headers[i] ?? '').toLowerCase() === name) return headers[i + 1];
  return undefined;
}

/** `headers` without `drop` (lower-case names), plus `add`. */
function withHeaders(headers: readonly string[], drop: readonly string[], add: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if (!drop.includes((headers[i] ?? '').toLowerCase())) out.push(headers[i] ?? '', headers[i + 1] ?? '');
  return [...out, ...add];
}

/** The upstream exchange's handler with the answer filtered on its way to `inner` (the forwarded request). */
export function filteringHandler(inner: H1Handler, plan: ToolsListPlan): H1Handler {
  let mode: 'pass' | 'json' | 'sse' | 'replaced' = 'pass';
  let status = 0;
  let head: string[] = [];
  let held: Buffer[] = [];
  let heldBytes = 0;
  const answerWith = (why: string): void => {
    const text = unfilterableAnswer(plan.owed(), why);
    mode = 'replaced';
    inner.onHead(200, withHeaders(head, ['content-length', 'content-type', 'content-encoding', 'transfer-encoding'], ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(text))]), Buffer.from(text), true);
  };
  const filterJson = (body: Buffer): void => {
    const filtered = filterToolsListText(body.toString('utf8'), plan.isAnswer, plan.keep);
    if (filtered.unreadable !== undefined) {
      answerWith(filtered.unreadable);
      return;
    }
    const out = Buffer.from(filtered.text);
    inner.onHead(status, withHeaders(head, ['content-length'], ['content-length', String(out.length)]), out, true);
  };
  const rewriter = createSseRewriter({
    maxEventBytes: MAX_TOOLS_LIST_BYTES,
    rewrite(data) {
      const filtered = filterToolsListText(data, plan.isAnswer, plan.keep);
      // The ids stay pending: a later answer for them is still filtered, never passed through unread.
      if (filtered.unreadable !== undefined) return unfilterableAnswer(plan.owed(), filtered.unreadable);
      plan.answered(filtered.answered);
      return filtered.text === data ? undefined : filtered.text;
    },
    oversized: () => (plan.done() ? undefined : unfilterableAnswer(plan.owed(), `an event is larger than ${MAX_TOOLS_LIST_BYTES} bytes`)),
    done: plan.done,
  });
  const handler: H1Handler = {
    onHead(code, headers, body, complete) {
      status = code;
      head = headers;
      const type = (header(headers, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase();
      const encoding = (header(headers, 'content-encoding') ?? 'identity').trim().toLowerCase();
      if (code !== 200 || (type !== 'application/json' && type !== 'text/event-stream')) {
        inner.onHead(code, headers, body, complete);
        return;
      }
      if (encoding !== 'identity') {
        answerWith(`the answer is ${encoding}-encoded`);
        return;
      }
      if (type === 'application/json') {
        mode = 'json';
        if (complete) filterJson(body ?? Buffer.alloc(0));
        else if (body !== undefined) handler.onData(body);
        return;
      }
      mode = 'sse';
      const first = body === undefined ? Buffer.alloc(0) : rewriter.push(body);
      if (complete) {
        const out = Buffer.concat([first, rewriter.end()]);
        inner.onHead(code, withHeaders(headers, ['content-length'], ['content-length', String(out.length)]), out, true);
      } else inner.onHead(code, withHeaders(headers, ['content-length'], []), first.length === 0 ? undefined : first, false);
    },
    onData(chunk) {
      if (mode === 'pass') inner.onData(chunk);
      else if (mode === 'sse') {
        const out = rewriter.push(chunk);
        if (out.length > 0) inner.onData(out);
      } else if (mode === 'json') {
        held.push(chunk);
        heldBytes += chunk.length;
        if (heldBytes > MAX_TOOLS_LIST_BYTES) {
          held = [];
          answerWith(`the answer is larger than ${MAX_TOOLS_LIST_BYTES} bytes`);
        }
      }
    },
    onEnd() {
      if (mode === 'json') filterJson(Buffer.concat(held, heldBytes));
      else if (mode === 'sse') {
        const rest = rewriter.end();
        if (rest.length > 0) inner.onData(rest);
        inner.onEnd();
      } else if (mode === 'pass') inner.onEnd();
    },
    onError(err) {
      // A replaced answer is complete: the upstream's later failure is nothing the client waits for.
      if (mode !== 'replaced') inner.onError(err);
    },
  };
  return handler;
}
