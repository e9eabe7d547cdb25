// Endpoint fields that are not about matching: allowed_ips (V10), credential binding and signing (V11),
// protocol options for graphql, mcp and json-rpc. Readers report problems and return normalised values.

import type { ErrorCode } from '../shared/errors.js';
import { IPV4_EMBEDDINGS } from '../net/address.js';
import { type Cidr, cidrOverlaps, formatCidr, hasCleanHostBits, parseCidr } from '../net/ip.js';
import {
  CREDENTIAL_BINDING_KEYS,
  GRAPHQL_OPERATION_TYPES,
  JSON_RPC_OPTION_KEYS,
  MCP_OPTION_KEYS,
  PERSISTED_QUERY_KEYS,
  PERSISTED_QUERY_MODES,
} from './format.js';
import type { GraphqlOperation } from './graphql-match.js';
import { readMcpVersions } from './mcp-versions.js';
import type { EndpointOptions, Protocol } from './types.js';
import {
  childPath,
  type Field,
  fieldsOf,
  knownFields,
  type ReadContext,
  readBool,
  readInt,
  readMap,
  readSeq,
  readString,
  readStringList,
  report,
  scalarValue,
  seqItems,
} from './yaml-source.js';

/** Default buffer for GraphQL, MCP and JSON-RPC inspection (docs/policy.md#endpoint-fields). */
const DEFAULT_INSPECTION_BODY_BYTES = 64 * 1024;
/** Upper bound accepted for any `max_body_bytes` option. */
const MAX_INSPECTION_BODY_BYTES = 64 * 1024 * 1024;

/** A body limit option: 0 means the default, as in OpenShell (which sends no limit for 0); undefined when absent. */
function readBodyLimit(ctx: ReadContext, field: Field | undefined, path: string, code: ErrorCode): number | undefined {
  const value = readInt(ctx, field, path, { min: 0, max: MAX_INSPECTION_BODY_BYTES, code });
  return value === 0 ? undefined : value;
}
/** `allowed_ips` entries broader than this prefix log a warning. */
const ALLOWED_IPS_WARN_PREFIX = 16;

/**
 * Ranges `allowed_ips` may never reach (V10), in every spelling net/address.ts classifies as them: the IPv4
 * ranges also inside each IPv4-carrying IPv6 range (mapped, compatible, NAT64, 6to4). `64:ff9b::a9fe:a9fe` is
 * 169.254.169.254 to the SSRF check, so it must not load as though it could be allowed.
 */
const ALWAYS_BLOCKED: readonly Cidr[] = [
  ...['::1/128', '::/128', 'fe80::/10'].map(cidrOf),
  ...['127.0.0.0/8', '169.254.0.0/16', '0.0.0.0/32'].flatMap((text) => {
    const v4 = cidrOf(text);
    return [v4, ...IPV4_EMBEDDINGS.map((embedding) => embedded(embedding, v4))];
  }),
];

function cidrOf(text: string): Cidr {
  const cidr = parseCidr(text);
  if (cidr === undefined) throw new Error(`bad table row ${text}`);
  return cidr;
}

/** The IPv6 CIDR holding `v4` at the embedding's offset: `2002::/16` + `127.0.0.0/8` is `2002:7f00::/24`. */
function embedded(embedding: { readonly cidr: string; readonly offset: number }, v4: Cidr): Cidr {
  const bytes = Uint8Array.from(cidrOf(embedding.cidr).ip.bytes);
  bytes.set(v4.ip.bytes, embedding.offset);
  return { ip: { family: 6, bytes }, prefix: embedding.offset * 8 + v4.prefix };
}

