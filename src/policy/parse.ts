// parsePolicy(text): OpenShell `version: 1` YAML -> deep-frozen compiled Policy, or one BoundaryError
// POLICY_INVALID listing every problem with its YAML path, line and column. Pure: no I/O (load.ts reads files).

import { BoundaryError, type Issue } from '../shared/errors.js';
import { checkAmbiguity, type PlacedDraft } from './ambiguity.js';
import { compileSteps, drain, type EntryDraft, type Steps } from './compile.js';
import { BINARY_KEYS, ENTRY_KEYS, TOP_LEVEL_KEYS } from './format.js';
import { globError } from './glob.js';
import { aliasLimitIssue, bytesLimitIssue, checkCounts } from './limits.js';
import { checkMiddlewareConflicts, type MiddlewareDraft, readMiddlewares } from './middleware-section.js';
import { readSandboxSections } from './sandbox-sections.js';
import type { Policy } from './types.js';
import { type EndpointDraft, readEndpoint } from './validate-endpoint.js';
import { loadYaml, YamlSyntaxError } from './yaml-load.js';
import {
  childPath,
  type Field,
  fieldsOf,
  knownFields,
  type Node,
  position,
  readContext,
  type ReadContext,
  readMap,
  readSeq,
  readString,
  report,
  scalarValue,
  seqItems,
} from './yaml-source.js';

const RESERVED_KEY_PREFIX = '_provider_';
const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export interface ParseOptions {
  /** File name or other origin, carried on every issue and in the error message. */
  readonly source?: string;
  /** Registered middleware services a policy entry may name; any other external name is refused. */
  readonly middlewareServices?: readonly string[];
}

interface ReadOptions {
  /** V13 across endpoints; off only when the same text already passed it (policy/parse-off-thread.ts). */
  readonly checkAmbiguity: boolean;
  /** Warnings to report instead of the ones found here (which have no positions when read from plain data). */
  readonly warnings?: readonly Issue[];
}

export function parsePolicy(text: string, options: ParseOptions = {}): Policy {
  const { ctx, contents } = openPolicy(text, options);
  return drain(readPolicySteps(ctx, contents, { checkAmbiguity: true }));
}

/** Limits on bytes and aliases, then the YAML parse; throws POLICY_INVALID on a limit or a syntax error. */
export function openPolicy(text: string, options: ParseOptions = {}): { ctx: ReadContext; contents: Node | null } {
  const ctx = readContext(text, options.source, options.middlewareServices);
  // Checked before the parser sees the text: the parse itself is what the limit bounds.
  const tooLarge = bytesLimitIssue(Buffer.byteLength(text, 'utf8'), options.source);
  if (tooLarge !== undefined) {
    ctx.issues.push(tooLarge);
    throw invalid(ctx);
  }
  // A file is decoded strictly (load.ts); a text pushed over the control channel is a JS string, and may hold a
  // half of a surrogate pair that no UTF-8 file can: refused as OpenShell refuses invalid UTF-8.
  const broken = UNPAIRED_SURROGATE.exec(text);
  if (broken !== null) {
    ctx.issues.push({
      code: 'POLICY_YAML_SYNTAX',
      path: '',
      message: 'the policy is not valid UTF-8 text (an unpaired surrogate)',
      ...position(ctx, { kind: 'scalar', value: null, offset: broken.index }),
      ...(options.source === undefined ? {} : { source: options.source }),
    });
    throw invalid(ctx);
  }
  let loaded: ReturnType<typeof loadYaml>;
  try {
    loaded = loadYaml(text);
  } catch (err) {
    if (!(err instanceof YamlSyntaxError)) throw err;
    const { message, line, column, offset, code } = err.problem;
    const at = offset === undefined ? (line === undefined ? {} : { line, column: column ?? 1 }) : position(ctx, { kind: 'scalar', value: null, offset });
    ctx.issues.push({
      code: code ?? 'POLICY_YAML_SYNTAX',
      path: '',
      message,
      ...at,
      ...(options.source === undefined ? {} : { source: options.source }),
    });
    throw invalid(ctx);
  }
  const aliases = aliasLimitIssue(loaded.aliasExpansions, options.source);
  if (aliases !== undefined) {
    ctx.issues.push(aliases);
    throw invalid(ctx);
  }
  return { ctx, contents: loaded.contents };
}

