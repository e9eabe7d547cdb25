// GraphQL over HTTP, read the way policy needs it (docs/policy.md#graphql-inspection): a POST body (one envelope or
// a batch) or a GET query string -> the operations a request would run, or why it cannot be read. Documents are
// parsed by graphql-js, never by hand. Pure: the proxy buffers the body (src/proxy/inspected-body.ts).

import { createRequire } from 'node:module';
import type { DocumentNode, OperationDefinitionNode, SelectionSetNode } from 'graphql';
import type { GraphqlOperation, GraphqlRequest } from '../policy/graphql-match.js';

/**
 * graphql-js's parser, loaded on the first GraphQL request: a boundary without GraphQL endpoints never pays for it
 * (the library was 2 MiB of an idle boundary's heap, test/regressions/issue-15-memory.test.ts). Only its language
 * entry point, not execution or validation.
 */
let language: typeof import('graphql/language') | undefined;
const graphqlLanguage = (): typeof import('graphql/language') =>
  (language ??= createRequire(import.meta.url)('graphql/language') as typeof import('graphql/language'));

/** graphql-js token cap, OpenShell's figure: a 64 KiB body cannot make the parser work much past it. */
export const MAX_GRAPHQL_TOKENS = 20_000;
/** Fragment nesting followed at the root when collecting fields; deeper spreads are a refusal, not a stack overflow. */
export const MAX_GRAPHQL_FRAGMENT_DEPTH = 128;

const GET_KEYS = ['query', 'operationName', 'extensions', 'id', 'documentId', 'queryId'] as const;
const ID_KEYS = ['id', 'documentId', 'queryId'] as const;

class EnvelopeError extends Error {
  override readonly name = 'EnvelopeError';
}

interface Envelope {
  readonly query: string | undefined;
  readonly operationName: string | undefined;
  readonly extensions: unknown;
  readonly id: string | undefined;
}

/** A POST body: JSON object (one envelope) or array (a batch whose operations are pooled). */
export function graphqlFromBody(body: Buffer): GraphqlRequest {
  return guarded(() => {
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      throw new EnvelopeError('GraphQL request body is not JSON');
    }
    if (Array.isArray(json)) {
      if (json.length === 0) throw new EnvelopeError('GraphQL batch request is empty');
      return json.flatMap((item: unknown) => {
        if (!isObject(item)) throw new EnvelopeError('GraphQL batch item must be an object');
        return [operationOf(postEnvelope(item))];
      });
    }
    if (!isObject(json)) throw new EnvelopeError('GraphQL request body must be a JSON object or array');
    return [operationOf(postEnvelope(json))];
  });
}

/** One envelope object already parsed (a graphql-ws `subscribe` payload): read as a POST envelope. */
export function graphqlFromEnvelope(envelope: Record<string, unknown>): GraphqlRequest {
  return guarded(() => [operationOf(postEnvelope(envelope))]);
}

/** A GET: `query`, `operationName`, `extensions` (JSON text) and one persisted id from the query string. */
export function graphqlFromQuery(rawQuery: string): GraphqlRequest {
  return guarded(() => {
    const seen = new Map<string, string>();
    for (const pair of rawQuery === '' ? [] : rawQuery.split('&')) {
      const eq = pair.indexOf('=');
      const key = formDecode(eq < 0 ? pair : pair.slice(0, eq));
      const value = eq < 0 ? '' : formDecode(pair.slice(eq + 1));
      if (!(GET_KEYS as readonly string[]).includes(key) || value === '') continue;
      if (seen.has(key)) throw new EnvelopeError(`GraphQL GET parameter "${key}" must not appear more than once`);
      seen.set(key, value);
    }
    const ids = ID_KEYS.filter((k) => seen.has(k));
    if (ids.length > 1) throw new EnvelopeError(`GraphQL GET parameters ${ids.join(', ')} must not be combined`);
    let extensions: unknown;
    try {
      extensions = seen.has('extensions') ? JSON.parse(seen.get('extensions') as string) : undefined;
    } catch {
      // OpenShell ignores extensions that are not JSON; so do we (the hash, if any, is then absent).
      extensions = undefined;
    }
    const id = ids[0] === undefined ? undefined : seen.get(ids[0]);
    return [operationOf({ query: seen.get('query'), operationName: seen.get('operationName'), extensions, id })];
  });
}

