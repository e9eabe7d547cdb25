// The compiled policy and the decision contract shared by every adapter (CONNECT, forward HTTP,
// L7 inside tunnels, transparent capture, DNS). Types only: parse.ts builds them, decide.ts reads them.

import type { McpRevision } from '../jsonrpc/mcp-revisions.js';
import type { Issue } from '../shared/errors.js';
import type { HostForm } from '../net/host.js';
import type { BinaryIdentity, IdentityClaim, IdentityFailure } from './binary-identity.js';
import type { GraphqlOperation, GraphqlRequest } from './graphql-match.js';
import type { JsonRpcCall, JsonRpcRequest } from './jsonrpc-match.js';
import type { BuiltinMiddleware } from './middleware-builtins.js';

/** `l4` is OpenShell's omitted protocol: explicit-proxy passthrough. */
const PROTOCOLS = ['l4', 'tcp', 'rest', 'websocket', 'graphql', 'mcp', 'json-rpc'] as const;
export type Protocol = (typeof PROTOCOLS)[number];
/** Protocols whose requests are inspected (TLS terminated, HTTP parsed). */
export const L7_PROTOCOLS: ReadonlySet<Protocol> = new Set(['rest', 'websocket', 'graphql', 'mcp', 'json-rpc']);

export const ACCESS_PRESETS = ['read-only', 'read-write', 'full'] as const;
export type AccessPreset = (typeof ACCESS_PRESETS)[number];

export const ENFORCEMENTS = ['enforce', 'audit'] as const;
export type Enforcement = (typeof ENFORCEMENTS)[number];

/** How the endpoint's host was written; selects the SSRF validation plan (docs/destinations.md#validation-plans). */
const HOST_KINDS = ['exact', 'wildcard', 'ip', 'any'] as const;
export type HostKind = (typeof HOST_KINDS)[number];

export const ADAPTERS = ['connect', 'forward', 'l7', 'capture', 'dns', 'explain'] as const;
export type Adapter = (typeof ADAPTERS)[number];

/** One question to the policy: may this leave the sandbox? Host is already normalised (net/host.ts). */
export interface EgressIntent {
  readonly adapter: Adapter;
  /** Lower-case A-label name or canonical IP literal (IPv6 without brackets). */
  readonly host: string;
  readonly port: number;
  /** Present for HTTP requests (forward, L7); absent for connection-level decisions. */
  readonly method?: string;
  /** Canonical path (proxy/path.ts), without the query. */
  readonly path?: string;
  /** Raw query string without the leading `?`, still percent-encoded. */
  readonly query?: string;
  /** Who opened the connection (docs/identity.md); absent: binaries are not checked (endpoint-only). */
  readonly identity?: IdentityClaim | undefined;
  /**
   * The connection-level allow made for this host, port and identity under this policy: the request is decided from
   * its matched endpoints, so the host is matched and the binaries narrowed once per request, not once per decision.
   */
  readonly after?: Decision | undefined;
  /** The parsed GraphQL body or GET envelope, for requests a `protocol: graphql` endpoint selects. */
  readonly graphql?: GraphqlRequest;
  /** The parsed JSON-RPC body, receive stream or session end, for requests a json-rpc or mcp endpoint selects. */
  readonly jsonRpc?: JsonRpcRequest;
}

/** The question types policy DNS answers from policy; every other type is NOTIMP before any intent is built. */
const DNS_QTYPES = ['A', 'AAAA'] as const;
export type DnsQtype = (typeof DNS_QTYPES)[number];

/** One DNS question to the policy: may this name get a synthetic address? Ports are not asked (docs/dns.md#query-handling). */
export interface DnsIntent {
  readonly adapter: 'dns';
  /** normaliseHost() output: a lower-case A-label name, or the canonical literal when the question spelt an IP. */
  readonly host: string;
  /** What normaliseHost() said the host is; an IP literal is never a name policy DNS may map. */
  readonly form: HostForm;
  readonly qtype: DnsQtype;
}