/** Canonical CIDR texts; every problem reported (V10). */
export function readAllowedIps(ctx: ReadContext, field: Field | undefined, path: string): string[] {
  if (field === undefined) return [];
  const seq = readSeq(ctx, field.value, path);
  if (seq === undefined) return [];
  const out: string[] = [];
  seqItems(seq).forEach((item, i) => {
    const itemPath = childPath(path, i);
    const text = scalarValue(item);
    const cidr = typeof text === 'string' ? parseCidr(text.trim()) : undefined;
    if (cidr === undefined) {
      report(ctx, item ?? seq, itemPath, 'POLICY_ALLOWED_IPS_INVALID', `${String(text)} is not an IP address or CIDR`);
      return;
    }
    if (!hasCleanHostBits(cidr)) {
      report(ctx, item, itemPath, 'POLICY_ALLOWED_IPS_HOST_BITS', `${String(text)} has bits set past /${cidr.prefix}`);
      return;
    }
    if (cidr.prefix === 0 || ALWAYS_BLOCKED.some((blocked) => cidrOverlaps(blocked, cidr))) {
      report(ctx, item, itemPath, 'POLICY_ALLOWED_IPS_LOOPBACK',
        `${String(text)} overlaps loopback, link-local or unspecified addresses, or allows everything`);
      return;
    }
    if (cidr.prefix < ALLOWED_IPS_WARN_PREFIX) {
      report(ctx, item, itemPath, 'POLICY_WARN_ALLOWED_IPS_BROAD', `${String(text)} is broader than /${ALLOWED_IPS_WARN_PREFIX}`);
    }
    out.push(formatCidr(cidr));
  });
  return [...new Set(out)].sort();
}

/** `credential_binding: { provider }` -> the provider name. */
export function readCredentialBinding(ctx: ReadContext, field: Field | undefined, path: string): string | undefined {
  if (field === undefined) return undefined;
  const map = readMap(ctx, field.value, path);
  if (map === undefined) return undefined;
  const fields = knownFields(ctx, map, path, CREDENTIAL_BINDING_KEYS);
  const provider = readString(ctx, fields.get('provider'), childPath(path, 'provider'));
  if (provider === undefined || provider === '') {
    report(ctx, map, childPath(path, 'provider'), 'POLICY_TYPE', 'credential_binding needs a non-empty provider');
    return undefined;
  }
  return provider;
}

