// Token grants (docs/credentials.md#token-grants): a credential key whose value boundary obtains from an OAuth 2.0
// token endpoint (client credentials or refresh token) and keeps fresh. This file holds the definition as the file
// source hands it over and the rules it must satisfy; grants/ fetches and refreshes. No I/O.

import type { Secret } from './secret.js';

export const GRANT_TYPES = ['client_credentials', 'refresh_token'] as const;
export type GrantType = (typeof GRANT_TYPES)[number];

/** How the client authenticates to the token endpoint (RFC 6749 section 2.3.1). */
export const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'] as const;
export type ClientAuthMethod = (typeof CLIENT_AUTH_METHODS)[number];

/** Token endpoint URLs longer than this are refused. */
export const MAX_TOKEN_ENDPOINT_CHARS = 2_048;
/** client_id, scope, audience and resource: at most this many characters each. */
export const MAX_GRANT_PARAMETER_CHARS = 1_024;
/** Token grants per provider. */
export const MAX_GRANTS_PER_PROVIDER = 16;

/** Where boundary itself writes the token on requests to the provider's endpoints; absent: placeholders only. */
export type GrantPlacement = { readonly kind: 'bearer' } | { readonly kind: 'header'; readonly name: string };

export interface TokenGrantInput {
  /** The env key the token is available under: one placeholder for the workload, across every rotation. */
  readonly key: string;
  readonly grantType: GrantType;
  /** An https URL (checked by tokenEndpointProblem). */
  readonly tokenEndpoint: string;
  readonly clientId: string;
  /** Required for client_credentials; optional for refresh_token (a public client sends only client_id). */
  readonly clientSecret?: Secret | undefined;
  readonly clientAuth: ClientAuthMethod;
  /** refresh_token only: the first refresh token; the server's rotated ones replace it in memory. */
  readonly refreshToken?: Secret | undefined;
  readonly scope?: string | undefined;
  readonly audience?: string | undefined;
  readonly resource?: string | undefined;
  readonly placement?: GrantPlacement | undefined;
  /** Operator opt-in: the token endpoint may resolve to private (internal) addresses. */
  readonly privateTokenEndpoint: boolean;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/** Headers boundary must never be told to overwrite with a token: framing, routing and hop-by-hop. */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'upgrade',
  'te',
  'trailer',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'cookie',
]);

export function placementHeaderProblem(name: string): string | undefined {
  if (!HEADER_NAME.test(name)) return 'must be an HTTP header name (1-128 token characters)';
  if (RESERVED_HEADERS.has(name.toLowerCase())) return 'names a header boundary never sets (framing, hop-by-hop, cookie)';
  return undefined;
}

/** Why `text` cannot be a token endpoint, or undefined: https only, no credentials or fragment in the URL. */
export function tokenEndpointProblem(text: string): string | undefined {
  if (text.length > MAX_TOKEN_ENDPOINT_CHARS) return `is longer than ${MAX_TOKEN_ENDPOINT_CHARS} characters`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:') return 'must be an https URL (the client secret and tokens travel on it)';
  if (url.username !== '' || url.password !== '') return 'must not carry user:password (use client_secret)';
  if (url.hash !== '') return 'must not have a fragment';
  return undefined;
}

export function grantParameterProblem(value: string): string | undefined {
  if (value.length === 0) return 'is empty';
  if (value.length > MAX_GRANT_PARAMETER_CHARS) return `is longer than ${MAX_GRANT_PARAMETER_CHARS} characters`;
  if (/[\u0000-\u001f\u007f]/.test(value)) return 'contains a control character';
  return undefined;
}

function sameSecret(a: Secret | undefined, b: Secret | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.equals(b);
}

/** Same definition and same secrets: a reload that changes neither keeps the grant's token and rotated refresh token. */
export function sameGrant(a: TokenGrantInput, b: TokenGrantInput): boolean {
  const shape = (g: TokenGrantInput) =>
    JSON.stringify([g.key, g.grantType, g.tokenEndpoint, g.clientId, g.clientAuth, g.scope, g.audience, g.resource, g.placement, g.privateTokenEndpoint]);
  return shape(a) === shape(b) && sameSecret(a.clientSecret, b.clientSecret) && sameSecret(a.refreshToken, b.refreshToken);
}