function guarded(read: () => GraphqlOperation[]): GraphqlRequest {
  try {
    return { operations: read() };
  } catch (err) {
    if (err instanceof EnvelopeError) return { error: err.message };
    throw err;
  }
}

function postEnvelope(item: Record<string, unknown>): Envelope {
  const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  // The first id key present decides, string or not (OpenShell); several keys are not an error in POST.
  const idKey = ID_KEYS.find((k) => k in item);
  return {
    query: text(item.query),
    operationName: text(item.operationName),
    extensions: item.extensions,
    id: idKey === undefined ? undefined : text(item[idKey]),
  };
}

function operationOf(env: Envelope): GraphqlOperation {
  const persisted = isObject(env.extensions) && isObject(env.extensions.persistedQuery) ? env.extensions.persistedQuery : undefined;
  const hash = typeof persisted?.sha256Hash === 'string' && persisted.sha256Hash !== '' ? persisted.sha256Hash : undefined;
  const keys = { ...(hash === undefined ? {} : { hash }), ...(env.id === undefined || env.id === '' ? {} : { id: env.id }) };
  if (env.query !== undefined && env.query.trim() !== '') {
    // A document that carries a hash (APQ registration) is decided by the document, never the registry.
    return { ...documentOperation(env.query, env.operationName), ...keys };
  }
  if (hash !== undefined || keys.id !== undefined) {
    return { type: '', name: env.operationName === '' ? undefined : env.operationName, fields: [], hashOnly: true, ...keys };
  }
  throw new EnvelopeError('GraphQL request has no query document or persisted query identifier');
}

function documentOperation(source: string, operationName: string | undefined): GraphqlOperation {
  const { Kind, parse } = graphqlLanguage();
  let doc: DocumentNode;
  try {
    doc = parse(source, { maxTokens: MAX_GRAPHQL_TOKENS, noLocation: true });
  } catch (err) {
    throw new EnvelopeError(`GraphQL document parse error: ${err instanceof Error ? err.message : String(err)}`);
  }
  const operations = doc.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (operations.length === 0) throw new EnvelopeError('GraphQL document contains no executable operation');
  let op: OperationDefinitionNode | undefined;
  if (operationName !== undefined && operationName !== '') {
    op = operations.find((o) => o.name?.value === operationName);
    if (op === undefined) throw new EnvelopeError(`GraphQL operationName "${operationName}" was not found`);
  } else if (operations.length === 1) {
    op = operations[0];
  } else {
    throw new EnvelopeError('GraphQL document has multiple operations but no operationName');
  }
  const selected = op as OperationDefinitionNode;
  const fragments = new Map<string, SelectionSetNode>();
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d.selectionSet);
  const fields = new Set<string>();
  collectRootFields(selected.selectionSet, fragments, fields, new Set(), 0);
  return { type: selected.operation, name: selected.name?.value, fields: [...fields].sort(), hashOnly: false };
}

/** Root field names, never aliases; inline fragments and spreads expanded, each named fragment once (cycle guard). */
function collectRootFields(set: SelectionSetNode, fragments: ReadonlyMap<string, SelectionSetNode>, out: Set<string>, expanded: Set<string>, depth: number): void {
  if (depth > MAX_GRAPHQL_FRAGMENT_DEPTH) throw new EnvelopeError('GraphQL fragments nest too deeply');
  const { Kind } = graphqlLanguage();
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) out.add(sel.name.value);
    else if (sel.kind === Kind.INLINE_FRAGMENT) collectRootFields(sel.selectionSet, fragments, out, expanded, depth + 1);
    else {
      const name = sel.name.value;
      const target = fragments.get(name);
      // A spread of an undefined fragment contributes nothing (OpenShell); the server will refuse the document.
      if (target === undefined || expanded.has(name)) continue;
      expanded.add(name);
      collectRootFields(target, fragments, out, expanded, depth + 1);
    }
  }
}

/** application/x-www-form-urlencoded decoding: `+` is a space, then %XX (GraphQL GET clients send forms). */
function formDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    throw new EnvelopeError('GraphQL GET parameter is not valid percent-encoding');
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