/** A compiled, frozen endpoint. `id` is stable across reloads of the same text: `<policyKey>#<index>`. */
export interface Endpoint {
  readonly id: string;
  readonly policy: string;
  readonly policyName: string;
  readonly index: number;
  /** Normalised host pattern as written; undefined for the hostless `allowed_ips` form. */
  readonly host: string | undefined;
  readonly hostKind: HostKind;
  readonly ports: readonly number[];
  readonly protocol: Protocol;
  readonly tls: 'auto' | 'skip';
  readonly enforcement: Enforcement;
  /** Endpoint path selector (docs/policy.md#endpoint-path-selector); undefined matches every path. */
  readonly path: string | undefined;
  /** CIDRs in canonical text form (`10.0.0.0/8`). Empty: no `allowed_ips` plan. */
  readonly allowedIps: readonly string[];
  readonly allowEncodedSlash: boolean;
  /** boundary extension: keep `%5C` (and a raw `\`) in the path instead of refusing the request. */
  readonly allowEncodedBackslash: boolean;
  /** boundary extension: keep `%00` in the path instead of refusing the request. */
  readonly allowEncodedNul: boolean;
  readonly credentialProvider: string | undefined;
  readonly requestBodyCredentialRewrite: boolean;
  readonly websocketCredentialRewrite: boolean;
  readonly allowUninspectedCredentials: boolean;
  /** Binary path globs as written (`/usr/bin/node`, `/**`). */
  readonly binaries: readonly string[];
  /** True when requests to it are inspected: an L7 protocol. */
  readonly inspected: boolean;
  /** Position in `Policy.endpoints` (policy order across entries). */
  readonly order: number;
  readonly access: AccessPreset | undefined;
  /** Compiled allow rules as written (presets are not expanded here). */
  readonly rules: readonly L7Rule[];
  readonly denyRules: readonly L7Rule[];
  /** Specificity of the path selector (docs/policy.md#endpoint-path-selector): non-`*` characters; 0 when it selects every path. */
  readonly selectorSpecificity: number;
  /** The endpoint path selector (docs/policy.md#endpoint-path-selector): looser than rule globs. */
  selectsPath(path: string): boolean;
  readonly credentialSigning: CredentialSigning | undefined;
  readonly signingService: string | undefined;
  readonly signingRegion: string | undefined;
  /** Protocol options (graphql, mcp, json-rpc) with defaults applied; validated now, enforced later. */
  readonly options: EndpointOptions;
  /** The owning entry's binary globs; an empty list matches nothing. */
  matchesBinary(path: string): boolean;
}

export const CREDENTIAL_SIGNING_MODES = ['sigv4', 'sigv4:body', 'sigv4:no_body'] as const;
export type CredentialSigning = (typeof CREDENTIAL_SIGNING_MODES)[number];

export interface EndpointOptions {
  readonly graphqlMaxBodyBytes: number;
  readonly persistedQueries: 'deny' | 'allow_registered';
  /** graphql_persisted_queries: the trusted registry, by hash or id; what a registered hash-only query is decided as. */
  readonly graphqlPersistedQueries?: ReadonlyMap<string, GraphqlOperation>;
  readonly mcpStrictToolNames: boolean;
  readonly mcpAllowAllKnownMethods: boolean;
  /** boundary extension `mcp.filter_tools_list`: tools/list answers list only the tools policy allows. */
  readonly mcpFilterToolsList: boolean;
  /** `mcp.versions`: the MCP protocol revisions a request may select, sorted oldest first (docs/policy.md#mcp-protocol-revisions). */
  readonly mcpVersions: readonly McpRevision[];
  /** The body limit of json-rpc and mcp endpoints: `mcp.max_body_bytes`, else `json_rpc.max_body_bytes`. */
  readonly jsonRpcMaxBodyBytes: number;
}

/** `http` rules look at method, path and query; the others at the parsed GraphQL operation or JSON-RPC call. */
const RULE_KINDS = ['http', 'graphql', 'mcp', 'json-rpc'] as const;
type RuleKind = (typeof RULE_KINDS)[number];

/**
 * Query parameters after %XX decoding (no `+` to space), split on `&`; a repeated key keeps every value in order, and a
 * bracketed key (`ids[]`) is also listed under its base name. readings() holds every other parse of the same bytes
 * (docs/policy.md#query-matching), keys lower-cased; it is computed on first use.
 */
