// `filter_tools_list` (docs/policy.md#filtering-toolslist): a server's answers to the client's tools/list requests,
// with the tools policy would not let the client call taken out. Pure: JSON in, JSON out; the proxy reads and
// writes the response (proxy/tools-list-filter.ts), and says which tool names may stay.

import { readJson } from '../json/strict-json.js';
import type { JsonRpcId } from '../policy/jsonrpc-match.js';
import { errorResponse } from './answer.js';

/** What filtering one JSON text did: the text to send, and the ids it answered. */
export interface Filtered {
  /** The text to send: unchanged (same string) when nothing was taken out. */
  readonly text: string;
  readonly answered: readonly JsonRpcId[];
  /**
   * Set when an object in the text repeats a key (docs/policy.md#duplicate-json-keys): which ids it answers and which
   * tools it lists depend on the client's parser, so the caller answers the pending ids with an error instead.
   */
  readonly unreadable?: string;
}

/**
 * Filters the tools/list answers in one JSON text (a response object or a batch of them): the responses whose id
 * `isAnswer` names. Anything else, and text that is not JSON, passes unchanged: it is not an answer boundary was
 * asked to filter.
 */
export function filterToolsListText(text: string, isAnswer: (id: JsonRpcId) => boolean, keep: (tool: string) => boolean): Filtered {
  const read = readJson(text);
  if (read.kind === 'not-json') return { text, answered: [] };
  if (read.kind === 'duplicate-key') return { text, answered: [], unreadable: read.refusal.problem };
  const json = read.value;
  const answered: JsonRpcId[] = [];
  let changed = false;
  const visit = (message: unknown): unknown => {
    if (!isObject(message) || !('id' in message) || !isAnswer(message.id as JsonRpcId)) return message;
    answered.push(message.id as JsonRpcId);
    const result = message.result;
    if (!isObject(result) || !Array.isArray(result.tools)) return message;
    const tools = result.tools.filter((tool: unknown) => isObject(tool) && typeof tool.name === 'string' && keep(tool.name));
    if (tools.length === result.tools.length) return message;
    changed = true;
    return { ...message, result: { ...result, tools } };
  };
  const out = Array.isArray(json) ? json.map(visit) : visit(json);
  return { text: changed ? JSON.stringify(out) : text, answered };
}

/** The answer for pending tools/list ids boundary could not filter (too large, encoded): an error, never the list. */
export function unfilterableAnswer(ids: readonly JsonRpcId[], why: string): string {
  const message = `boundary filters tools/list on this endpoint (filter_tools_list) and could not read the answer: ${why}`;
  const errors = ids.map((id) => errorResponse(id, 'tools-list-unfilterable', message));
  return JSON.stringify(errors.length === 1 ? errors[0] : errors);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
