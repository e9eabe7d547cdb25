// Reading and compiling an endpoint's `rules`, `deny_rules` and `access` presets (docs/policy.md#access-presets-and-rules, docs/policy.md#validation V5-V8).
// HTTP rules (rest, websocket, l4 with a warning), GraphQL rules, and MCP and JSON-RPC rules (rules-jsonrpc.ts)
// compile to matchers.

import { GRAPHQL_OPERATION_TYPES, GRAPHQL_RULE_KEYS, HTTP_RULE_KEYS, RULE_ENTRY_KEYS } from './format.js';
import { compileGlob } from './glob.js';
import { compileGraphqlSelector, type GraphqlOperation, selectorMatches } from './graphql-match.js';
import { compileMethod } from './match.js';
import { compileQueryMatcher, type QueryMode } from './query.js';
import { checkGlob, readMatcher, requiredString } from './rule-fields.js';
import { type CompiledRule, readJsonRpcRule, readMcpRule } from './rules-jsonrpc.js';
import type { AccessPreset, HttpRequestView, L7Rule, Protocol } from './types.js';
import {
  childPath,
  type Field,
  fieldsOf,
  knownFields,
  type ReadContext,
  readMap,
  readSeq,
  readString,
  readStringList,
  report,
  type MapNode,
  type Node,
  seqItems,
} from './yaml-source.js';

interface RuleOptions {
  readonly protocol: Protocol;
  readonly mcpAllowAll: boolean;
  readonly mcpStrictToolNames: boolean;
}

interface ReadRules {
  readonly allow: readonly L7Rule[];
  readonly deny: readonly L7Rule[];
  /** Plain data for the policy hash. */
  readonly canonical: { readonly allow: readonly unknown[]; readonly deny: readonly unknown[] };
}

type Compiled = CompiledRule;

const METHOD_TOKEN = /^[A-Za-z][A-Za-z0-9_-]*$/;
const WEBSOCKET_METHODS: ReadonlySet<string> = new Set(['GET', 'WEBSOCKET_TEXT', '*']);

/** Reads `rules` (allow entries) and `deny_rules`; reports V6 and per-rule problems. */
export function readRules(
  ctx: ReadContext,
  rulesField: Field | undefined,
  denyField: Field | undefined,
  path: string,
  options: RuleOptions,
): ReadRules {
  const allow: Compiled[] = [];
  const deny: Compiled[] = [];
  if (rulesField !== undefined) {
    const rulesPath = childPath(path, 'rules');
    const seq = readSeq(ctx, rulesField.value, rulesPath);
    if (seq !== undefined && seq.items.length === 0) {
      report(ctx, seq, rulesPath, 'POLICY_RULES_EMPTY', 'rules: [] is rejected; omit rules or use access: full');
    } else if (seq !== undefined) {
      let withAllow = 0;
      const withoutAllow: { readonly node: Node; readonly path: string }[] = [];
      seqItems(seq).forEach((item, i) => {
        const entryPath = childPath(rulesPath, i);
        const entry = readMap(ctx, item, entryPath);
        if (entry === undefined) return;
        const allowField = knownFields(ctx, entry, entryPath, RULE_ENTRY_KEYS).get('allow');
        if (allowField === undefined) {
          withoutAllow.push({ node: entry, path: entryPath });
          return;
        }
        withAllow++;
        const compiled = readRule(ctx, allowField.value, childPath(entryPath, 'allow'), options, 'allow');
        if (compiled !== undefined) allow.push(compiled);
      });
      if (withAllow === 0) {
        report(ctx, seq, rulesPath, 'POLICY_RULES_NO_ALLOW', 'no entry of rules has allow; this would deny everything');
      } else {
        // OpenShell refuses an entry without allow too; here it would be skipped without a word.
        for (const entry of withoutAllow) report(ctx, entry.node, entry.path, 'POLICY_RULE_INVALID', 'a rules entry needs allow; this one does nothing');
      }
    }
  }
  if (denyField !== undefined) {
    const denyPath = childPath(path, 'deny_rules');
    const seq = readSeq(ctx, denyField.value, denyPath);
    if (seq !== undefined && seq.items.length === 0) {
      report(ctx, seq, denyPath, 'POLICY_DENY_RULES_EMPTY', 'deny_rules: [] is rejected; omit it');
    } else if (seq !== undefined) {
      seqItems(seq).forEach((item, i) => {
        const compiled = readRule(ctx, item, childPath(denyPath, i), options, 'deny');
        if (compiled !== undefined) deny.push(compiled);
      });
    }
  }
  if (options.protocol === 'mcp' && allow.some((c) => c.mcpTool === 'scoped')) {
    // A rule on every tools/call beside tool rules would make them meaningless (allow) or dead (deny): refused.
    for (const [list, field, key, verb] of [[allow, rulesField, 'rules', 'allows'], [deny, denyField, 'deny_rules', 'denies']] as const) {
      for (const c of list.filter((x) => x.mcpTool === 'broad')) {
        report(ctx, field?.value, childPath(path, key), 'POLICY_MCP_INVALID',
          `method matcher ${c.rule.text} ${verb} every tool call and conflicts with MCP tool allow rules`);
      }
    }
  }
  return {
    allow: allow.map((c) => c.rule),
    deny: deny.map((c) => c.rule),
    canonical: { allow: allow.map((c) => c.canonical), deny: deny.map((c) => c.canonical) },
  };
}

