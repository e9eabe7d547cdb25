// Rewrites one request head just before it is written upstream (docs/credentials.md#substitution-slots): header values (whole,
// `<scheme> <ph>`, Basic user:pass), query values and path segments, then the fail-closed leftover scan
// (docs/credentials.md#leftover-markers). Returns a value, never throws; never logs, and its refusals hold no secret.

import { type RewriteRefusal, refuse } from './outcome.js';
import { containsMarker, findPlaceholders, hasLiteralMarker } from './placeholder.js';
import type { CredentialScope } from './scope.js';
import { createSubstituter, encodeUnreserved, type SlotEncoder, type Substituter } from './substitute.js';

export type HeaderPair = readonly [name: string, value: string];

interface RequestHead {
  readonly method: string;
  /** Canonical path (proxy/path.ts), without the query. */
  readonly path: string;
  /** Raw query without `?`, still percent-encoded; undefined when the target had none. */
  readonly query: string | undefined;
  /** Raw header pairs in order, as received (duplicates kept). */
  readonly headers: readonly HeaderPair[];
  readonly scope: CredentialScope;
}

interface RewrittenHead {
  readonly ok: true;
  readonly path: string;
  readonly query: string | undefined;
  readonly headers: readonly HeaderPair[];
  /** Keys substituted, sorted. For counts only; never log the names. */
  readonly usedKeys: readonly string[];
}

export type HeadRewrite = RewrittenHead | RewriteRefusal;

