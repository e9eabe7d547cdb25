// GraphQL envelopes read the way policy needs them (docs/policy.md#graphql-inspection): a POST body (one envelope
// or a batch), the URL's parameters or a graphql-ws payload -> the operations a request would run, or why it cannot
// be read. Documents are parsed by graphql-js, never by hand. Pure: http-request.ts says which parameters count.

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

const ID_KEYS = ['id', 'documentId', 'queryId'] as const;

class EnvelopeError extends Error {
  override readonly name = 'EnvelopeError';
}

/** One request's parameters, from a body envelope or the URL (http-request.ts). */
export interface Envelope {
  readonly query: string | undefined;
  readonly operationName: string | undefined;
  readonly extensions: unknown;
  readonly id: string | undefined;
}

/** A parsed POST body: object (one envelope) or array (a batch whose operations are pooled). */
export function graphqlFromJson(json: unknown): GraphqlRequest {
  return guarded(() => {
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

/** The URL's parameters (http-request.ts read them): `query`, `operationName`, `extensions` and one persisted id. */
export function graphqlFromUrlEnvelope(envelope: Envelope): GraphqlRequest {
  return guarded(() => [operationOf(envelope)]);
}

/** A request that cannot be read as GraphQL, and why: denied as `graphql-rejected`. */
export function graphqlFailure(error: string): GraphqlRequest {
  return { error };
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
    const named = operations.filter((o) => o.name?.value === operationName);
    // Servers that skip validation pick the first or the last of them; validating ones refuse the document.
    if (named.length > 1) throw new EnvelopeError(`GraphQL document defines operation "${operationName}" more than once`);
    op = named[0];
    if (op === undefined) throw new EnvelopeError(`GraphQL operationName "${operationName}" was not found`);
  } else if (operations.length === 1) {
    op = operations[0];
  } else {
    throw new EnvelopeError('GraphQL document has multiple operations but no operationName');
  }
  const selected = op as OperationDefinitionNode;
  const fragments = new Map<string, SelectionSetNode>();
  for (const d of doc.definitions) {
    if (d.kind !== Kind.FRAGMENT_DEFINITION) continue;
    if (fragments.has(d.name.value)) throw new EnvelopeError(`GraphQL document defines fragment "${d.name.value}" more than once`);
    fragments.set(d.name.value, d.selectionSet);
  }
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

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