/** graphql_*, persisted_queries, mcp and json_rpc options; each is valid only with its protocol. */
export function readProtocolOptions(
  ctx: ReadContext,
  fields: ReadonlyMap<string, Field>,
  path: string,
  protocol: Protocol | undefined,
): { options: EndpointOptions; canonical: Record<string, unknown> } {
  const graphqlCapable = protocol === 'graphql' || protocol === 'websocket';
  for (const key of ['persisted_queries', 'graphql_persisted_queries', 'graphql_max_body_bytes']) {
    const field = fields.get(key);
    // OpenShell ignores them elsewhere with a warning; ignoring them widens nothing, since no GraphQL is read there.
    if (field !== undefined && protocol !== 'tcp' && !graphqlCapable) {
      report(ctx, field.keyNode, childPath(path, key), 'POLICY_WARN_GRAPHQL_FIELD_IGNORED',
        `${key} is ignored: it applies to graphql and websocket endpoints only`);
    }
  }
  const modeText = readString(ctx, fields.get('persisted_queries'), childPath(path, 'persisted_queries'));
  let persistedQueries: EndpointOptions['persistedQueries'] = 'deny';
  if (modeText !== undefined) {
    if ((PERSISTED_QUERY_MODES as readonly string[]).includes(modeText)) {
      persistedQueries = modeText as EndpointOptions['persistedQueries'];
    } else {
      report(ctx, fields.get('persisted_queries')?.value, childPath(path, 'persisted_queries'), 'POLICY_GRAPHQL_INVALID',
        `persisted_queries must be ${PERSISTED_QUERY_MODES.join(' or ')}`);
    }
  }
  const registry = readPersistedQueries(ctx, fields.get('graphql_persisted_queries'), childPath(path, 'graphql_persisted_queries'));
  // OpenShell loads it (and advises pairing them): with nothing registered, every hash-only query is denied.
  if (persistedQueries === 'allow_registered' && registry === undefined && graphqlCapable) {
    report(ctx, fields.get('persisted_queries')?.value, childPath(path, 'persisted_queries'), 'POLICY_WARN_PERSISTED_QUERIES_EMPTY',
      'allow_registered without graphql_persisted_queries denies every hash-only query; list the registered queries');
  }
  const graphqlMaxBodyBytes =
    readBodyLimit(ctx, fields.get('graphql_max_body_bytes'), childPath(path, 'graphql_max_body_bytes'), 'POLICY_GRAPHQL_INVALID') ?? DEFAULT_INSPECTION_BODY_BYTES;

  const { mcp, jsonRpcMaxBodyBytes } = readJsonRpcOptions(ctx, fields, path, protocol);
  const mcpPath = childPath(path, 'mcp');
  const strict = readBool(ctx, mcp?.get('strict_tool_names'), childPath(mcpPath, 'strict_tool_names'));
  const allowAll = readBool(ctx, mcp?.get('allow_all_known_mcp_methods'), childPath(mcpPath, 'allow_all_known_mcp_methods'));
  const filterToolsList = readBool(ctx, mcp?.get('filter_tools_list'), childPath(mcpPath, 'filter_tools_list'));
  const versions = readMcpVersions(ctx, mcp?.get('versions'), childPath(mcpPath, 'versions'));

  const options: EndpointOptions = Object.freeze({
    graphqlMaxBodyBytes,
    persistedQueries,
    graphqlPersistedQueries: registryOperations(registry),
    mcpStrictToolNames: strict ?? true,
    mcpAllowAllKnownMethods: allowAll ?? false,
    mcpFilterToolsList: filterToolsList ?? false,
    mcpVersions: versions,
    jsonRpcMaxBodyBytes: jsonRpcMaxBodyBytes ?? DEFAULT_INSPECTION_BODY_BYTES,
  });
  // Keys in sorted order, as canonicalJson writes them (canonical.ts).
  const canonical = {
    graphqlMaxBodyBytes: options.graphqlMaxBodyBytes,
    graphqlPersistedQueries: registry ?? null,
    jsonRpcMaxBodyBytes: options.jsonRpcMaxBodyBytes,
    mcpAllowAllKnownMethods: options.mcpAllowAllKnownMethods,
    mcpFilterToolsList: options.mcpFilterToolsList,
    mcpStrictToolNames: options.mcpStrictToolNames,
    mcpVersions: options.mcpVersions,
    persistedQueries: options.persistedQueries,
  };
  return { options, canonical };
}

/** The registry as the operations decide() evaluates a registered hash-only query as (entries without a type are already reported). */
function registryOperations(registry: Record<string, unknown> | undefined): ReadonlyMap<string, GraphqlOperation> {
  const out = new Map<string, GraphqlOperation>();
  for (const [key, value] of Object.entries(registry ?? {})) {
    const entry = value as { operation_type: string | null; operation_name: string | null; fields: readonly string[] | null };
    if (entry.operation_type === null) continue;
    const fields = [...new Set(entry.fields ?? [])].sort();
    out.set(key, Object.freeze({ type: entry.operation_type.toLowerCase(), name: entry.operation_name ?? undefined, fields, hashOnly: false }));
  }
  return out;
}

/**
 * The `mcp` and `json_rpc` stanzas (docs/policy.md#json-rpc-and-mcp-inspection). `mcp` is valid on mcp endpoints
 * only, as in OpenShell; `json_rpc` on both. Either sets the one body limit of the JSON-RPC family, and setting it
 * in both is refused rather than one silently winning.
 */
