// The MCP protocol revisions boundary knows (docs/policy.md#mcp-protocol-revisions) and what each lets a client
// send: the core client-to-server methods per revision (anything else is an extension method), the methods that
// only a server sends, and the revision-independent names the inspector compares. Pure data.

/** The revisions `mcp.versions` may list, oldest first: the canonical order of a stored list. */
export const MCP_REVISIONS = ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'] as const;
export type McpRevision = (typeof MCP_REVISIONS)[number];

/** `mcp.versions` left out: pinned, never widened when a newer revision becomes known. */
export const DEFAULT_MCP_VERSIONS: readonly McpRevision[] = Object.freeze(['2025-11-25']);

/** The revision a request without an `MCP-Protocol-Version` header is read under, whatever the policy lists. */
export const FALLBACK_MCP_REVISION: McpRevision = '2025-03-26';

/** The sessionless revision: one message per POST, `_meta` and mirrored headers on every request. */
export const SESSIONLESS_MCP_REVISION: McpRevision = '2026-07-28';

/** The only revision under which a body may be a batch (a JSON array). */
export const BATCH_MCP_REVISION: McpRevision = '2025-03-26';

/** Top-level messages a batch may hold (responses count). */
export const MAX_MCP_BATCH_MESSAGES = 64;

/** `params._meta` keys the sessionless revision defines. */
export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';

export function isMcpRevision(text: string): text is McpRevision {
  return (MCP_REVISIONS as readonly string[]).includes(text);
}

/** Methods of every revision. */
const EVERY = [
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
] as const;
/** Methods and notifications of the session-based revisions. */
const SESSIONED = [
  'initialize',
  'ping',
  'logging/setLevel',
  'resources/subscribe',
  'resources/unsubscribe',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
] as const;
/** Experimental tasks, 2025-11-25 only. */
const TASKS = ['tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel', 'notifications/tasks/status'] as const;
const SESSIONLESS = ['server/discover', 'subscriptions/listen'] as const;

const CORE: Readonly<Record<McpRevision, ReadonlySet<string>>> = {
  '2025-03-26': new Set([...EVERY, ...SESSIONED]),
  '2025-06-18': new Set([...EVERY, ...SESSIONED]),
  '2025-11-25': new Set([...EVERY, ...SESSIONED, ...TASKS]),
  '2026-07-28': new Set([...EVERY, ...SESSIONLESS]),
};

/** Every method some revision defines for the client: one that is not core in the selected revision is refused, not an extension. */
const KNOWN: ReadonlySet<string> = new Set([...EVERY, ...SESSIONED, ...TASKS, ...SESSIONLESS]);

/** Requests only a server sends: a client sending one has the direction wrong. */
const SERVER_REQUESTS: ReadonlySet<string> = new Set(['sampling/createMessage', 'roots/list', 'elicitation/create']);

/** What `method` is for a client under `revision`. */
export function mcpMethodClass(revision: McpRevision, method: string): 'core' | 'unavailable' | 'extension' {
  if (CORE[revision].has(method)) return 'core';
  return KNOWN.has(method) ? 'unavailable' : 'extension';
}

/** A request (with an id) only servers send. */
export function isServerRequest(method: string): boolean {
  return SERVER_REQUESTS.has(method);
}

/** The core methods of a revision, for docs and tests. */
export function coreMcpMethods(revision: McpRevision): readonly string[] {
  return [...CORE[revision]];
}