export interface QueryParams extends ReadonlyMap<string, readonly string[]> {
  readings(): ReadonlyMap<string, readonly string[]>;
}

/** What an HTTP rule looks at: upper-case method, canonical path, decoded query. */
export interface HttpRequestView {
  readonly method: string;
  readonly path: string;
  readonly query: QueryParams;
}

export interface L7Rule {
  readonly kind: RuleKind;
  /** Rendered for decisions and `policy explain`: `GET /api/**`, `query viewer`, `tools/call search_web`. */
  readonly text: string;
  /** Allow or deny semantics are fixed when compiled (docs/policy.md#query-matching). Non-http rules never match. */
  matchesHttp(request: HttpRequestView): boolean;
  /** GraphQL rules only (allow or deny semantics fixed when compiled); absent on every other kind. */
  matchesGraphql?(op: GraphqlOperation): boolean;
  /** JSON-RPC and MCP rules only: does this call match (allow or deny alike)? */
  matchesCall?(call: JsonRpcCall): boolean;
  /** MCP allow rules naming tools: with one on an endpoint, tools/call needs a tool rule even under the method profile. */
  readonly scopesTools?: boolean;
  /** MCP rules: the method the rule names without glob characters, if it does; only an equal one allows an extension method. */
  readonly mcpMethod?: string;
}

export interface PolicyEntry {
  readonly key: string;
  readonly name: string;
  readonly endpoints: readonly Endpoint[];
  readonly binaries: readonly string[];
  /** Binary globs (`*` inside a segment, `**` any depth); an empty list matches nothing. */
  matchesBinary(path: string): boolean;
}

/** `on_error` of a network middleware entry: what a stage that failed does to the request (docs/policy.md#network-middlewares). */
export const MIDDLEWARE_ON_ERROR = ['fail_closed', 'fail_open'] as const;
export type MiddlewareOnError = (typeof MIDDLEWARE_ON_ERROR)[number];
/** `on_uninspectable`: what traffic the entry selects but cannot inspect (tls: skip, raw TCP, a streamed body) gets. */
export const MIDDLEWARE_ON_UNINSPECTABLE = ['deny', 'allow'] as const;
export type MiddlewareOnUninspectable = (typeof MIDDLEWARE_ON_UNINSPECTABLE)[number];

/** One compiled `network_middlewares` entry, selected by destination host whatever entry allowed the request. */
export interface MiddlewareEntry {
  /** The map key: the entry's identity in events and in denial bodies. */
  readonly key: string;
  readonly name: string;
  /** `middleware` as written: `ryno/regex`, `openshell/regex`, or a registered service's name. */
  readonly middleware: string;
  /** The built-in it names; undefined for a registered external service. */
  readonly builtin: BuiltinMiddleware | undefined;
  /** Lower runs first; unique across the policy. */
  readonly order: number;
  /** The entry's `config` as frozen plain data (`{}` when absent). */
  readonly config: Readonly<Record<string, unknown>>;
  readonly onError: MiddlewareOnError;
  /** `on_uninspectable` as written, else `deny` for fail_closed and `allow` for fail_open. */
  readonly onUninspectable: MiddlewareOnUninspectable;
  /** Normalised host patterns as written. */
  readonly include: readonly string[];
  readonly exclude: readonly string[];
  /** True when `host` (normalised) matches an include pattern and no exclude pattern. */
  selects(host: string): boolean;
  /** Equal for entries that behave the same (key, implementation, order, config, modes, selector). */
  readonly fingerprint: string;
}

/** A compiled policy. Immutable; the store stamps `generation` when it becomes current. */
export interface Policy {
  readonly generation: number;
  /** sha256 hex of the canonical JSON of the network policy; equal hashes mean equal behaviour. */
  readonly hash: string;
  readonly entries: readonly PolicyEntry[];
  readonly endpoints: readonly Endpoint[];
  /** Load-time warnings (problems that do not fail the load), with codes. */
  readonly warnings: readonly Issue[];
  /** Sections accepted but not enforced by boundary (`filesystem_policy`, `landlock`, `process`). */
  readonly notEnforced: readonly string[];
  /** Endpoints whose host pattern matches `host` (any port), in policy order. Not a linear scan. */
  endpointsForHost(host: string): readonly Endpoint[];
  /** `network_middlewares` in ascending order. */
  readonly middlewares: readonly MiddlewareEntry[];
  /** The entries whose selector takes `host`, in ascending order; a shared empty list when none does. */
  middlewaresFor(host: string): readonly MiddlewareEntry[];
}