function readJsonRpcOptions(
  ctx: ReadContext,
  fields: ReadonlyMap<string, Field>,
  path: string,
  protocol: Protocol | undefined,
): { mcp: Map<string, Field> | undefined; jsonRpcMaxBodyBytes: number | undefined } {
  // tcp reports every L7 field on its own (POLICY_TCP_L7_FIELD); an L4 endpoint would ignore these, so they are refused.
  const family = protocol === 'tcp' || protocol === 'mcp' || protocol === 'json-rpc';
  const mcpPath = childPath(path, 'mcp');
  const jsonRpcPath = childPath(path, 'json_rpc');
  const mcp = readOptionMap(ctx, fields.get('mcp'), mcpPath, MCP_OPTION_KEYS, protocol === 'tcp' || protocol === 'mcp', 'POLICY_MCP_INVALID');
  const jsonRpc = readOptionMap(ctx, fields.get('json_rpc'), jsonRpcPath, JSON_RPC_OPTION_KEYS, family, 'POLICY_JSON_RPC_INVALID');
  const fromMcp = readBodyLimit(ctx, mcp?.get('max_body_bytes'), childPath(mcpPath, 'max_body_bytes'), 'POLICY_MCP_INVALID');
  const fromJsonRpc = readBodyLimit(ctx, jsonRpc?.get('max_body_bytes'), childPath(jsonRpcPath, 'max_body_bytes'), 'POLICY_JSON_RPC_INVALID');
  if (mcp?.has('max_body_bytes') === true && jsonRpc?.has('max_body_bytes') === true) {
    report(ctx, jsonRpc.get('max_body_bytes')?.keyNode, childPath(jsonRpcPath, 'max_body_bytes'), 'POLICY_JSON_RPC_INVALID',
      'mcp.max_body_bytes and json_rpc.max_body_bytes set the same limit; set one');
  }
  return { mcp, jsonRpcMaxBodyBytes: fromMcp ?? fromJsonRpc };
}

function readOptionMap(
  ctx: ReadContext,
  field: Field | undefined,
  path: string,
  keys: readonly string[],
  allowed: boolean,
  code: 'POLICY_MCP_INVALID' | 'POLICY_JSON_RPC_INVALID',
): Map<string, Field> | undefined {
  if (field === undefined) return undefined;
  if (!allowed) {
    const key = path.split('.').pop() ?? '';
    report(ctx, field.keyNode, path, code, key === 'mcp' ? 'a non-MCP endpoint cannot configure mcp options' : `${key} is valid on protocols mcp and json-rpc only`);
  }
  const map = readMap(ctx, field.value, path);
  return map === undefined ? undefined : knownFields(ctx, map, path, keys);
}

function readPersistedQueries(ctx: ReadContext, field: Field | undefined, path: string): Record<string, unknown> | undefined {
  if (field === undefined) return undefined;
  const map = readMap(ctx, field.value, path);
  if (map === undefined) return undefined;
  const out: Record<string, unknown> = {};
  for (const entry of fieldsOf(ctx, map, path)) {
    const entryPath = childPath(path, entry.key);
    const query = readMap(ctx, entry.value, entryPath);
    if (query === undefined) continue;
    const fields = knownFields(ctx, query, entryPath, PERSISTED_QUERY_KEYS);
    const op = readString(ctx, fields.get('operation_type'), childPath(entryPath, 'operation_type'));
    if (op === undefined || !(GRAPHQL_OPERATION_TYPES as readonly string[]).includes(op) || op === '*') {
      report(ctx, fields.get('operation_type')?.value ?? query, childPath(entryPath, 'operation_type'),
        'POLICY_GRAPHQL_INVALID', 'a persisted query needs operation_type query, mutation or subscription');
    }
    out[entry.key] = {
      operation_type: op ?? null,
      operation_name: readString(ctx, fields.get('operation_name'), childPath(entryPath, 'operation_name')) ?? null,
      fields: readStringList(ctx, fields.get('fields'), childPath(entryPath, 'fields')) ?? null,
    };
  }
  return out;
}
