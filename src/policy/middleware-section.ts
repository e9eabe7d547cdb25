// Reads `network_middlewares` (docs/policy.md#network-middlewares) into drafts with every load rule of the section:
// the names an entry may use (a built-in; an external service is refused), order, config, failure modes and the host
// selector; then the conflicts with tls: skip endpoints. Pure: what an entry does to traffic is middleware/'s job.

import { builtinConfigProblem, type BuiltinMiddleware, builtinNamed, isReservedMiddlewareName } from './middleware-builtins.js';
import { canonicalJson } from './canonical.js';
import type { EntryDraft } from './compile.js';
import { normalisePolicyHost } from './host-pattern.js';
import { compileHostPattern, type HostMatcher, hostPatternsOverlap } from './match.js';
import { MIDDLEWARE_ON_ERROR, MIDDLEWARE_ON_UNINSPECTABLE, type MiddlewareEntry, type MiddlewareOnUninspectable } from './types.js';
import {
  childPath,
  type Field,
  fieldsOf,
  intAt,
  isSeq,
  knownFields,
  type Node,
  type ReadContext,
  readMap,
  readString,
  report,
  scalarValue,
  toPlain,
} from './yaml-source.js';

/** Entries per policy (OpenShell's limit): each selected one is a stage every matching request waits for. */
export const MAX_MIDDLEWARES = 10;
/** include plus exclude patterns of one entry. */
export const MAX_SELECTOR_PATTERNS = 32;
/** An entry's config as canonical JSON; it travels with every call to a service. */
export const MAX_MIDDLEWARE_CONFIG_BYTES = 64 * 1024;
/** `order` is an int32. */
const MIN_ORDER = -2_147_483_648;
const MAX_ORDER = 2_147_483_647;

const SECTION = 'network_middlewares';
const MIDDLEWARE_KEYS = ['name', 'middleware', 'order', 'config', 'on_error', 'on_uninspectable', 'endpoints'] as const;
const SELECTOR_KEYS = ['include', 'exclude'] as const;

/** Everything of a MiddlewareEntry one entry map decides, with its selector still as matchers. */
export type MiddlewareDraft = Pick<MiddlewareEntry, 'key' | 'name' | 'middleware' | 'builtin' | 'order' | 'config' | 'onError'> & {
  /** As written; undefined takes the default from on_error. */
  readonly onUninspectable: MiddlewareOnUninspectable | undefined;
  readonly include: readonly HostMatcher[];
  readonly exclude: readonly HostMatcher[];
  /** What the policy hash covers. */
  readonly canonical: Record<string, unknown>;
  readonly node: Node;
  /** The `endpoints` key, where a conflict with an endpoint is reported. */
  readonly selectorNode: Node;
};

/** The section's entries in document order; problems are reported and the entries with any are left out. */
export function readMiddlewares(ctx: ReadContext, field: Field | undefined): MiddlewareDraft[] {
  if (field === undefined) return [];
  const map = readMap(ctx, field.value, SECTION);
  if (map === undefined) return [];
  const fields = fieldsOf(ctx, map, SECTION);
  if (fields.length > MAX_MIDDLEWARES) {
    report(ctx, field.keyNode, SECTION, 'POLICY_MIDDLEWARE_LIMIT', `too many middleware configs: ${fields.length}; the limit is MAX_MIDDLEWARES (${MAX_MIDDLEWARES})`);
    return [];
  }
  const drafts: MiddlewareDraft[] = [];
  const orders = new Map<number, string>();
  for (const entry of fields) {
    const draft = readMiddleware(ctx, entry);
    if (draft === undefined) continue;
    const other = orders.get(draft.order);
    if (other !== undefined) {
      const orderNode = draft.node.kind === 'map' ? (draft.node.items.find((p) => scalarValue(p.key) === 'order')?.value ?? draft.node) : draft.node;
      report(ctx, orderNode, childPath(childPath(SECTION, draft.key), 'order'), 'POLICY_MIDDLEWARE_ORDER', `order ${draft.order} is also used by ${other}; each entry needs its own order`);
      continue;
    }
    orders.set(draft.order, draft.key);
    drafts.push(draft);
  }
  return drafts;
}

