// GraphQL over HTTP read the way every server reads it (docs/policy.md#graphql-parameters-in-the-url-and-the-body):
// the URL's parameters (some servers read them first, on POST too) and a POST's JSON body, combined only where no
// server could read them differently; anything read two ways is refused. Pure.

import { type DuplicateKeyRefusal, readJson } from '../json/strict-json.js';
import type { GraphqlRequest } from '../policy/graphql-match.js';
import { type Envelope, graphqlFailure, graphqlFromJson, graphqlFromUrlEnvelope } from './envelope.js';

/** The parameters a GraphQL server takes from a URL or a body: a request carries them in one of the two only. */
const PARAMETERS = ['query', 'operationName', 'variables', 'extensions', 'id', 'documentId', 'queryId'] as const;
const BY_FOLDED_NAME: ReadonlyMap<string, string> = new Map(PARAMETERS.map((p) => [p.toLowerCase(), p]));
const ID_PARAMETERS = ['id', 'documentId', 'queryId'] as const;

/** A request boundary could read one way and a server another: refused before policy, under audit too. */
export interface GraphqlAmbiguity {
  readonly reason: 'graphql-ambiguous';
  readonly problem: string;
}

export type GraphqlRead = { readonly graphql: GraphqlRequest } | { readonly refused: GraphqlAmbiguity | DuplicateKeyRefusal };

/** What of a request's head the reading needs. */
export interface GraphqlHead {
  readonly method: string;
  /** The raw query string (after `?`, still percent-encoded), '' when none. */
  readonly query: string;
  readonly contentType: string | undefined;
  readonly hasBody: boolean;
}

type UrlParameters = { readonly params: ReadonlyMap<string, string> } | { readonly refused: GraphqlAmbiguity };

/**
 * What the head alone says: a GET, or a POST without a body, read from the URL; a POST with a JSON body is to be
 * held (`hold`) and read by graphqlFromPost; other methods are unreadable (denied as `graphql-rejected`).
 */
export function graphqlFromHead(head: GraphqlHead): GraphqlRead | 'hold' {
  const { method } = head;
  if (method !== 'GET' && method !== 'POST') return { graphql: graphqlFailure(`unsupported GraphQL HTTP method ${method}`) };
  if (method === 'GET' && head.hasBody) return ambiguous('a GraphQL GET carries a body, which some servers read and others ignore; send a GET without a body');
  if (method === 'POST' && head.hasBody) {
    const type = contentTypeProblem(head.contentType);
    return type === undefined ? 'hold' : ambiguous(type);
  }
  const url = urlParameters(head.query);
  return 'refused' in url ? url : fromUrl(url.params);
}

/** A held POST body (the head passed graphqlFromHead), with the URL's parameters: one place may carry them, not both. */
export function graphqlFromPost(head: GraphqlHead, body: Buffer): GraphqlRead {
  const url = urlParameters(head.query);
  if ('refused' in url) return url;
  if (body.length === 0) return fromUrl(url.params);
  const json = readJson(body.toString('utf8'));
  if (json.kind === 'duplicate-key') return { refused: json.refusal };
  if (json.kind === 'not-json') return { graphql: graphqlFailure('GraphQL request body is not JSON') };
  const { value } = json;
  if (url.params.size === 0) return { graphql: graphqlFromJson(value) };
  const inBody = Array.isArray(value) ? ['a batch'] : isObject(value) ? PARAMETERS.filter((p) => p in value) : [];
  if (inBody.length > 0) {
    const where = `the URL carries ${[...url.params.keys()].join(', ')} and the body ${inBody.join(', ')}`;
    return ambiguous(`GraphQL parameters are in both the URL and the body (${where}); servers differ on which they run`);
  }
  // What a URL-first server runs; a body-only server finds no query in this body and runs nothing.
  return fromUrl(url.params);
}

