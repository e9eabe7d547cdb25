// The one catalogue of error and problem codes. Codes are stable and never reused; tests match on
// codes, never messages. docs/errors.md's table lists exactly these codes (a unit test checks it).

export const ERROR_CODES = {
  // configuration and CLI
  CONFIG_INVALID: 'configuration failed validation; issues lists every problem',
  USAGE: 'the command line was not understood; the message says what was expected',
  // policy loading (POLICY_INVALID carries every problem; each problem has one of the POLICY_* codes below)
  POLICY_INVALID: 'policy failed validation; issues lists every problem',
  POLICY_UNREADABLE: 'the policy file could not be read',
  POLICY_YAML_SYNTAX: 'the file is not valid YAML',
  POLICY_VERSION: 'version must be exactly 1',
  POLICY_UNKNOWN_KEY: 'a key that the policy schema does not define (typos fail the load)',
  POLICY_TYPE: 'a value has the wrong type (map, list, string, number, boolean)',
  POLICY_RESERVED_KEY: 'policy keys starting with _provider_ are reserved',
  POLICY_ENDPOINTS_EMPTY: 'a policy entry needs at least one endpoint',
  POLICY_HOST_REQUIRED: 'an endpoint needs host unless allowed_ips is set',
  POLICY_HOST_INVALID: 'host is not a valid hostname or IP literal',
  POLICY_HOST_WILDCARD: 'host wildcard outside the allowed grammar (docs/policy.md#host-patterns)',
  POLICY_PORT_INVALID: 'port must be an integer 1-65535',
  POLICY_PORT_REQUIRED: 'an endpoint needs port or ports',
  POLICY_PROTOCOL_INVALID: 'protocol is not one of tcp, rest, websocket, graphql, mcp, json-rpc',
  POLICY_TLS_INVALID: 'tls must be skip or left out (terminate, passthrough and any other spelling are refused)',
  POLICY_TLS_WITH_PROTOCOL: 'tls: skip cannot be combined with a request protocol',
  POLICY_ENFORCEMENT_INVALID: 'enforcement must be enforce or audit',
  POLICY_ACCESS_INVALID: 'access must be read-only, read-write or full, and is not allowed for mcp or json-rpc',
  POLICY_ACCESS_AND_RULES: 'access and rules are mutually exclusive',
  POLICY_RULES_REQUIRED: 'this protocol needs rules or access',
  POLICY_RULES_EMPTY: 'rules: [] is rejected; omit it or list rules',
  POLICY_RULES_NO_ALLOW: 'a rules list in which no entry has allow would deny everything',
  POLICY_DENY_RULES_EMPTY: 'deny_rules: [] is rejected',
  POLICY_DENY_RULES_REQUIREMENTS: 'deny_rules need a protocol and rules or access',
  POLICY_RULE_INVALID: 'a rule has a bad method, path or query matcher',
  POLICY_PATH_INVALID: 'an endpoint path selector is not a valid glob',
  POLICY_TCP_L7_FIELD: 'protocol tcp does not accept L7 fields',
  POLICY_TCP_HOST: 'protocol tcp needs a DNS hostname (no IP literal, no trailing dot)',
  POLICY_ALLOWED_IPS_INVALID: 'an allowed_ips entry is not an IP or CIDR',
  POLICY_ALLOWED_IPS_LOOPBACK: 'allowed_ips overlaps an always-blocked range (loopback, link-local, unspecified) or is 0.0.0.0/0',
  POLICY_ALLOWED_IPS_HOST_BITS: 'an allowed_ips CIDR has bits set past its prefix',
  POLICY_SIGNING_INVALID: 'credential_signing needs signing_service and a region (signing_region or an AWS host), and excludes request_body_credential_rewrite and tls: skip',
  POLICY_BODY_REWRITE_INVALID: 'request_body_credential_rewrite is valid on rest, mcp and json-rpc endpoints only',
  POLICY_WEBSOCKET_REWRITE_INVALID: 'websocket_credential_rewrite is valid on rest and websocket endpoints only',
  POLICY_UNINSPECTED_CREDENTIALS: 'a credentialed endpoint must be inspectable unless allow_uninspected_credentials is set',
  POLICY_AMBIGUOUS: 'endpoints that can match the same host and port disagree on tls, allowed_ips, protocol, enforcement or credentials',
  POLICY_BINARY_INVALID: 'a binaries entry is not an absolute path or valid glob',
  POLICY_MCP_INVALID: 'mcp endpoint settings are invalid (rules, host, port or options)',
  POLICY_JSON_RPC_INVALID: 'json-rpc endpoints need rules with allow.method',
  POLICY_GRAPHQL_INVALID: 'graphql rule or option is invalid',
  POLICY_TCP_RELOAD: 'the first protocol tcp endpoint cannot be added to a running boundary without live capture (V15)',
  POLICY_LIMIT_BYTES: 'the policy text is larger than MAX_POLICY_BYTES; refused before YAML parsing',
  POLICY_LIMIT_ENDPOINTS: 'the policy has more endpoints than MAX_POLICY_ENDPOINTS',
  POLICY_LIMIT_RULES: 'the policy has more rules and deny_rules than MAX_POLICY_RULES',
  POLICY_LIMIT_ALIASES: 'YAML aliases expand past MAX_POLICY_ALIAS_COUNT',
  POLICY_LIMIT_YAML: 'a YAML list or map has more than MAX_YAML_COLLECTION_ENTRIES entries, or the document more than MAX_YAML_EVENTS parser events',
  POLICY_SANDBOX_INVALID: 'a filesystem_policy, landlock or process value OpenShell refuses (checked though boundary does not enforce these sections)',
  POLICY_MIDDLEWARE_INVALID: 'a network_middlewares entry is malformed (name, middleware, order, config, on_error or on_uninspectable)',
  POLICY_MIDDLEWARE_UNKNOWN: 'middleware names no built-in: the openshell/, ryno/ and boundary/ prefixes are reserved for built-ins',
  POLICY_MIDDLEWARE_EXTERNAL: 'middleware names an external middleware service that is not registered (--middleware-config), so the entry is refused, never skipped',
  POLICY_MIDDLEWARE_CONFIG: "a middleware entry's config was refused by its built-in or its service, or is larger than MAX_MIDDLEWARE_CONFIG_BYTES",
  POLICY_MIDDLEWARE_ORDER: 'two network_middlewares entries use the same order',
  POLICY_MIDDLEWARE_LIMIT: 'more than MAX_MIDDLEWARES entries, or more than MAX_SELECTOR_PATTERNS include and exclude patterns in one entry',
  POLICY_MIDDLEWARE_SELECTOR: 'a middleware entry needs endpoints with a non-empty include list',
  POLICY_MIDDLEWARE_TLS_SKIP: 'a fail_closed (or on_uninspectable: deny) middleware selects a tls: skip endpoint it could never inspect',
  MIDDLEWARE_HANDSHAKE_FAILED: "a registered middleware service did not answer Describe, or its manifest is not one boundary can use (protocol, capability, bindings, limits); a policy naming it is refused",
  MIDDLEWARE_UNAVAILABLE: "a registered middleware service did not answer ValidateConfig in time; the policy naming it is refused and the previous one stays",
  // policy warnings: the load succeeds; policy check prints them
  POLICY_WARN_AUDIT_DEFAULT: 'an L7 endpoint relies on the default audit enforcement; violations are logged, not blocked',
  POLICY_WARN_PORT_AND_PORTS: 'both port and ports are set; ports wins',
  POLICY_WARN_ALLOWED_IPS_BROAD: 'an allowed_ips entry is broader than /16',
  POLICY_WARN_RULES_WITHOUT_PROTOCOL: 'access or rules without protocol have no effect',
  POLICY_WARN_PUBLIC_SUFFIX: 'a wildcard whose fixed suffix is a public suffix',
  POLICY_WARN_NOT_ENFORCED: 'filesystem_policy, landlock and process are accepted but not enforced by boundary',
  POLICY_WARN_NO_BINARIES: 'an entry lists no binaries: it allows nothing unless binary identity is endpoint-only (docs/identity.md#modes)',
  POLICY_WARN_GRAPHQL_FIELD_IGNORED: 'persisted_queries, graphql_persisted_queries or graphql_max_body_bytes on an endpoint that is not graphql or websocket: ignored',
  POLICY_WARN_PERSISTED_QUERIES_EMPTY: 'persisted_queries: allow_registered without graphql_persisted_queries: every hash-only query is denied',
  POLICY_WARN_DENY_PATH_CASE: 'a deny rule path has letters: an origin that ignores case serves other spellings the rule does not deny',
  POLICY_WARN_ALWAYS_BLOCKED: 'an endpoint names a destination no policy can open (a metadata or local name, an always-blocked address, boundary\'s own listener): it allows nothing (policy check only)',
  // network and addresses
  ADDRESS_INVALID: 'a host, IP literal, CIDR or host:port failed to parse',
  // upstream
  UPSTREAM_CONNECT_TIMEOUT: 'upstream did not accept within CONNECT_TIMEOUT_MS',
  UPSTREAM_CONNECT_REFUSED: 'upstream refused the connection',
  UPSTREAM_UNREACHABLE: 'no validated upstream address could be reached',
  UPSTREAM_PROTOCOL_ERROR: 'an upstream response broke HTTP/1.1 framing or syntax, or the HTTP/2 protocol rules; the connection (for HTTP/2 a malformed response: its stream) is dropped',
  UPSTREAM_TIMEOUT: 'upstream sent no response head or body bytes within its named timeout',
  UPSTREAM_CLOSED: 'upstream closed or reset the connection before the response ended',
  UPSTREAM_REQUEST_INVALID: 'a request could not be written upstream (bad method, target, header or body length); nothing unsafe was sent',
  UPSTREAM_BUSY: 'more requests waited for one upstream than MAX_QUEUED_REQUESTS_PER_UPSTREAM',
  // the corporate upstream proxy (docs/running.md#corporate-upstream-proxy)
  UPSTREAM_PROXY_REFUSED: 'the upstream proxy answered a CONNECT with a status other than 200',
  UPSTREAM_PROXY_UNREACHABLE: 'the upstream proxy could not be reached, or its TLS could not be verified',
  UPSTREAM_PROXY_TIMEOUT: 'the upstream proxy did not answer a CONNECT within its share of UPSTREAM_PROXY_DIAL_BUDGET_MS',
  UPSTREAM_PROXY_MALFORMED: 'the upstream proxy closed before its answer ended, or sent one that is not HTTP/1.x or longer than PROXY_REPLY_HEAD_MAX_BYTES',
  // workload side
  CLIENT_RESET: 'the workload reset an HTTP/2 stream, or its session ended, before the request body ended; nothing more of it goes upstream',
  // DNS
  DNS_TIMEOUT: 'the upstream DNS server gave no answer in time',
  DNS_MALFORMED: 'a DNS message failed to decode',
  MESSAGE_TOO_LARGE: 'a DNS, control or identity message exceeded its named limit',
  DNS_EPOCH_INVALID: 'the persisted synthetic-address epoch is corrupt or unreadable; policy DNS and capture fail closed',
  DNS_WORKERS_UNSUPPORTED: "--dns-workers was given but this Node's dgram cannot bind UDP sockets that share a port (SO_REUSEPORT: Node 22.12 or later); boundary does not start rather than serve on one thread",
  // PKI
  PKI_INVALID: 'a certificate or key could not be loaded or does not match',
  PKI_NAME_INVALID: 'a sandbox id, trust domain or server name cannot be put in a certificate',
  PKI_EXISTS: 'pki init found a CA already in the directory; it is never overwritten',
  // control channel
  CONTROL_HANDSHAKE_FAILED: 'mTLS to the supervisor failed verification',
  CONTROL_MESSAGE_INVALID: 'a control message failed to decode or validate',
  // binary identity (docs/identity.md)
  IDENTITY_MESSAGE_INVALID: 'a message on the identity socket failed to decode or validate; the connection is dropped',
  // the log (docs/events.md#where-the-lines-go)
  LOG_LINES_DROPPED: "stdout's reader fell more than 16 MiB behind, so log lines (audit events among them) were dropped until it caught up; the warning says how many; boundary also counts them in boundary_log_lines_dropped_total",
  // admin listeners
  ADMIN_REQUEST_INVALID: 'an admin API request has a missing, repeated or malformed query parameter; parameter names it',
  ADMIN_LOOPBACK_ONLY: "boundary's /v1/explain and /v1/denials answer loopback clients only (inside the pod); /healthz, /readyz and /metrics answer anyone",
  // supervisor admin listener
  ADMIN_AUTH_MISSING: 'the supervisor admin listener needs an admin token file or admin TLS; it never runs unauthenticated',
  ADMIN_TOKEN_INVALID: 'the admin token file is missing, unreadable, larger than 4 KiB, not printable ASCII, or shorter than 32 characters',
  // supervisor store and withdrawal hook
  STORE_UNAVAILABLE: 'the supervisor store could not be read or written: a PostgreSQL connection or query failed, or the state file could not be read or written',
  STATE_DIR_UNUSABLE: 'the supervisor --state-dir could not be created (mode 0700), is not a directory, or the state file could not be written in it at start',
  STORE_STATE_INVALID: 'the state file is corrupt or has an unknown format version, or the database has a newer schema than this supervisor',
  WITHDRAWAL_HOOK_FAILED: 'a withdrawal hook command or webhook did not acknowledge; the message says why, and the delivery is retried',
  WITHDRAWAL_HOOK_CONFIG_INVALID: 'the withdrawal hook needs a command or webhook, a program, an http: or https: URL without credentials, readable files and a positive timeout',
  // credentials
  CREDENTIALS_INVALID: 'credentials file failed validation; issues lists every problem',
  CREDENTIALS_UNREADABLE: 'the credentials file could not be read',
  CREDENTIALS_YAML_SYNTAX: 'the credentials file is not valid YAML',
  CREDENTIALS_UNKNOWN_KEY: 'a key that the credentials schema does not define (typos fail the load; OpenShell token_grant is refused by name)',
  CREDENTIALS_TYPE: 'a credentials value has the wrong type (map, list, string, number)',
  CREDENTIALS_PROVIDER_INVALID: 'a provider name is empty, too long, or uses characters outside A-Z a-z 0-9 _ . -',
  CREDENTIALS_KEY_INVALID: 'an env key is not a valid environment name or starts with a reserved v<digits>_ / s<64hex>_ prefix',
  CREDENTIALS_VALUE_INVALID: 'a credential value is empty, too long, or contains CR, LF or NUL',
  CREDENTIALS_VALUE_SOURCE: 'a value_from file or environment variable is missing or unreadable',
  CREDENTIALS_ENDPOINT_INVALID: 'a provider endpoint has a bad host, port or path glob',
  CREDENTIALS_LIMIT: 'the credentials exceed a named limit (file bytes, providers, keys, endpoints)',
  CREDENTIALS_CLIENT_CERT_INVALID: 'a provider client_certificate is unreadable, not PEM, its key does not match its certificate, or it is bound with a path or to no endpoint',
  CREDENTIALS_FORMAT_INVALID: 'a key\'s placeholder format is not in the catalogue, or its prefix, length or alphabet is invalid or gives the random part under MIN_SHAPED_ENTROPY_BITS',
  UPSTREAM_CLIENT_CERT_FAILED: 'the client certificate bound to an upstream could not be used: two are bound to one host and port, it is expired or not yet valid (nothing is sent), or the origin closed the connection that presented it before answering',
  CREDENTIALS_GRANT_INVALID: 'a token grant is malformed: grant type, https token endpoint, client id, a secret given inline instead of value_from, placement',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** One problem found while validating input: where it is, what code, what is wrong. */
export interface Issue {
  readonly code: ErrorCode;
  readonly path: string;
  readonly message: string;
  readonly line?: number;
  readonly column?: number;
  /** The file the problem is in, when the input came from one (policy/load.ts). */
  readonly source?: string;
}

export class BoundaryError extends Error {
  override readonly name = 'BoundaryError';
  readonly code: ErrorCode;
  readonly issues: readonly Issue[];
  constructor(code: ErrorCode, message: string, options?: ErrorOptions & { issues?: readonly Issue[] }) {
    super(message, options);
    this.code = code;
    this.issues = options?.issues ?? [];
  }
}

export function isBoundaryError(err: unknown): err is BoundaryError {
  return err instanceof BoundaryError;
}
