// The OpenShell-compatible `version: 1` policy file as read from disk (docs/policy.md#file-format): field names and the raw
// shape. Types and key lists only; parse.ts reads YAML against these and compiles types.ts structures.

export const TOP_LEVEL_KEYS = [
  'version',
  'filesystem_policy',
  'landlock',
  'process',
  'network_policies',
  'network_middlewares',
] as const;

/** Sections accepted for compatibility, shape-checked as maps, and not enforced by boundary. */
export const NOT_ENFORCED_SECTIONS = ['filesystem_policy', 'landlock', 'process'] as const;

/** Known keys of the not-enforced sections: shape-checked so typos still fail the load (V1). */
export const NOT_ENFORCED_SECTION_KEYS: Readonly<Record<(typeof NOT_ENFORCED_SECTIONS)[number], readonly string[]>> = {
  filesystem_policy: ['include_workdir', 'read_only', 'read_write'],
  landlock: ['compatibility'],
  process: ['run_as_user', 'run_as_group'],
};

export const ENTRY_KEYS = ['name', 'endpoints', 'binaries'] as const;

export const BINARY_KEYS = ['path'] as const;

export const ENDPOINT_KEYS = [
  'host',
  'port',
  'ports',
  'path',
  'protocol',
  'tls',
  'enforcement',
  'access',
  'rules',
  'deny_rules',
  'allowed_ips',
  'allow_encoded_slash',
  'allow_encoded_backslash',
  'allow_encoded_nul',
  'websocket_credential_rewrite',
  'request_body_credential_rewrite',
  'allow_uninspected_credentials',
  'credential_signing',
  'signing_service',
  'signing_region',
  'credential_binding',
  'persisted_queries',
  'graphql_persisted_queries',
  'graphql_max_body_bytes',
  'mcp',
  'json_rpc',
] as const;

/** Fields that `protocol: tcp` rejects (V9). */
export const L7_ONLY_ENDPOINT_KEYS = [
  'path',
  'enforcement',
  'access',
  'rules',
  'deny_rules',
  'allow_encoded_slash',
  'allow_encoded_backslash',
  'allow_encoded_nul',
  'websocket_credential_rewrite',
  'request_body_credential_rewrite',
  'credential_signing',
  'signing_service',
  'signing_region',
  'persisted_queries',
  'graphql_persisted_queries',
  'graphql_max_body_bytes',
  'mcp',
  'json_rpc',
] as const;

export const CREDENTIAL_BINDING_KEYS = ['provider'] as const;
/** `filter_tools_list` is a boundary extension (docs/policy.md#filtering-toolslist); OpenShell has the other three. */
export const MCP_OPTION_KEYS = ['max_body_bytes', 'strict_tool_names', 'allow_all_known_mcp_methods', 'filter_tools_list', 'versions'] as const;
export const JSON_RPC_OPTION_KEYS = ['max_body_bytes'] as const;
export const PERSISTED_QUERY_KEYS = ['operation_type', 'operation_name', 'fields'] as const;

export const RULE_ENTRY_KEYS = ['allow'] as const;
export const HTTP_RULE_KEYS = ['method', 'path', 'query'] as const;
export const GRAPHQL_RULE_KEYS = ['operation_type', 'operation_name', 'fields'] as const;
export const MCP_RULE_KEYS = ['method', 'tool', 'params'] as const;
export const JSON_RPC_RULE_KEYS = ['method'] as const;
export const ANY_MATCHER_KEYS = ['any'] as const;

export const PROTOCOL_VALUES = ['tcp', 'rest', 'websocket', 'graphql', 'mcp', 'json-rpc'] as const;
export const TLS_VALUES = ['', 'skip'] as const;
export const GRAPHQL_OPERATION_TYPES = ['query', 'mutation', 'subscription', '*'] as const;
export const PERSISTED_QUERY_MODES = ['deny', 'allow_registered'] as const;

/** A string glob, or `{ any: [glob, ...] }`. */
export type RawMatcher = string | { readonly any: readonly string[] };

export interface RawHttpRule {
  readonly method: string;
  readonly path: string;
  readonly query?: Readonly<Record<string, RawMatcher>>;
}

export interface RawGraphqlRule {
  readonly operation_type: (typeof GRAPHQL_OPERATION_TYPES)[number];
  readonly operation_name?: string;
  readonly fields?: readonly string[];
}

export interface RawMcpRule {
  readonly method?: string;
  readonly tool?: RawMatcher;
  readonly params?: { readonly name?: RawMatcher };
}

export interface RawJsonRpcRule {
  readonly method: string;
}

export type RawRule = RawHttpRule | RawGraphqlRule | RawMcpRule | RawJsonRpcRule;

export interface RawEndpoint {
  readonly host?: string;
  readonly port?: number;
  readonly ports?: readonly number[];
  readonly path?: string;
  readonly protocol?: (typeof PROTOCOL_VALUES)[number];
  readonly tls?: (typeof TLS_VALUES)[number];
  readonly enforcement?: 'enforce' | 'audit';
  readonly access?: 'read-only' | 'read-write' | 'full';
  readonly rules?: readonly { readonly allow?: RawRule }[];
  readonly deny_rules?: readonly RawRule[];
  readonly allowed_ips?: readonly string[];
  readonly allow_encoded_slash?: boolean;
  /** boundary extension (docs/policy.md#path-canonicalisation): keep `%5C` and a raw `\` as `%5C`. */
  readonly allow_encoded_backslash?: boolean;
  /** boundary extension (docs/policy.md#path-canonicalisation): keep `%00`. */
  readonly allow_encoded_nul?: boolean;
  readonly websocket_credential_rewrite?: boolean;
  readonly request_body_credential_rewrite?: boolean;
  readonly allow_uninspected_credentials?: boolean;
  readonly credential_signing?: 'sigv4' | 'sigv4:body' | 'sigv4:no_body';
  readonly signing_service?: string;
  readonly signing_region?: string;
  readonly credential_binding?: { readonly provider: string };
  readonly persisted_queries?: (typeof PERSISTED_QUERY_MODES)[number];
  readonly graphql_persisted_queries?: Readonly<Record<string, RawGraphqlRule>>;
  readonly graphql_max_body_bytes?: number;
  readonly mcp?: {
    readonly max_body_bytes?: number;
    readonly strict_tool_names?: boolean;
    readonly allow_all_known_mcp_methods?: boolean;
    /** boundary extension: tools/list answers list only the tools policy allows. */
    readonly filter_tools_list?: boolean;
  };
  readonly json_rpc?: { readonly max_body_bytes?: number };
}

export interface RawPolicyEntry {
  readonly name?: string;
  readonly endpoints: readonly RawEndpoint[];
  readonly binaries?: readonly { readonly path: string }[];
}

export interface RawPolicyFile {
  readonly version: 1;
  readonly filesystem_policy?: Readonly<Record<string, unknown>>;
  readonly landlock?: Readonly<Record<string, unknown>>;
  readonly process?: Readonly<Record<string, unknown>>;
  readonly network_policies?: Readonly<Record<string, RawPolicyEntry>>;
  readonly network_middlewares?: Readonly<Record<string, unknown>>;
}