/** The operation the URL's parameters name; empty values count as absent, as servers that test for a value read them. */
function fromUrl(params: ReadonlyMap<string, string>): GraphqlRead {
  const ids = ID_PARAMETERS.filter((k) => (params.get(k) ?? '') !== '');
  if (ids.length > 1) return ambiguous(`GraphQL URL parameters ${ids.join(', ')} are combined; servers differ on which id they read`);
  const text = params.get('extensions') ?? '';
  let extensions: unknown;
  if (text !== '') {
    const json = readJson(text);
    if (json.kind === 'duplicate-key') return { refused: json.refusal };
    // OpenShell ignores extensions that are not JSON; so do we (the hash, if any, is then absent).
    extensions = json.kind === 'value' ? json.value : undefined;
  }
  const value = (k: string): string | undefined => (params.get(k) === '' ? undefined : params.get(k));
  const envelope: Envelope = { query: value('query'), operationName: value('operationName'), extensions, id: ids[0] === undefined ? undefined : value(ids[0]) };
  return { graphql: graphqlFromUrlEnvelope(envelope) };
}

/**
 * The URL's GraphQL parameters, form-decoded (`+` is a space). A parameter servers could read differently is
 * refused: repeated (first or last wins, by server), spelled in another case or with brackets (read by
 * case-insensitive or bracket-folding readers), or beside a `;` or a second `?` (some servers split on `;`,
 * some stop at the second `?`).
 */
function urlParameters(raw: string): UrlParameters {
  const params = new Map<string, string>();
  if (raw === '') return { params };
  for (const pair of raw.split(/[&;]/)) {
    const eq = pair.indexOf('=');
    const rawKey = eq < 0 ? pair : pair.slice(0, eq);
    const name = parameterNamed(rawKey);
    if (name === undefined) continue;
    if (raw.includes(';') || raw.includes('?')) {
      return ambiguous(`GraphQL URL parameter ${name} is in a query string with a literal ";" or "?"; percent-encode them (%3B, %3F)`);
    }
    const key = formDecode(rawKey);
    const value = eq < 0 ? '' : formDecode(pair.slice(eq + 1));
    if (key !== name || value === undefined) return ambiguous(`GraphQL URL parameter ${name} must be written exactly "${name}", percent-encoded as a form encodes it`);
    if (params.has(name)) return ambiguous(`GraphQL URL parameter ${name} appears more than once; servers differ on which one they read`);
    params.set(name, value);
  }
  return { params };
}

/** The GraphQL parameter a raw key names for any server: decoded once or twice, in any case, brackets dropped. */
function parameterNamed(rawKey: string): string | undefined {
  const once = looseDecode(rawKey);
  for (const spelling of [once, looseDecode(once)]) {
    const bracket = spelling.indexOf('[');
    const name = BY_FOLDED_NAME.get((bracket < 0 ? spelling : spelling.slice(0, bracket)).toLowerCase());
    if (name !== undefined) return name;
  }
  return undefined;
}

/** application/x-www-form-urlencoded decoding; undefined where the escapes are not valid UTF-8 percent-encoding. */
function formDecode(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/** Decoding for recognising a name only: ASCII escapes decoded, anything else left as written. */
function looseDecode(text: string): string {
  return text.replace(/\+/g, ' ').replace(/%([0-7][0-9a-fA-F])/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/** A POST body every server reads as JSON: `application/json`, at most a UTF-8 charset beside it. */
function contentTypeProblem(header: string | undefined): string | undefined {
  const [media, ...parameters] = (header ?? '').split(';').map((part) => part.trim().toLowerCase());
  const utf8 = (p: string): boolean => /^charset=("?)utf-?8\1$/.test(p.replace(/\s/g, ''));
  if (media === 'application/json' && parameters.every(utf8)) return undefined;
  const sent = header === undefined ? 'no Content-Type' : 'Content-Type other than application/json';
  return `a GraphQL POST body with ${sent} is read differently by servers (a form, a document, or nothing); send the JSON envelope as application/json`;
}

function ambiguous(problem: string): { readonly refused: GraphqlAmbiguity } {
  return { refused: { reason: 'graphql-ambiguous', problem } };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
