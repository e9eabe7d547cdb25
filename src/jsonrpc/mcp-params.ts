// MCP request and notification params checked against the MCP SDK's own message schemas (zod), for the methods
// whose params OpenShell validates strictly (docs/policy.md#json-rpc-and-mcp-inspection). Pure; no I/O.

import { createRequire } from 'node:module';

/** Issues named in one problem: enough to see what is wrong, bounded for the event. */
const MAX_ISSUES_SHOWN = 3;

type SdkTypes = typeof import('@modelcontextprotocol/sdk/types.js');
/** What is used of a zod schema: safeParse and its issues. */
interface Schema {
  safeParse(value: unknown): { success: true } | { success: false; error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } };
}

/**
 * The methods whose params are checked, and the SDK schema each is checked with; tolerated list methods, ping and
 * extension methods are not checked (nor is the SDK loaded for them).
 */
const STRICT_SCHEMAS = {
  initialize: 'InitializeRequestSchema',
  'tools/call': 'CallToolRequestSchema',
  'resources/read': 'ReadResourceRequestSchema',
  'resources/subscribe': 'SubscribeRequestSchema',
  'resources/unsubscribe': 'UnsubscribeRequestSchema',
  'prompts/get': 'GetPromptRequestSchema',
  'tasks/get': 'GetTaskRequestSchema',
  'tasks/result': 'GetTaskPayloadRequestSchema',
  'tasks/cancel': 'CancelTaskRequestSchema',
  'logging/setLevel': 'SetLevelRequestSchema',
  'completion/complete': 'CompleteRequestSchema',
  'notifications/cancelled': 'CancelledNotificationSchema',
  'notifications/progress': 'ProgressNotificationSchema',
} as const satisfies Record<string, keyof SdkTypes>;

/**
 * The SDK's types module (and zod with it), loaded on the first strictly checked MCP message: a boundary
 * without mcp endpoints never pays for it. Measured (docs/policy.md#why-the-mcp-sdk-schemas, bench/jsonrpc-inspect.ts):
 * about 0.2 s and 6-7 MiB of heap to load, 1.2 us to check a tools/call and 3.9 us an initialize.
 */
let sdk: SdkTypes | undefined;

function schemaFor(method: string): Schema | undefined {
  if (!Object.hasOwn(STRICT_SCHEMAS, method)) return undefined;
  sdk ??= createRequire(import.meta.url)('@modelcontextprotocol/sdk/types.js') as SdkTypes;
  return sdk[STRICT_SCHEMAS[method as keyof typeof STRICT_SCHEMAS]] as unknown as Schema;
}

/**
 * Why `params` do not fit `method`'s schema, or undefined. Absent params count as `{}` (OpenShell), so a
 * tools/call without params fails on its missing name. The problem names params keys, never a value, and
 * never a key below `params.<key>` (argument names stay out of logs).
 */
export function mcpParamsProblem(method: string, params: unknown): string | undefined {
  const schema = schemaFor(method);
  if (schema === undefined) return undefined;
  const result = schema.safeParse({ method, params: params ?? {} });
  if (result.success) return undefined;
  const shown = new Set(result.error.issues.map((i) => `${i.path.slice(0, 2).map(String).join('.') || '(message)'}: ${i.message}`));
  return [...shown].slice(0, MAX_ISSUES_SHOWN).join('; ');
}
