// The body of a request a `protocol: graphql` endpoint selects (docs/policy.md#graphql-inspection): held whole,
// up to the endpoint's graphql_max_body_bytes, and parsed before anything is decided or sent upstream.

import type { IncomingHttpHeaders } from 'node:http';
import { graphqlFromBody, graphqlFromQuery } from '../graphql/envelope.js';
import type { GraphqlRequest } from '../policy/graphql-match.js';
import type { Endpoint } from '../policy/types.js';
import { readPrefix } from './credential-injection.js';

export type GraphqlBody =
  | { readonly ok: true; readonly body: Buffer; readonly request: GraphqlRequest }
  /** Not inspectable at all (too large, compressed, multipart): refused before policy is asked. */
  | { readonly ok: false; readonly problem: string };

/**
 * The body limit when decide() will select a GraphQL endpoint for `path` (the most specific inspected selectors,
 * as decide.ts selectByPath), else undefined: a REST upload beside a catch-all GraphQL endpoint is never held.
 * The smallest limit among tied GraphQL endpoints: a body one of them could not inspect is not sent.
 */
export function graphqlBodyLimit(endpoints: readonly Endpoint[], path: string): number | undefined {
  let best = -1;
  let limit: number | undefined;
  for (const e of endpoints) {
    if (!e.inspected || !e.selectsPath(path) || e.selectorSpecificity < best) continue;
    if (e.selectorSpecificity > best) {
      best = e.selectorSpecificity;
      limit = undefined;
    }
    if (e.protocol === 'graphql') limit = Math.min(limit ?? Number.POSITIVE_INFINITY, e.options.graphqlMaxBodyBytes);
  }
  return limit;
}

/** GET and POST carry GraphQL; any other method is a request policy cannot read, so it is denied (OpenShell). */
export function graphqlWithoutBody(method: string, rawQuery: string): GraphqlRequest {
  return method === 'GET' ? graphqlFromQuery(rawQuery) : { error: `unsupported GraphQL HTTP method ${method}` };
}

/** What the head alone refuses: a body boundary could not inspect (compressed, multipart, declared too large). */
export function graphqlHeadProblem(req: { readonly headers: IncomingHttpHeaders }, limit: number): string | undefined {
  const encoding = (req.headers['content-encoding'] ?? '').trim().toLowerCase();
  if (encoding !== '' && encoding !== 'identity') return `GraphQL request content-encoding "${encoding}" is not supported`;
  if ((req.headers['content-type'] ?? '').trim().toLowerCase().startsWith('multipart/')) return 'GraphQL multipart requests are not supported';
  if (Number(req.headers['content-length'] ?? 0) > limit) return tooLarge(limit);
  return undefined;
}

/** Reads and parses a POST body whose head graphqlHeadProblem() passed; a chunked body is cut off past `limit`. */
export async function readGraphqlBody(req: AsyncIterable<Buffer>, limit: number): Promise<GraphqlBody> {
  const { prefix, complete } = await readPrefix(req, limit);
  if (!complete) return refused(tooLarge(limit));
  return { ok: true, body: prefix, request: graphqlFromBody(prefix) };
}

function tooLarge(limit: number): string {
  return `GraphQL request body exceeds ${limit} byte inspection limit`;
}

function refused(problem: string): GraphqlBody {
  return { ok: false, problem };
}
