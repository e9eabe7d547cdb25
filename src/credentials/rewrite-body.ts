// Request-body rewrite for endpoints with request_body_credential_rewrite (docs/credentials.md#substitution-slots): UTF-8 JSON,
// form-urlencoded and text/* bodies up to MAX_BODY_REWRITE_BYTES, then the leftover scan. Content-encoded
// bodies are inspected, never rewritten. The caller buffers the body and recomputes Content-Length.

import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { type RewriteRefusal, refuse } from './outcome.js';
import { containsMarker } from './placeholder.js';
import type { CredentialScope } from './scope.js';
import { createSubstituter, encodeUnreserved, type SlotEncoder, type Substituter } from './substitute.js';

/** OpenShell's buffer for body rewrite (chunk framing counts toward it: the caller checks that). */
export const MAX_BODY_REWRITE_BYTES = 262_144;
/** A content-encoded body is inflated at most this far to look for markers; beyond, it is refused. */
const MAX_INFLATED_SCAN_BYTES = 4_194_304;

const BODY_KINDS = ['json', 'form', 'text', 'other'] as const;
type BodyKind = (typeof BODY_KINDS)[number];

interface BodyRequest {
  readonly contentType: string | undefined;
  readonly contentEncoding: string | undefined;
  readonly body: Buffer;
  readonly scope: CredentialScope;
}

export type BodyRewrite =
  | { readonly ok: true; readonly body: Buffer; readonly changed: boolean; readonly usedKeys: readonly string[] }
  | RewriteRefusal;

const asIs: SlotEncoder = (value) => value;
const jsonString: SlotEncoder = (value) => JSON.stringify(value).slice(1, -1);
const formValue: SlotEncoder = (value) => encodeUnreserved(value);

/** Which rewriter applies to a Content-Type; `other` (or a charset other than UTF-8) is scanned only. */
export function bodyKindOf(contentType: string | undefined): BodyKind {
  if (contentType === undefined) return 'other';
  const [media = '', ...params] = contentType.toLowerCase().split(';').map((part) => part.trim());
  const charset = params.find((param) => param.startsWith('charset='))?.slice(8).replace(/"/g, '');
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') return 'other';
  if (media === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(media)) return 'json';
  if (media === 'application/x-www-form-urlencoded') return 'form';
  if (media.startsWith('text/')) return 'text';
  return 'other';
}

function inflate(body: Buffer, codings: readonly string[]): Buffer | undefined {
  let data = body;
  for (const coding of [...codings].reverse()) {
    const options = { maxOutputLength: MAX_INFLATED_SCAN_BYTES };
    try {
      if (coding === 'gzip' || coding === 'x-gzip') data = gunzipSync(data, options);
      else if (coding === 'deflate') data = inflateSync(data, options);
      else if (coding === 'br') data = brotliDecompressSync(data, options);
      else return undefined;
    } catch {
      return undefined;
    }
  }
  return data;
}

function decodeFormComponent(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

function rewriteForm(text: string, sub: Substituter): string {
  return text
    .split('&')
    .map((param) => {
      const eq = param.indexOf('=');
      const name = eq === -1 ? param : param.slice(0, eq);
      if (containsMarker(name)) sub.classify(decodeFormComponent(name) ?? name);
      if (eq === -1) return param;
      const value = param.slice(eq + 1);
      if (!containsMarker(value)) return param;
      // Form encoders always percent-encode the `:` of a placeholder: resolve in the decoded value and
      // encode the whole value again (equivalent for every form parser).
      const decoded = decodeFormComponent(value);
      if (decoded === undefined) return param;
      const next = sub.apply(decoded, asIs);
      return next === decoded ? param : `${name}=${formValue(next)}`;
    })
    .join('&');
}

function jsonHasMarker(text: string): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return false;
  }
  // An explicit stack: escaped markers (`\u003a`) only show once strings are decoded; depth is unbounded.
  const stack: unknown[] = [parsed];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string' && containsMarker(item)) return true;
    if (Array.isArray(item)) stack.push(...item);
    else if (item !== null && typeof item === 'object') {
      for (const [key, value] of Object.entries(item)) stack.push(key, value);
    }
  }
  return false;
}

/**
 * Rewrites a buffered request body for an endpoint with request_body_credential_rewrite. On `ok: true`
 * send `body` (set Content-Length to its length, drop Transfer-Encoding); on `ok: false` send nothing.
 */
export function rewriteBody(request: BodyRequest): BodyRewrite {
  const { body, scope } = request;
  if (body.length > MAX_BODY_REWRITE_BYTES) {
    return refuse('body-too-large', `the body is larger than ${MAX_BODY_REWRITE_BYTES} bytes and cannot be rewritten`);
  }
  const unchanged = { ok: true, body, changed: false, usedKeys: [] } as const;
  const codings = (request.contentEncoding ?? '')
    .toLowerCase()
    .split(',')
    .map((coding) => coding.trim())
    .filter((coding) => coding !== '' && coding !== 'identity');
  if (codings.length > 0) {
    const inflated = inflate(body, codings);
    if (inflated === undefined || containsMarker(inflated.toString('latin1'))) {
      return refuse('encoded-body', 'a content-encoded body cannot carry credential placeholders');
    }
    return unchanged;
  }
  const kind = bodyKindOf(request.contentType);
  const raw = body.toString('latin1');
  let text: string | undefined;
  try {
    text = kind === 'other' ? undefined : new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    text = undefined;
  }
  // JSON may spell a marker with \u escapes; only then is the body parsed before rewriting.
  const escaped = kind === 'json' && text !== undefined && raw.includes('\\u') && jsonHasMarker(text);
  if (!containsMarker(raw) && !escaped) return unchanged;
  const sub = createSubstituter(scope);
  if (text === undefined) {
    sub.classify(raw);
    return sub.refusal() ?? refuse('leftover-marker', 'this body type cannot carry credential placeholders');
  }
  const next = kind === 'form' ? rewriteForm(text, sub) : sub.apply(text, kind === 'json' ? jsonString : asIs);
  const refusal = sub.refusal();
  if (refusal !== undefined) return refusal;
  if (containsMarker(next) || (kind === 'json' && jsonHasMarker(next))) {
    return refuse(scope.hasResolver ? 'leftover-marker' : 'no-authority', 'a credential placeholder in the body could not be resolved');
  }
  if (sub.used.size > 0 && !scope.stillCurrent()) {
    return refuse('stale-revision', 'the credentials changed while the request was in flight; retry it');
  }
  const out = Buffer.from(next, 'utf8');
  return { ok: true, body: out, changed: sub.used.size > 0, usedKeys: [...sub.used].sort() };
}