const AUTH_SCHEME = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +(\S+)$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const PATH_UNSAFE = /[/\\?#\r\n\u0000]|\.\./;

const asIs: SlotEncoder = (value) => value;
const pathSegment: SlotEncoder = (value) =>
  PATH_UNSAFE.test(value) ? { refuse: 'path-unsafe-value' } : encodeUnreserved(value);
const queryValue: SlotEncoder = (value) => encodeUnreserved(value);
const basicUser: SlotEncoder = (value) => (value.includes(':') ? { refuse: 'unsafe-value' } : value);

const BASIC = 'basic';

/** `basic ` in any case at the start of `text` (ASCII letters only, as AUTH_SCHEME's scheme). */
function startsBasic(text: string): boolean {
  if (text.length < 7 || text.charCodeAt(5) !== 0x20) return false;
  for (let i = 0; i < 5; i++) if ((text.charCodeAt(i) | 0x20) !== BASIC.charCodeAt(i)) return false;
  return true;
}

/** Decodes `Basic <base64>` credentials, or undefined when the value is not that shape. */
export function decodeBasic(value: string): string | undefined {
  const trimmed = value.trim();
  // Only `basic` followed by a space can match below: any other value is passed without running the regex.
  if (!startsBasic(trimmed)) return undefined;
  const match = AUTH_SCHEME.exec(trimmed);
  if (match === null || match[1]?.toLowerCase() !== 'basic' || !BASE64.test(match[2] ?? '')) return undefined;
  const bytes = Buffer.from(match[2] ?? '', 'base64');
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  return text;
}

// The user:password colon is the first one outside a placeholder (the canonical marker holds colons).
function basicSeparator(decoded: string, scope: CredentialScope): number {
  const spans = findPlaceholders(decoded, scope.keyExists);
  for (let i = 0; i < decoded.length; i += 1) {
    const inside = spans.find((span) => i >= span.start && i < span.end);
    if (inside !== undefined) i = inside.end - 1;
    else if (decoded[i] === ':') return i;
  }
  return -1;
}

function rewriteBasic(scheme: string, token: string, sub: Substituter, scope: CredentialScope): string {
  const decoded = decodeBasic(`${scheme} ${token}`);
  if (decoded === undefined || !containsMarker(decoded)) return `${scheme} ${token}`;
  const colon = basicSeparator(decoded, scope);
  const user = colon === -1 ? decoded : decoded.slice(0, colon);
  const pass = colon === -1 ? undefined : decoded.slice(colon + 1);
  const next = sub.apply(user, basicUser) + (pass === undefined ? '' : `:${sub.apply(pass, asIs)}`);
  return `${scheme} ${Buffer.from(next, 'utf8').toString('base64')}`;
}

function rewriteHeaderValue(value: string, sub: Substituter, scope: CredentialScope): string {
  const trimmed = value.trim();
  const scheme = AUTH_SCHEME.exec(trimmed);
  if (scheme !== null && scheme[1]?.toLowerCase() === 'basic') {
    const rewritten = rewriteBasic(scheme[1], scheme[2] ?? '', sub, scope);
    return rewritten === `${scheme[1]} ${scheme[2]}` ? value : rewritten;
  }
  if (!hasLiteralMarker(value)) return value;
  // Accepted shapes: the whole value, or `<scheme> <ph>` (Bearer, token, Bot ...). Anything else is left
  // alone and the leftover scan refuses it, so a placeholder never lands somewhere we did not intend.
  if (sub.isWhole(trimmed)) return sub.apply(trimmed, asIs);
  if (scheme !== null && sub.isWhole(scheme[2] ?? '')) return `${scheme[1]} ${sub.apply(scheme[2] ?? '', asIs)}`;
  sub.classify(value);
  return value;
}

function rewritePath(path: string, sub: Substituter): string {
  if (!hasLiteralMarker(path)) return path;
  return path
    .split('/')
    .map((segment) => (hasLiteralMarker(segment) ? sub.apply(segment, pathSegment) : segment))
    .join('/');
}

function rewriteQuery(query: string, sub: Substituter): string {
  if (!hasLiteralMarker(query)) return query;
  return query
    .split('&')
    .map((param) => {
      const eq = param.indexOf('=');
      if (eq === -1 || hasLiteralMarker(param.slice(0, eq))) sub.classify(param);
      if (eq === -1 || !hasLiteralMarker(param.slice(eq + 1))) return param;
      return param.slice(0, eq + 1) + sub.apply(param.slice(eq + 1), queryValue);
    })
    .join('&');
}

function targetHasMarker(head: Pick<RequestHead, 'method' | 'path' | 'query'>): boolean {
  return containsMarker(head.method) || containsMarker(head.path) || containsMarker(head.query ?? '');
}

function fieldHasMarker(name: string, value: string): boolean {
  const basic = decodeBasic(value);
  return containsMarker(name) || containsMarker(value) || (basic !== undefined && containsMarker(basic));
}

/** True when any part of the head still holds a marker, literally, in any case, percent- or Basic-encoded. */
export function headHasMarker(head: Pick<RequestHead, 'method' | 'path' | 'query' | 'headers'>): boolean {
  return targetHasMarker(head) || head.headers.some(([name, value]) => fieldHasMarker(name, value));
}

/** headHasMarker for a head whose fields are a flat `[name, value, ...]` list (no pairs made to ask). */
export function flatHeadHasMarker(head: Pick<RequestHead, 'method' | 'path' | 'query'> & { readonly headers: readonly string[] }): boolean {
  if (targetHasMarker(head)) return true;
  const headers = head.headers;
  for (let i = 0; i < headers.length; i += 2) if (fieldHasMarker(headers[i] ?? '', headers[i + 1] ?? '')) return true;
  return false;
}

/**
 * Substitutes the scope's credentials into one request head. Call after the allow decision, immediately
 * before the upstream write; on `ok: false` send `{ error, message }` with `status` and write nothing.
 */
export function rewriteRequestHead(head: RequestHead): HeadRewrite {
  const sub = createSubstituter(head.scope);
  const path = rewritePath(head.path, sub);
  const query = head.query === undefined ? undefined : rewriteQuery(head.query, sub);
  const headers = head.headers.map(([name, value]): HeaderPair => [name, rewriteHeaderValue(value, sub, head.scope)]);
  const authorizations = head.headers.filter(([name]) => name.toLowerCase() === 'authorization');
  if (authorizations.length > 1 && authorizations.some(([, value]) => containsMarker(decodeBasic(value) ?? value))) {
    sub.fail('multiple-authorization', 'a credential cannot be sent with more than one Authorization header');
  }
  const refusal = sub.refusal();
  if (refusal !== undefined) return refusal;
  const rewritten = { method: head.method, path, query, headers };
  if (headHasMarker(rewritten)) {
    const why = head.scope.hasResolver ? 'leftover-marker' : 'no-authority';
    return refuse(why, 'a credential placeholder could not be resolved in this request');
  }
  if (sub.used.size > 0 && !head.scope.stillCurrent()) {
    return refuse('stale-revision', 'the credentials changed while the request was in flight; retry it');
  }
  return Object.freeze({ ok: true, path, query, headers, usedKeys: Object.freeze([...sub.used].sort()) });
}
