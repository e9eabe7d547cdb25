// Reading and compiling MCP and JSON-RPC rules (docs/policy.md#json-rpc-and-mcp-inspection): load-time checks
// with errors naming the field, the MCP normalisation (tool -> params.name; a method left out under the method
// profile becomes tools/call for a tool rule, `*` otherwise), and the call matchers decide-jsonrpc.ts runs.

import { JSON_RPC_RULE_KEYS, MCP_RULE_KEYS } from './format.js';
import { compileValueGlob } from './glob.js';
import { compileJsonRpcMatcher, compileMcpMatcher, type JsonRpcCall } from './jsonrpc-match.js';
import { readMatcher, requiredString } from './rule-fields.js';
import type { L7Rule } from './types.js';
import { childPath, type Field, fieldsOf, knownFields, type MapNode, type ReadContext, readMap, readString, report } from './yaml-source.js';

export interface CompiledRule {
  readonly rule: L7Rule;
  readonly canonical: unknown;
  /** MCP: the rule scopes tools/call to named tools, or covers every tools/call (refused beside tool rules). */
  readonly mcpTool?: 'scoped' | 'broad';
}

export interface McpRuleOptions {
  readonly mcpAllowAll: boolean;
  readonly mcpStrictToolNames: boolean;
}

/** Characters that make a method or tool pattern a glob (OpenShell's list). */
const GLOB_CHARS = /[*?[\]{}]/;
/** Rule keys that belong to REST rules; named in their own error on these protocols. */
const HTTP_ONLY_KEYS = ['path', 'query'] as const;

function callRule(kind: 'mcp' | 'json-rpc', text: string, matches: (call: JsonRpcCall) => boolean, scopesTools: boolean, mcpMethod?: string): L7Rule {
  const rule = { kind, text, matchesHttp: () => false, matchesCall: matches, scopesTools };
  return Object.freeze(mcpMethod === undefined ? rule : { ...rule, mcpMethod });
}

/** `{method?, tool?, params?: {name}}` on an mcp endpoint, allow or deny side alike. */
export function readMcpRule(ctx: ReadContext, map: MapNode, path: string, options: McpRuleOptions, mode: 'allow' | 'deny'): CompiledRule | undefined {
  const fields = knownFields(ctx, map, path, [...MCP_RULE_KEYS, ...HTTP_ONLY_KEYS]);
  let ok = true;
  for (const key of HTTP_ONLY_KEYS) {
    if (!fields.has(key)) continue;
    report(ctx, fields.get(key)?.keyNode, childPath(path, key), 'POLICY_MCP_INVALID', `mcp rules match method and tool, not ${key}`);
    ok = false;
  }
  const written = readString(ctx, fields.get('method'), childPath(path, 'method'));
  // OpenShell reads an empty method as absent: allowed under the method profile, else required.
  const method = written === '' ? undefined : written;
  if (method === undefined && !options.mcpAllowAll) {
    report(ctx, fields.get('method')?.value ?? map, childPath(path, 'method'), 'POLICY_MCP_INVALID',
      'method is required when mcp.allow_all_known_mcp_methods is false');
    ok = false;
  }
  if (method !== undefined && (method === '*' || (GLOB_CHARS.test(method) && !method.startsWith('tools/')) || /[{}]/.test(method))) {
    report(ctx, fields.get('method')?.value, childPath(path, 'method'), 'POLICY_MCP_INVALID',
      'MCP method globs are only valid for the tools/ method family (tools/*), and * is not a method; {a,b} is not supported');
    ok = false;
  }
  const tool = fields.has('tool') ? readMatcher(ctx, fields.get('tool')?.value ?? null, childPath(path, 'tool'), 'POLICY_MCP_INVALID', 'name') : undefined;
  if (fields.has('tool') && tool === undefined) ok = false;
  const paramsName = readParamsName(ctx, fields.get('params'), childPath(path, 'params'));
  if (paramsName === false) ok = false;
  const named = paramsName === false ? undefined : paramsName;
  if (tool !== undefined && named !== undefined) {
    report(ctx, map, childPath(path, 'params.name'), 'POLICY_MCP_INVALID', 'an MCP rule must use either tool or params.name, not both');
    ok = false;
  }
  const tools = tool ?? named;
  if (tools !== undefined && method !== undefined && method !== 'tools/call') {
    report(ctx, fields.get('method')?.value, childPath(path, 'method'), 'POLICY_MCP_INVALID',
      'method must be tools/call when an MCP rule uses tool or params.name');
    ok = false;
  }
  if (tools?.some((g) => GLOB_CHARS.test(g)) === true && !options.mcpStrictToolNames) {
    report(ctx, map, childPath(path, fields.has('tool') ? 'tool' : 'params.name'), 'POLICY_MCP_INVALID',
      'wildcard tool-name matchers require mcp.strict_tool_names to remain enabled');
    ok = false;
  }
  if (!ok) return undefined;
  const effective = method ?? (tools === undefined ? '*' : 'tools/call');
  // Only a method written without glob characters can allow an extension method (one literally named `tools/*` too).
  const exact = method !== undefined && !GLOB_CHARS.test(method) ? method : undefined;
  const covers = tools === undefined && compileValueGlob(effective).matches('tools/call');
  const text = tools === undefined ? effective : `${effective} ${tools.join('|')}`;
  return {
    rule: callRule('mcp', text, compileMcpMatcher(effective, tools), mode === 'allow' && tools !== undefined, exact),
    canonical: { method: effective, tool: tools ?? null },
    ...(tools !== undefined ? { mcpTool: 'scoped' as const } : covers ? { mcpTool: 'broad' as const } : {}),
  };
}

