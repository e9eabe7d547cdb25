// Where the proxy meets the credentials module: the route guard for uninspected paths (docs/credentials.md#inspectable-routes-only
// rule 4), the per-request head rewrite, the body rewrite, held check or streaming marker scan, and echoed-secret
// redaction on response headers. Never logs a key, placeholder or value; refusals carry only closed reasons.

import { type RewriteRefusal, refuse } from '../credentials/outcome.js';
import { redactSecrets } from '../credentials/redact.js';
import { MAX_BODY_REWRITE_BYTES, rewriteBody } from '../credentials/rewrite-body.js';
import { flatHeadHasMarker, type HeaderPair, headHasMarker, rewriteRequestHead } from '../credentials/rewrite-head.js';
import { bufferHasMarker, createMarkerScanner } from '../credentials/scan.js';
import { type CredentialScope, routeCarriesCredentials, scopeFor } from '../credentials/scope.js';
import type { PlaceholderFamily } from '../credentials/placeholder.js';
import type { CredentialSource } from '../credentials/source.js';
import type { Decision, Endpoint } from '../policy/types.js';
import { cannotInspect, needsInspection } from './inspection.js';
import { credentialDenial, type Denial } from './denials.js';
import { type Outcome, type ReasonCode, settle } from './events.js';

/**
 * What a connection-level route does about credentials: `as-is` (nothing to guard, or the escape hatch),
 * `inspect` (credentialed, so TLS is terminated and requests rewritten even on an L4 endpoint), or `refuse`
 * (credentialed but cannot be inspected: `tls: skip` or raw TCP) -> 403 uninspected_credentials.
 */
type CredentialRoute = 'as-is' | 'inspect' | 'refuse';

/** True when requests to host:port could carry credentials (a provider endpoint, a credential_binding or SigV4 signing). */
export function routeHasCredentials(source: CredentialSource, decision: Decision, host: string, port: number): boolean {
  // A SigV4 endpoint is credentialed whether or not a provider matches: it must be inspected to be signed.
  if (decision.endpoints.some((e) => e.credentialProvider !== undefined || e.credentialSigning !== undefined)) return true;
  return routeCarriesCredentials({ source, host, port, endpoint: decision.endpoint });
}

/** The guard for CONNECT (and any other connection-level adapter): decides before any byte is relayed. */
export function credentialRoute(source: CredentialSource, decision: Decision, host: string, port: number): CredentialRoute {
  if (decision.verdict === 'deny') return 'as-is';
  const alreadyInspected = decision.endpoints.some(needsInspection);
  if (alreadyInspected || !routeHasCredentials(source, decision, host, port)) return 'as-is';
  if (decision.endpoint?.allowUninspectedCredentials === true) return 'as-is';
  return decision.endpoints.some(cannotInspect) ? 'refuse' : 'inspect';
}

export interface UpstreamHead {
  readonly target: string;
  /** Flat `[name, value, ...]`, order and duplicates kept, as http1/h1-request.ts writes them. */
  readonly headers: string[];
  readonly scope: CredentialScope;
  readonly usedKeys: number;
}

type HeadResult = { readonly ok: true; readonly head: UpstreamHead } | RewriteRefusal;

function toPairs(flat: readonly string[]): HeaderPair[] {
  const pairs: HeaderPair[] = [];
  for (let i = 0; i < flat.length; i += 2) pairs.push([flat[i] ?? '', flat[i + 1] ?? '']);
  return pairs;
}

function toFlat(pairs: readonly HeaderPair[]): string[] {
  const flat: string[] = [];
  for (const [name, value] of pairs) flat.push(name, value);
  return flat;
}

/**
 * Builds the request's endpoint-scoped resolver and rewrites its head. Call after the allow decision and
 * after hop-by-hop/Proxy-Authorization were stripped, with the target that goes upstream (canonical for
 * credentialed routes). On a refusal nothing of the request may be written upstream.
 */