/** Reads and compiles a parsed document; yields between endpoints (compile.ts Steps). */
export function* readPolicySteps(ctx: ReadContext, contents: Node | null, options: ReadOptions): Steps<Policy> {
  if (contents === null) {
    ctx.issues.push({ code: 'POLICY_VERSION', path: 'version', message: 'the policy is empty; it needs version: 1', line: 1, column: 1 });
    throw invalid(ctx);
  }
  const root = readMap(ctx, contents, '', 'a map with version: 1');
  const notEnforced: string[] = [];
  const entries: EntryDraft[] = [];
  const middlewares: MiddlewareDraft[] = [];
  if (root !== undefined) {
    const top = knownFields(ctx, root, '', TOP_LEVEL_KEYS);
    const version = top.get('version');
    if (version === undefined) report(ctx, root, 'version', 'POLICY_VERSION', 'version: 1 is required');
    else if (scalarValue(version.value) !== 1) {
      report(ctx, version.value ?? version.keyNode, 'version', 'POLICY_VERSION', 'version must be exactly 1');
    }
    notEnforced.push(...readSandboxSections(ctx, top));
    middlewares.push(...readMiddlewares(ctx, top.get('network_middlewares')));
    const policies = top.get('network_policies');
    // `network_policies:` and `network_policies: null` are no empty policy: OpenShell refuses them, and so a typo'd indent.
    if (policies?.value === null) report(ctx, policies.keyNode, 'network_policies', 'POLICY_TYPE', 'network_policies must be a map; write {} for none');
    const map = policies === undefined || policies.value === null ? undefined : readMap(ctx, policies.value, 'network_policies');
    // Counted before any endpoint is read: reading is what the limits bound.
    if (map !== undefined) checkCounts(ctx, map);
    if (map !== undefined && !ctx.issues.some((i) => i.code.startsWith('POLICY_LIMIT_'))) {
      for (const field of fieldsOf(ctx, map, 'network_policies')) {
        const entry = yield* readEntry(ctx, field);
        if (entry !== undefined) entries.push(entry);
      }
    }
  }
  const placed: PlacedDraft[] = [];
  for (const entry of entries) {
    entry.endpoints.forEach((draft, index) => {
      placed.push({ draft, order: placed.length, label: `network_policies.${entry.key}.endpoints[${index}]` });
    });
  }
  if (ctx.issues.length === 0 && options.checkAmbiguity) checkAmbiguity(ctx, placed);
  checkMiddlewareConflicts(ctx, middlewares, entries);
  if (ctx.issues.length > 0) throw invalid(ctx);
  return yield* compileSteps(entries, options.warnings ?? ctx.warnings, notEnforced, middlewares);
}

function* readEntry(ctx: ReadContext, field: Field): Steps<EntryDraft | undefined> {
  const path = childPath('network_policies', field.key);
  if (field.key.startsWith(RESERVED_KEY_PREFIX)) {
    report(ctx, field.keyNode, path, 'POLICY_RESERVED_KEY', `policy keys starting with ${RESERVED_KEY_PREFIX} are reserved for providers`);
  }
  const map = readMap(ctx, field.value, path);
  if (map === undefined) return undefined;
  const f = knownFields(ctx, map, path, ENTRY_KEYS);
  const name = readString(ctx, f.get('name'), childPath(path, 'name')) ?? field.key;
  const endpoints: EndpointDraft[] = [];
  const endpointsField = f.get('endpoints');
  const endpointsPath = childPath(path, 'endpoints');
  if (endpointsField === undefined) {
    report(ctx, map, endpointsPath, 'POLICY_ENDPOINTS_EMPTY', 'a policy entry needs at least one endpoint');
  } else {
    const seq = readSeq(ctx, endpointsField.value, endpointsPath);
    if (seq !== undefined && seq.items.length === 0) {
      report(ctx, seq, endpointsPath, 'POLICY_ENDPOINTS_EMPTY', 'endpoints: [] allows nothing; list at least one endpoint');
    }
    if (seq !== undefined) {
      for (const [i, item] of seqItems(seq).entries()) {
        const draft = readEndpoint(ctx, item, childPath(endpointsPath, i));
        if (draft !== undefined) endpoints.push(draft);
        yield;
      }
    }
  }
  const binaries = readBinaries(ctx, f.get('binaries'), childPath(path, 'binaries'));
  if (binaries.length === 0) {
    report(ctx, f.get('binaries')?.value ?? map, childPath(path, 'binaries'), 'POLICY_WARN_NO_BINARIES',
      'no binaries: no process may use this entry unless boundary runs with --binary-identity endpoint-only; list paths, or "/**" for any');
  }
  return { key: field.key, name, binaries, endpoints };
}

function readBinaries(ctx: ReadContext, field: Field | undefined, path: string): string[] {
  if (field === undefined) return [];
  const seq = readSeq(ctx, field.value, path);
  if (seq === undefined) return [];
  const out: string[] = [];
  seqItems(seq).forEach((item, i) => {
    const itemPath = childPath(path, i);
    const map = readMap(ctx, item, itemPath, 'a map with path');
    if (map === undefined) return;
    const f = knownFields(ctx, map, itemPath, BINARY_KEYS);
    const binaryPath = readString(ctx, f.get('path'), childPath(itemPath, 'path'));
    if (binaryPath === undefined) {
      if (!f.has('path')) report(ctx, map, childPath(itemPath, 'path'), 'POLICY_BINARY_INVALID', 'a binary needs path');
      return;
    }
    // Without `*` the path is literal (docs/identity.md#matching): a `[` in it is no unclosed class.
    const problem = !binaryPath.startsWith('/') ? 'must be an absolute path or glob starting with /' : binaryPath.includes('*') ? globError(binaryPath) : undefined;
    if (problem !== undefined) {
      report(ctx, f.get('path')?.value, childPath(itemPath, 'path'), 'POLICY_BINARY_INVALID', `binary ${binaryPath}: ${problem}`);
      return;
    }
    out.push(binaryPath);
  });
  return out;
}

export { policyHash } from './compile.js';

function invalid(ctx: ReadContext): BoundaryError {
  const where = ctx.source === undefined ? 'policy' : `policy ${ctx.source}`;
  const count = ctx.issues.length;
  // Document order reads best; issues without a position (none today) sort first.
  ctx.issues.sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
  const lines = ctx.issues.map((issue) => {
    const at = issue.line === undefined ? '' : `${ctx.source ?? ''}:${issue.line}:${issue.column ?? 1}: `;
    return `  ${at}${issue.path === '' ? '' : `${issue.path}: `}${issue.message} (${issue.code})`;
  });
  return new BoundaryError('POLICY_INVALID', `${where} is invalid (${count} problem${count === 1 ? '' : 's'}):\n${lines.join('\n')}`, {
    issues: ctx.issues.map((issue) => Object.freeze({ ...issue })),
  });
}