function readMiddleware(ctx: ReadContext, field: Field): MiddlewareDraft | undefined {
  const before = ctx.issues.length;
  const path = childPath(SECTION, field.key);
  const at = (key: string): string => childPath(path, key);
  if (field.key === '') report(ctx, field.keyNode, path, 'POLICY_MIDDLEWARE_INVALID', 'a middleware entry name must not be empty');
  const map = readMap(ctx, field.value, path);
  if (map === undefined) return undefined;
  const f = knownFields(ctx, map, path, MIDDLEWARE_KEYS);
  const name = readString(ctx, f.get('name'), at('name')) ?? field.key;
  const middleware = readImplementation(ctx, f.get('middleware'), at('middleware'), map);
  const orderField = f.get('order');
  const order = orderField === undefined ? 0 : intAt(ctx, orderField.value, at('order'), { min: MIN_ORDER, max: MAX_ORDER, code: 'POLICY_MIDDLEWARE_INVALID' });
  const config = readConfig(ctx, f.get('config'), at('config'), middleware?.builtin);
  const onError = readChoice(ctx, f.get('on_error'), at('on_error'), MIDDLEWARE_ON_ERROR) ?? 'fail_closed';
  const onUninspectable = readChoice(ctx, f.get('on_uninspectable'), at('on_uninspectable'), MIDDLEWARE_ON_UNINSPECTABLE);
  const selector = readSelector(ctx, f.get('endpoints'), at('endpoints'), map);
  if (ctx.issues.length > before || middleware === undefined || order === undefined || config === undefined || selector === undefined) return undefined;
  const canonical: Record<string, unknown> = {
    config,
    exclude: selector.exclude.map((m) => m.pattern),
    include: selector.include.map((m) => m.pattern),
    key: field.key,
    middleware: middleware.name,
    name,
    on_error: onError,
    ...(onUninspectable === undefined ? {} : { on_uninspectable: onUninspectable }),
    order,
  };
  const selectorNode = f.get('endpoints')?.keyNode ?? map;
  return { key: field.key, name, middleware: middleware.name, builtin: middleware.builtin, order, config, onError, onUninspectable, ...selector, canonical, node: map, selectorNode };
}

function readImplementation(
  ctx: ReadContext,
  field: Field | undefined,
  path: string,
  entry: Node,
): { name: string; builtin: BuiltinMiddleware | undefined } | undefined {
  if (field === undefined) {
    report(ctx, entry, path, 'POLICY_MIDDLEWARE_INVALID', 'middleware is required: the built-in ryno/regex (also spelled openshell/regex) or a registered service');
    return undefined;
  }
  const name = readString(ctx, field, path);
  if (name === undefined) return undefined;
  if (name === '') {
    report(ctx, field.value ?? field.keyNode, path, 'POLICY_MIDDLEWARE_INVALID', 'middleware must not be empty');
    return undefined;
  }
  const builtin = builtinNamed(name);
  if (builtin !== undefined) return { name, builtin };
  if (isReservedMiddlewareName(name)) {
    report(ctx, field.value, path, 'POLICY_MIDDLEWARE_UNKNOWN', `${name} is not a built-in middleware (the openshell/, ryno/ and boundary/ prefixes name built-ins only)`);
    return undefined;
  }
  // A service the operator registered (docs/running.md#middleware-services); its config is checked by the service
  // itself before the policy is applied. Any other name is refused, never skipped.
  if (ctx.middlewareServices.has(name)) return { name, builtin: undefined };
  report(ctx, field.value, path, 'POLICY_MIDDLEWARE_EXTERNAL', `${name} names an external middleware service that is not registered with this boundary (--middleware-config)`);
  return undefined;
}

function readConfig(ctx: ReadContext, field: Field | undefined, path: string, builtin: BuiltinMiddleware | undefined): Readonly<Record<string, unknown>> | undefined {
  if (field === undefined) return builtin === undefined ? {} : checkBuiltin(ctx, undefined, path, builtin, {});
  const map = readMap(ctx, field.value, path);
  if (map === undefined) return undefined;
  const config = toPlain(map) as Record<string, unknown>;
  const bytes = Buffer.byteLength(canonicalJson(config));
  if (bytes > MAX_MIDDLEWARE_CONFIG_BYTES) {
    report(ctx, map, path, 'POLICY_MIDDLEWARE_CONFIG', `config is ${bytes} bytes as JSON; the limit is MAX_MIDDLEWARE_CONFIG_BYTES (${MAX_MIDDLEWARE_CONFIG_BYTES})`);
    return undefined;
  }
  return builtin === undefined ? config : checkBuiltin(ctx, map, path, builtin, config);
}

function checkBuiltin(ctx: ReadContext, node: Node | undefined, path: string, builtin: BuiltinMiddleware, config: Record<string, unknown>): Record<string, unknown> | undefined {
  const problem = builtinConfigProblem(builtin, config);
  if (problem === undefined) return config;
  report(ctx, node, path, 'POLICY_MIDDLEWARE_CONFIG', problem);
  return undefined;
}

function readChoice<T extends string>(ctx: ReadContext, field: Field | undefined, path: string, values: readonly T[]): T | undefined {
  if (field === undefined) return undefined;
  const value = readString(ctx, field, path);
  if (value === undefined) return undefined;
  if ((values as readonly string[]).includes(value)) return value as T;
  report(ctx, field.value, path, 'POLICY_MIDDLEWARE_INVALID', `invalid ${path.slice(path.lastIndexOf('.') + 1)} '${value}'; expected ${values.join(' or ')}`);
  return undefined;
}