const VERDICTS = ['allow', 'audit', 'deny'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** Closed set: rendered into events, metric labels and docs. */
export const DECISION_REASONS = [
  'endpoint-allowed',
  'rule-allowed',
  'preset-allowed',
  'no-policy',
  'no-endpoint-matched',
  'binary-not-allowed',
  // The endpoint's entry needs the process's binary and it could not be established (docs/identity.md#failure-reasons).
  'identity-unavailable',
  'deny-rule-matched',
  'no-rule-matched',
  'unsupported-l7-protocol',
  // A GraphQL body or GET envelope that cannot be read as one (docs/policy.md#graphql-inspection): denied even under audit.
  'graphql-rejected',
  // A JSON-RPC or MCP body that cannot be read, or a client-sent response on json-rpc: denied even under audit.
  'jsonrpc-rejected',
  // DNS intents only: a question whose name can never be mapped, whatever the policy says.
  'ip-literal-name',
  'local-name',
  'metadata-name',
] as const;
export type DecisionReason = (typeof DECISION_REASONS)[number];

/** The reasons decide() gives a DnsIntent, in the order it checks them. */
export const DNS_DECISION_REASONS = [
  'ip-literal-name',
  'local-name',
  'metadata-name',
  'no-policy',
  'no-endpoint-matched',
  'endpoint-allowed',
] as const satisfies readonly DecisionReason[];
export type DnsDecisionReason = (typeof DNS_DECISION_REASONS)[number];

/** What every decision carries, whatever the adapter: the verdict's reason and what in the policy it rests on. */
interface DecisionBase<V, R> {
  readonly verdict: V;
  readonly reason: R;
  /** One human sentence; never contains a query string or credential. */
  readonly detail: string;
  /** Policy key that decided (lexicographically smallest matching key), or undefined. */
  readonly policy: string | undefined;
  readonly policyName: string | undefined;
  readonly endpointIndex: number | undefined;
  /** The selected endpoint (for L7: after the path selector). */
  readonly endpoint: Endpoint | undefined;
  /** Every endpoint that matched (DNS: every covering endpoint, any port, in policy order; empty on deny). */
  readonly endpoints: readonly Endpoint[];
  readonly generation: number;
  readonly policyHash: string;
}

/** A verdict is a value. Deny is never thrown. */
export interface Decision extends DecisionBase<Verdict, DecisionReason> {
  readonly layer: 'l4' | 'l7';
  /** Which identity the decision was made with (docs/identity.md#decisions). */
  readonly binaryIdentity: BinaryIdentity;
  /** The executable the decision was made for (`process`). */
  readonly binary: string | undefined;
  /** Its pid, when an identity source named one. */
  readonly binaryPid: number | undefined;
  /** The ancestor whose path matched the selected endpoint's binaries when the executable's own did not. */
  readonly binaryAncestor: string | undefined;
  /** For every matched endpoint granted through an ancestor, that ancestor: a request decided after this one reuses it. */
  readonly grantedBy: ReadonlyMap<Endpoint, string> | undefined;
  /** Why no identity was established (`unavailable`). */
  readonly identityFailure: IdentityFailure | undefined;
  /** For L7: the rule that matched (`GET /api/**`), or the rule that was missing on deny. */
  readonly rule: string | undefined;
  /** JSON-RPC and MCP: the calls the verdict rests on (every call when allowed, the denied one when denied). */
  readonly calls?: readonly JsonRpcCall[] | undefined;
}

/**
 * The verdict on a DnsIntent. Eligibility is coverage by any endpoint's host pattern, whatever its port, protocol,
 * binaries or enforcement; audit does not apply (a name is answered or not). Deny is never thrown.
 */
export type DnsDecision = DecisionBase<'allow' | 'deny', DnsDecisionReason>;