/**
 * `params` of an MCP rule: only `name` (the tool), as a matcher. Nested maps are what OpenShell flattens to
 * dotted keys; any key but `name` is argument matching, which it does not do yet. False: reported.
 */
function readParamsName(ctx: ReadContext, field: Field | undefined, path: string): string[] | undefined | false {
  if (field === undefined) return undefined;
  const params = readMap(ctx, field.value, path);
  if (params === undefined) return false;
  let name: string[] | undefined | false;
  for (const entry of fieldsOf(ctx, params, path)) {
    if (entry.key !== 'name') {
      report(ctx, entry.keyNode, childPath(path, entry.key), 'POLICY_MCP_INVALID',
        `MCP tool argument matching is not supported yet: params.${entry.key}; only params.name (the tool) can be matched`);
      name = false;
      continue;
    }
    const globs = readMatcher(ctx, entry.value, childPath(path, 'name'), 'POLICY_MCP_INVALID', 'name');
    if (name !== false) name = globs ?? false;
  }
  return name;
}

/** `{method}` on a json-rpc endpoint: the exact method, or `*` for all. */
export function readJsonRpcRule(ctx: ReadContext, map: MapNode, path: string): CompiledRule | undefined {
  const fields = knownFields(ctx, map, path, [...JSON_RPC_RULE_KEYS, 'params', 'tool', ...HTTP_ONLY_KEYS]);
  const refused: Record<string, string> = {
    params: 'JSON-RPC rules do not support params matchers yet',
    tool: 'MCP tool matching is only valid for protocol mcp',
    path: 'json-rpc rules must use method, not path/query',
    query: 'json-rpc rules must use method, not path/query',
  };
  let ok = true;
  for (const [key, message] of Object.entries(refused)) {
    if (!fields.has(key)) continue;
    report(ctx, fields.get(key)?.keyNode, childPath(path, key), 'POLICY_JSON_RPC_INVALID', message);
    ok = false;
  }
  const method = requiredString(ctx, map, fields, 'method', path, 'POLICY_JSON_RPC_INVALID');
  if (method === undefined) return undefined;
  if (method !== '*' && GLOB_CHARS.test(method)) {
    report(ctx, fields.get('method')?.value, childPath(path, 'method'), 'POLICY_JSON_RPC_INVALID',
      'generic JSON-RPC method rules do not support glob or wildcard matchers; write the exact method, or * for all');
    return undefined;
  }
  if (!ok) return undefined;
  return { rule: callRule('json-rpc', method, compileJsonRpcMatcher(method), false), canonical: { method } };
}