function readSelector(
  ctx: ReadContext,
  field: Field | undefined,
  path: string,
  entry: Node,
): { include: HostMatcher[]; exclude: HostMatcher[] } | undefined {
  if (field === undefined) {
    report(ctx, entry, path, 'POLICY_MIDDLEWARE_SELECTOR', 'endpoint selector is required: endpoints: { include: [host patterns] }');
    return undefined;
  }
  const map = readMap(ctx, field.value, path);
  if (map === undefined) return undefined;
  const f = knownFields(ctx, map, path, SELECTOR_KEYS);
  const include = readPatterns(ctx, f.get('include'), childPath(path, 'include'));
  const exclude = readPatterns(ctx, f.get('exclude'), childPath(path, 'exclude')) ?? [];
  if (include !== undefined && include.length === 0) {
    report(ctx, f.get('include')?.value ?? map, childPath(path, 'include'), 'POLICY_MIDDLEWARE_SELECTOR', 'include needs at least one host pattern');
    return undefined;
  }
  if (include === undefined) {
    if (!f.has('include')) report(ctx, map, childPath(path, 'include'), 'POLICY_MIDDLEWARE_SELECTOR', 'include is required: the host patterns this entry applies to');
    return undefined;
  }
  if (include.length + exclude.length > MAX_SELECTOR_PATTERNS) {
    report(ctx, map, path, 'POLICY_MIDDLEWARE_LIMIT', `${include.length + exclude.length} include and exclude patterns; the limit is MAX_SELECTOR_PATTERNS (${MAX_SELECTOR_PATTERNS})`);
    return undefined;
  }
  return { include, exclude };
}

/** A list of endpoint host patterns, compiled; undefined after any problem (reported). */
function readPatterns(ctx: ReadContext, field: Field | undefined, path: string): HostMatcher[] | undefined {
  if (field === undefined) return undefined;
  const seq = field.value;
  if (!isSeq(seq)) {
    report(ctx, seq ?? field.keyNode, path, 'POLICY_TYPE', `${path.slice(path.lastIndexOf('.') + 1)} must be a list of host patterns`);
    return undefined;
  }
  const out: HostMatcher[] = [];
  let ok = true;
  seq.items.forEach((item, i) => {
    const value = scalarValue(item);
    if (typeof value !== 'string') {
      report(ctx, item ?? seq, childPath(path, i), 'POLICY_TYPE', 'a host pattern must be a string');
      ok = false;
      return;
    }
    const host = normalisePolicyHost(value);
    if (!host.ok) {
      report(ctx, item, childPath(path, i), host.code, host.message);
      ok = false;
      return;
    }
    out.push(compileHostPattern(host.host, host.kind));
  });
  return ok ? out : undefined;
}

/** True when every name `endpoint` matches is also matched by `exclude` (so the endpoint is never selected through it). */
function covers(exclude: HostMatcher, endpoint: HostMatcher): boolean {
  if (endpoint.kind !== 'wildcard') return exclude.matches(endpoint.pattern ?? '');
  if (exclude.pattern === endpoint.pattern) return true;
  // `**.example.com` covers any wildcard under example.com; nothing narrower is worked out.
  return exclude.pattern === `**.${exclude.suffix}` && (endpoint.pattern ?? '').endsWith(`.${exclude.suffix}`);
}

/** Whether `draft` can select some name `endpoint` matches: an include overlaps it and no exclude covers it. */
function canSelect(draft: MiddlewareDraft, endpoint: HostMatcher): boolean {
  return draft.include.some((m) => hostPatternsOverlap(m, endpoint)) && !draft.exclude.some((m) => covers(m, endpoint));
}

/**
 * A fail_closed entry, or one with on_uninspectable: deny, must not select a tls: skip endpoint: that traffic could
 * never be inspected, so the entry would refuse every connection the endpoint allows. One issue per entry.
 */
export function checkMiddlewareConflicts(ctx: ReadContext, drafts: readonly MiddlewareDraft[], entries: readonly EntryDraft[]): void {
  for (const draft of drafts) {
    const rule = draft.onError === 'fail_closed' ? 'on_error: fail_closed' : draft.onUninspectable === 'deny' ? 'on_uninspectable: deny' : undefined;
    if (rule === undefined) continue;
    const conflict = skipEndpoints(entries).find(({ endpoint }) => canSelect(draft, endpoint.matcher));
    if (conflict === undefined) continue;
    report(
      ctx,
      draft.selectorNode,
      childPath(childPath(SECTION, draft.key), 'endpoints'),
      'POLICY_MIDDLEWARE_TLS_SKIP',
      `middleware config '${draft.key}' (${rule}) selects network policy '${conflict.policy}' tls: skip endpoint '${conflict.endpoint.host}', ` +
        'whose traffic it can never inspect; exclude that host, or set on_error: fail_open (and on_uninspectable: allow)',
    );
  }
}

function skipEndpoints(entries: readonly EntryDraft[]): { policy: string; endpoint: EntryDraft['endpoints'][number] }[] {
  const out: { policy: string; endpoint: EntryDraft['endpoints'][number] }[] = [];
  for (const entry of entries) {
    for (const endpoint of entry.endpoints) if (endpoint.tls === 'skip' && endpoint.host !== undefined) out.push({ policy: entry.key, endpoint });
  }
  return out;
}