/** The rules an `access` preset stands for (docs/policy.md#access-presets-and-rules); GraphQL presets name operation types. */
export function presetRules(protocol: Protocol, access: AccessPreset): readonly L7Rule[] {
  if (protocol === 'graphql') {
    const ops = { 'read-only': ['query'], 'read-write': ['query', 'mutation'], full: ['*'] }[access];
    return ops.map((op) => graphqlRule(op, undefined, undefined, 'allow', `${op} (access: ${access})`));
  }
  const methods =
    protocol === 'websocket'
      ? { 'read-only': ['GET'], 'read-write': ['GET', 'WEBSOCKET_TEXT'], full: ['*'] }[access]
      : { 'read-only': ['GET', 'HEAD', 'OPTIONS'], 'read-write': ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH'], full: ['*'] }[
          access
        ];
  return methods.map((method) => httpRule(method, '/**', new Map(), 'allow', `${method} /** (access: ${access})`));
}

/** An HTTP rule: method (docs/policy.md#method-matching), path glob (docs/policy.md#path-globs) and query matchers (docs/policy.md#query-matching). */
function httpRule(
  method: string,
  path: string,
  query: ReadonlyMap<string, readonly string[]>,
  mode: QueryMode,
  text?: string,
): L7Rule {
  const methodMatcher = compileMethod(method);
  const pathGlob = compileGlob(path);
  const queryMatcher = compileQueryMatcher(query, mode);
  const keys = queryMatcher.keys.length === 0 ? '' : ` (query: ${queryMatcher.keys.join(', ')})`;
  return Object.freeze({
    kind: 'http' as const,
    text: text ?? `${methodMatcher.method} ${path}${keys}`,
    matchesHttp: (request: HttpRequestView) =>
      methodMatcher.matches(request.method) && pathGlob.matches(request.path) && queryMatcher.matches(request.query),
  });
}

function graphqlRule(type: string, name: string | undefined, fields: readonly string[] | undefined, mode: QueryMode, text: string): L7Rule {
  const selector = compileGraphqlSelector(type, name, fields);
  return Object.freeze({ kind: 'graphql', text, matchesHttp: () => false, matchesGraphql: (op: GraphqlOperation) => selectorMatches(selector, op, mode) });
}

function readRule(ctx: ReadContext, node: Node | null, path: string, options: RuleOptions, mode: QueryMode): Compiled | undefined {
  const map = readMap(ctx, node, path);
  if (map === undefined) return undefined;
  switch (options.protocol) {
    case 'mcp':
      return readMcpRule(ctx, map, path, options, mode);
    case 'json-rpc':
      return readJsonRpcRule(ctx, map, path);
    case 'websocket':
    case 'graphql': {
      const fields = knownFields(ctx, map, path, [...HTTP_RULE_KEYS, ...GRAPHQL_RULE_KEYS]);
      const graphqlForm = GRAPHQL_RULE_KEYS.some((k) => fields.has(k));
      const httpForm = HTTP_RULE_KEYS.some((k) => fields.has(k));
      if (graphqlForm && httpForm) {
        report(ctx, map, path, 'POLICY_RULE_INVALID', 'a rule cannot mix method/path/query with GraphQL operation fields');
        return undefined;
      }
      if (graphqlForm || (options.protocol === 'graphql' && !httpForm)) return readGraphqlRule(ctx, map, fields, path, mode);
      return readHttpRule(ctx, map, fields, path, mode, options.protocol);
    }
    default: {
      const fields = knownFields(ctx, map, path, [...HTTP_RULE_KEYS, ...GRAPHQL_RULE_KEYS]);
      // OpenShell ignores them here with a warning; a rule that loses a narrowing field allows more than it says.
      const graphql = GRAPHQL_RULE_KEYS.filter((k) => fields.has(k));
      for (const key of graphql) {
        report(ctx, fields.get(key)?.keyNode, childPath(path, key), 'POLICY_RULE_INVALID',
          `${key} is a GraphQL rule field: valid on graphql and websocket endpoints only (ignoring it would widen this rule)`);
      }
      return graphql.length > 0 ? undefined : readHttpRule(ctx, map, fields, path, mode, options.protocol);
    }
  }
}