export function credentialHead(input: {
  readonly source: CredentialSource;
  readonly family?: PlaceholderFamily | undefined;
  readonly host: string;
  readonly port: number;
  readonly method: string;
  readonly target: string;
  /** Handed over: made for this request by the caller, and the head's own list when nothing is placed or replaced. */
  readonly headers: string[];
  readonly endpoint: Endpoint | undefined;
}): HeadResult {
  const q = input.target.indexOf('?');
  const path = q < 0 ? input.target : input.target.slice(0, q);
  const query = q < 0 ? undefined : input.target.slice(q + 1);
  const scope = scopeFor({ source: input.source, host: input.host, port: input.port, path, endpoint: input.endpoint, family: input.family });
  // The common case, asked on the flat list: nothing to place, no marker anywhere (see below).
  if (scope.boundKeys.length === 0 && !flatHeadHasMarker({ method: input.method, path, query, headers: input.headers })) {
    const flat = input.headers;
    // As the pairs would have it: a name without a value gets an empty one.
    if (flat.length % 2 === 1) flat.push('');
    return { ok: true, head: { target: input.target, headers: flat, scope, usedKeys: 0 } };
  }
  const headers = toPairs(input.headers);
  // Token grants with a placement write their header where the workload sent none; one it sent (its placeholder,
  // say) is left to the rules below. Counted as used, so the revision guard covers them (docs/credentials.md#token-grants).
  let placed = 0;
  for (const [name, value] of scope.boundKeys.length === 0 ? [] : scope.placements()) {
    if (headers.some(([have]) => have.toLowerCase() === name)) continue;
    headers.push([name, value]);
    placed++;
  }
  // No marker anywhere (the fail-closed scan rewriteRequestHead ends with): it would substitute nothing,
  // refuse nothing and hand back this very head, so skip it. The common case: no placeholder in the request.
  if (!headHasMarker({ method: input.method, path, query, headers })) {
    return { ok: true, head: { target: input.target, headers: toFlat(headers), scope, usedKeys: placed } };
  }
  const rewritten = rewriteRequestHead({ method: input.method, path, query, headers, scope });
  if (!rewritten.ok) return rewritten;
  const target = rewritten.query === undefined ? rewritten.path : `${rewritten.path}?${rewritten.query}`;
  return { ok: true, head: { target, headers: toFlat(rewritten.headers), scope, usedKeys: rewritten.usedKeys.length + placed } };
}

function headerValue(flat: readonly string[], lower: string): string | undefined {
  for (let i = 0; i < flat.length; i += 2) if ((flat[i] ?? '').toLowerCase() === lower) return flat[i + 1];
  return undefined;
}

/**
 * Issue 15: on a route that can carry credentials, a body that is not rewritten is held whole and checked
 * before its head leaves, so a refusal never cuts a request whose head (credentials and all) already went.
 * The rewrite's buffer (OpenShell's): a body an endpoint could rewrite can always be checked too.
 */
export const MAX_BODY_CHECK_BYTES = MAX_BODY_REWRITE_BYTES;

interface BodyPrefix {
  /** The bytes read: the whole body when `complete`, else the first chunks past `limit`. */
  readonly prefix: Buffer;
  readonly complete: boolean;
  /** What is left of the body (nothing when complete). */
  readonly rest: AsyncIterator<Buffer>;
}

/**
 * Reads the body until it ends or passes `limit` bytes. Through the iterator, not for-await: leaving a
 * for-await early would destroy the request, and with it the socket a refusal still has to be written to.
 */
export async function readPrefix(req: AsyncIterable<Buffer>, limit: number): Promise<BodyPrefix> {
  const rest = req[Symbol.asyncIterator]();
  const chunks: Buffer[] = [];
  let total = 0;
  for (let next = await rest.next(); next.done !== true; next = await rest.next()) {
    chunks.push(next.value);
    total += next.value.length;
    if (total > limit) return { prefix: Buffer.concat(chunks, total), complete: false, rest };
  }
  return { prefix: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total), complete: true, rest };
}

export const MARKER_IN_BODY = refuse('leftover-marker', 'a credential placeholder in the body cannot be sent to this endpoint');

/** Thrown inside the streamed body when the scanner sees a marker: the upstream exchange fails with it. */
export class MarkerInBodyError extends Error {
  override readonly name = 'MarkerInBodyError';
  readonly refusal: RewriteRefusal = MARKER_IN_BODY;
}

/** Reading the body was awaited: the revision guard (rule 6) is checked again right before the write. */
export function staleRevision(head: UpstreamHead): RewriteRefusal | undefined {
  if (head.usedKeys === 0 || head.scope.stillCurrent()) return undefined;
  return refuse('stale-revision', 'the credentials changed while the request was in flight; retry it');
}

/**
 * The de-chunked body with every byte released by the marker scanner only (CR-12/13): a marker split across
 * reads or chunks, or percent-encoded, stops the body before any of the marker's bytes go upstream.
 */
export async function* scannedBody(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const scanner = createMarkerScanner();
  for await (const chunk of body) {
    if (scanner.feed(chunk) === 'marker') throw new MarkerInBodyError();
    const out = scanner.release();
    if (out.length > 0) yield out;
  }
  const rest = scanner.flush();
  if (rest.length > 0) yield rest;
}

