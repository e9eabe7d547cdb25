// GraphQL rule matching (docs/policy.md#graphql-inspection): what a GraphQL allow or deny rule, or a persisted
// query registry entry, says about one parsed operation. Pure; the envelope parser is src/graphql/envelope.ts.

import { compileValueGlob, type Glob } from './glob.js';

/** One operation as policy sees it. A hash-only persisted query has type '' and no fields until the registry fills them. */
export interface GraphqlOperation {
  readonly type: string;
  /** The operation's own name; undefined when anonymous. */
  readonly name: string | undefined;
  /** Root field names (never aliases), fragments expanded, deduplicated and sorted. */
  readonly fields: readonly string[];
  /** extensions.persistedQuery.sha256Hash, when sent. */
  readonly hash?: string;
  /** The persisted id (`id`, `documentId` or `queryId`), when sent. */
  readonly id?: string;
  /** No document: only a hash or id, so only the registry can say what it does. */
  readonly hashOnly: boolean;
}

/** The parsed GraphQL request fed to decide(): every operation (all items of a batch), or why it could not be read. */
export type GraphqlRequest = { readonly operations: readonly GraphqlOperation[] } | { readonly error: string };

/** A compiled `{operation_type, operation_name?, fields?}`: a rule or a registry entry. */
export interface GraphqlSelector {
  /** Lower-case; `*` matches every type except a hash-only operation's ''. */
  readonly operationType: string;
  readonly operationName: Glob | undefined;
  readonly fields: readonly Glob[] | undefined;
}

export function compileGraphqlSelector(type: string, name: string | undefined, fields: readonly string[] | undefined): GraphqlSelector {
  return Object.freeze({
    operationType: type.toLowerCase(),
    // OpenShell: an absent or empty operation_name matches anything.
    operationName: name === undefined || name === '' ? undefined : compileValueGlob(name),
    fields: fields === undefined ? undefined : Object.freeze(fields.map(compileValueGlob)),
  });
}

/**
 * Allow: every field of the operation must match some pattern (and it must have one). Deny: any one field is
 * enough, so a deny rule on `deleteRepository` catches it however many safe fields ride along.
 */
export function selectorMatches(selector: GraphqlSelector, op: GraphqlOperation, mode: 'allow' | 'deny'): boolean {
  if (op.type === '') return false;
  if (selector.operationType !== '*' && selector.operationType !== op.type) return false;
  if (selector.operationName !== undefined && !selector.operationName.matches(op.name ?? '')) return false;
  const patterns = selector.fields;
  if (patterns === undefined) return true;
  const hit = (field: string): boolean => patterns.some((p) => p.matches(field));
  return mode === 'allow' ? op.fields.length > 0 && op.fields.every(hit) : op.fields.some(hit);
}