function readHttpRule(
  ctx: ReadContext,
  map: MapNode,
  fields: Map<string, Field>,
  path: string,
  mode: QueryMode,
  protocol: Protocol,
): Compiled | undefined {
  let ok = true;
  const method = requiredString(ctx, map, fields, 'method', path, 'POLICY_RULE_INVALID');
  if (method !== undefined && method !== '*' && !METHOD_TOKEN.test(method)) {
    report(ctx, fields.get('method')?.value, childPath(path, 'method'), 'POLICY_RULE_INVALID', `method ${method} is not an HTTP method or *`);
    ok = false;
  } else if (method !== undefined && protocol === 'websocket' && !WEBSOCKET_METHODS.has(method.toUpperCase())) {
    report(ctx, fields.get('method')?.value, childPath(path, 'method'), 'POLICY_RULE_INVALID',
      `websocket rules take GET (the upgrade), WEBSOCKET_TEXT or *, not ${method}`);
    ok = false;
  }
  const rulePath = requiredString(ctx, map, fields, 'path', path, 'POLICY_RULE_INVALID');
  if (rulePath !== undefined) ok = checkGlob(ctx, fields.get('path')?.value ?? null, childPath(path, 'path'), rulePath, 'path') && ok;
  const query = readQuery(ctx, fields.get('query'), childPath(path, 'query'));
  if (method === undefined || rulePath === undefined || query === undefined || !ok) return undefined;
  const canonical = { method: method.toUpperCase(), path: rulePath, query: Object.fromEntries(query) };
  return { rule: httpRule(method, rulePath, query, mode), canonical };
}

function readQuery(ctx: ReadContext, field: Field | undefined, path: string): Map<string, readonly string[]> | undefined {
  const out = new Map<string, readonly string[]>();
  if (field === undefined) return out;
  const map = readMap(ctx, field.value, path);
  if (map === undefined) return undefined;
  let ok = true;
  for (const field of fieldsOf(ctx, map, path)) {
    const globs = readMatcher(ctx, field.value, childPath(path, field.key), 'POLICY_RULE_INVALID', 'query-value');
    if (globs === undefined) ok = false;
    else out.set(field.key, globs);
  }
  return ok ? out : undefined;
}

function readGraphqlRule(ctx: ReadContext, map: MapNode, fields: Map<string, Field>, path: string, mode: QueryMode): Compiled | undefined {
  const op = requiredString(ctx, map, fields, 'operation_type', path, 'POLICY_GRAPHQL_INVALID');
  if (op !== undefined && !(GRAPHQL_OPERATION_TYPES as readonly string[]).includes(op)) {
    report(ctx, fields.get('operation_type')?.value, childPath(path, 'operation_type'), 'POLICY_GRAPHQL_INVALID',
      `operation_type must be one of ${GRAPHQL_OPERATION_TYPES.join(', ')}`);
    return undefined;
  }
  const name = readString(ctx, fields.get('operation_name'), childPath(path, 'operation_name'));
  const rootFields = readStringList(ctx, fields.get('fields'), childPath(path, 'fields'));
  if (op === undefined) return undefined;
  const text = [op, name ?? '*', ...(rootFields === undefined ? [] : [`{${rootFields.join(', ')}}`])].join(' ');
  return {
    rule: graphqlRule(op, name, rootFields, mode, text),
    canonical: { operation_type: op, operation_name: name ?? null, fields: rootFields ?? null },
  };
}