/** `prefix`, then what is left of the body it was read from. */
async function* resumed(prefix: Buffer, rest: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  yield prefix;
  for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
}

export type BodyResult =
  | { readonly ok: true; readonly body: Buffer | AsyncIterable<Buffer>; readonly headers: string[] }
  | RewriteRefusal;

/**
 * For endpoints with request_body_credential_rewrite: buffers up to MAX_BODY_REWRITE_BYTES, rewrites, and
 * returns the headers with Content-Length set to the new length (Transfer-Encoding is already gone).
 */
export async function rewrittenBody(req: AsyncIterable<Buffer>, head: UpstreamHead): Promise<BodyResult> {
  const { prefix: body, complete } = await readPrefix(req, MAX_BODY_REWRITE_BYTES);
  if (!complete) {
    return refuse('body-too-large', `the body is larger than ${MAX_BODY_REWRITE_BYTES} bytes and cannot be rewritten`);
  }
  const result = rewriteBody({
    contentType: headerValue(head.headers, 'content-type'),
    contentEncoding: headerValue(head.headers, 'content-encoding'),
    body,
    scope: head.scope,
  });
  if (!result.ok) return result;
  const stale = staleRevision(head);
  if (stale !== undefined) return stale;
  const headers: string[] = [];
  for (let i = 0; i < head.headers.length; i += 2) {
    if ((head.headers[i] ?? '').toLowerCase() === 'content-length') continue;
    headers.push(head.headers[i] ?? '', head.headers[i + 1] ?? '');
  }
  headers.push('content-length', String(result.body.length));
  return { ok: true, body: result.body, headers };
}

/**
 * For a body on a route that can carry credentials, without body rewrite: holds up to MAX_BODY_CHECK_BYTES and
 * refuses a marker in it before the head leaves. A body that ends within the limit is sent as it came, head
 * unchanged. A longer one is not refused (uploads must still work): its checked prefix and the rest stream
 * through the marker scanner, so only a marker past the limit can still cut a request whose head has gone.
 */
export async function checkedBody(req: AsyncIterable<Buffer>, head: UpstreamHead): Promise<BodyResult> {
  const { prefix, complete, rest } = await readPrefix(req, MAX_BODY_CHECK_BYTES);
  if (bufferHasMarker(prefix)) return MARKER_IN_BODY;
  const stale = staleRevision(head);
  if (stale !== undefined) return stale;
  if (complete) return { ok: true, body: prefix, headers: head.headers };
  return { ok: true, body: scannedBody(resumed(prefix, rest)), headers: head.headers };
}

/**
 * CR-23 (pinned): an upstream echoing a bound secret in a response header gets it redacted (bodies: the redaction stage of response-chain.ts).
 * Rewrites the flat `[name, value, ...]` list in place.
 */
export function redactResponseHeaders(headers: string[], scope: CredentialScope): string[] {
  if (scope.boundKeys.length === 0) return headers;
  for (let i = 1; i < headers.length; i += 2) headers[i] = redactSecrets(headers[i] ?? '', scope);
  return headers;
}

/**
 * What a credential refusal records, whatever the adapter: closed reason (its engine follows from it, chain/events.ts),
 * and a finding plus HIGH for a binding mismatch.
 */
export function credentialRefusalFacts(refusal: RewriteRefusal): { readonly reason: ReasonCode; readonly finding: string | undefined } {
  if (refusal.error === 'credential_endpoint_mismatch') {
    // A placeholder was sent where its secret must never go.
    return { reason: 'credential-endpoint-mismatch', finding: 'credential-endpoint-mismatch' };
  }
  const reason: ReasonCode = refusal.error === 'credential_body_too_large' ? 'credential-body-too-large' : 'credential-unavailable';
  return { reason, finding: undefined };
}

/**
 * Fills a WebSocket message's decision event for a credential refusal (the module's log message, never a key
 * name) and returns the denial to send.
 */
export function credentialRefusal(
  o: Outcome,
  refusal: RewriteRefusal,
  /** The status recorded on the event: the refusal's own, or undefined after a 101 (only a close code is sent). */
  status: number | undefined = refusal.status,
): { readonly denial: Denial; readonly finding: string | undefined } {
  const facts = credentialRefusalFacts(refusal);
  settle(o, 'deny', facts.reason, refusal.logMessage, status);
  o.extra = { ...o.extra, credential_reason: refusal.reason };
  if (facts.finding !== undefined) o.severity = 'HIGH';
  return { denial: credentialDenial(refusal), finding: facts.finding };
}
