// The endpoint-scoped resolver (docs/credentials.md#endpoint-binding): which keys one request may use, decided from its
// host, port and canonical redacted path, plus the policy endpoint's credential_binding. Captures the
// credential revision for the revision guard (rule 6). Pure; a policy allow never widens a scope.

import type { Endpoint } from '../policy/types.js';
import { DEFAULT_PLACEHOLDER_FAMILY, type PlaceholderFamily, type PlaceholderRef, redactPlaceholders } from './placeholder.js';
import type { Secret } from './secret.js';
import { type CredentialProvider, type CredentialSet, stableHandle } from './set.js';
import type { CredentialSource } from './source.js';

interface ScopeRequest {
  readonly source: CredentialSource;
  /** Normalised request host; undefined when the request has no authority (HTTP/1.0 without Host). */
  readonly host: string | undefined;
  readonly port: number;
  /** Canonical path without the query. Placeholders in it are redacted before matching. */
  readonly path: string;
  /** The endpoint the policy decision selected; its credential_binding provider is bound too. */
  readonly endpoint?: Endpoint | undefined;
  /** The placeholder family this boundary resolves (default openshell); the other one never resolves. */
  readonly family?: PlaceholderFamily | undefined;
}

/** Why a placeholder did not resolve. Closed set, never a key name: safe for logs. */
export const UNAVAILABLE_REASONS = [
  'no-authority',
  'unknown-key',
  'revision-not-retained',
  'identity-changed',
  'unknown-handle',
  'ambiguous-key',
  'other-family',
  'token-unavailable',
] as const;
type UnavailableReason = (typeof UNAVAILABLE_REASONS)[number];

export type Resolution =
  | { readonly kind: 'value'; readonly secret: Secret }
  /** The key exists but is bound to other endpoints: 403 credential_endpoint_mismatch. */
  | { readonly kind: 'mismatch' }
  /** 500 credential_unavailable. */
  | { readonly kind: 'unavailable'; readonly reason: UnavailableReason };

export interface CredentialScope {
  /** The credential revision this scope was built from. */
  readonly revision: number;
  /** False for a request without an authority: nothing resolves, every marker is refused. */
  readonly hasResolver: boolean;
  /** Keys this request may use, sorted. For tests and metrics counts; never log the names. */
  readonly boundKeys: readonly string[];
  resolve(ref: PlaceholderRef): Resolution;
  /** Whether `key` exists in any provider: an alias is recognised only then (docs/credentials.md#placeholder-forms). */
  keyExists(key: string): boolean;
  /** False once the source moved to another revision; the proxy must then refuse (revision guard). */
  stillCurrent(): boolean;
  /** The bound values, for redactSecrets on echoed responses. */
  secrets(): readonly Secret[];
  /** Headers bound token grants with a `placement` write themselves (lower-case name, value), when they hold a token. */
  placements(): readonly (readonly [string, string])[];
}

function normaliseRequestHost(host: string): string {
  const lower = host.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

const NO_KEYS: readonly string[] = Object.freeze([]);

const NO_PROVIDERS: readonly CredentialProvider[] = Object.freeze([]);

function boundProviders(set: CredentialSet, request: ScopeRequest, rawHost: string): readonly CredentialProvider[] {
  // A set with no provider binds nothing (credential_binding names one of its providers): host and path go unread.
  if (set.providers.size === 0) return NO_PROVIDERS;
  const host = normaliseRequestHost(rawHost);
  const path = redactPlaceholders(request.path);
  // Each provider is visited once, so the list has no repeats; most requests bind none and share NO_PROVIDERS.
  let bound: CredentialProvider[] | undefined;
  for (const provider of set.providers.values()) {
    if (!provider.endpoints.some((endpoint) => endpoint.matches(host, request.port, path))) continue;
    if (bound === undefined) bound = [];
    bound.push(provider);
  }
  // An endpoint's `path` narrows its binding even where it restricts no traffic (an L4 endpoint): outside it, nothing is bound.
  const named = request.endpoint?.selectsPath(path) === true ? request.endpoint.credentialProvider : undefined;
  const viaPolicy = named === undefined ? undefined : set.providers.get(named);
  if (viaPolicy === undefined || bound?.includes(viaPolicy) === true) return bound ?? NO_PROVIDERS;
  return bound === undefined ? [viaPolicy] : [...bound, viaPolicy];
}

function resolveIn(set: CredentialSet, bound: readonly CredentialProvider[], ref: PlaceholderRef, family: PlaceholderFamily): Resolution {
  // Reserved, never resolved: a workload given one family's placeholders has no business holding the other's.
  if (ref.family !== undefined && ref.family !== family) return { kind: 'unavailable', reason: 'other-family' };
  if (!set.hasKey(ref.key)) return { kind: 'unavailable', reason: set.isPending(ref.key) ? 'token-unavailable' : 'unknown-key' };
  const holders = bound.filter((provider) => provider.keys.has(ref.key));
  if (ref.form === 'stable') {
    const mine = holders.find((provider) => stableHandle(provider.name, ref.key) === ref.handle);
    if (mine !== undefined) return { kind: 'value', secret: mine.keys.get(ref.key) as Secret };
    const elsewhere = [...set.providers.values()].some(
      (provider) => provider.keys.has(ref.key) && stableHandle(provider.name, ref.key) === ref.handle,
    );
    return elsewhere ? { kind: 'mismatch' } : { kind: 'unavailable', reason: 'unknown-handle' };
  }
  if (holders.length === 0) return { kind: 'mismatch' };
  if (ref.form === 'revision') {
    const then = set.identityAt(ref.revision ?? -1, ref.key);
    if (then === undefined) return { kind: 'unavailable', reason: 'revision-not-retained' };
    if (then !== set.identityAt(set.revision, ref.key)) return { kind: 'unavailable', reason: 'identity-changed' };
  }
  const [first, ...others] = holders.map((provider) => provider.keys.get(ref.key) as Secret);
  // Two bound providers with different values for one key: refuse rather than guess which one was meant.
  if (first === undefined || others.some((other) => !other.equals(first))) {
    return { kind: 'unavailable', reason: 'ambiguous-key' };
  }
  return { kind: 'value', secret: first };
}

const NO_PLACEMENTS: readonly (readonly [string, string])[] = Object.freeze([]);

function placementsOf(bound: readonly CredentialProvider[]): (readonly [string, string])[] {
  const out: (readonly [string, string])[] = [];
  for (const provider of bound) {
    for (const grant of provider.grants) {
      const token = grant.placement === undefined ? undefined : provider.keys.get(grant.key);
      if (token === undefined || grant.placement === undefined) continue;
      const bearer = grant.placement.kind === 'bearer';
      out.push([bearer ? 'authorization' : grant.placement.name.toLowerCase(), bearer ? `Bearer ${token.reveal()}` : token.reveal()]);
    }
  }
  return out;
}

/** Scopes kept per credential set for requests that bind no provider: one per source, family and resolver presence. */
const MAX_UNBOUND_SCOPES_PER_SET = 8;

interface UnboundScope {
  readonly source: CredentialSource;
  readonly family: PlaceholderFamily;
  readonly scope: CredentialScope;
}

/** A scope that binds nothing is made from its set, source, family and whether it resolves at all, so requests
 *  that bind no provider (most) share one instead of making its functions and freezing it each time. */
const unboundScopes = new WeakMap<CredentialSet, UnboundScope[]>();

function makeScope(set: CredentialSet, source: CredentialSource, family: PlaceholderFamily, hasResolver: boolean, bound: readonly CredentialProvider[]): CredentialScope {
  const boundKeys = bound.length === 0 ? NO_KEYS : Object.freeze([...new Set(bound.flatMap((provider) => [...provider.keys.keys()]))].sort());
  return Object.freeze({
    revision: set.revision,
    hasResolver,
    boundKeys,
    resolve: (ref: PlaceholderRef): Resolution =>
      hasResolver ? resolveIn(set, bound, ref, family) : { kind: 'unavailable', reason: 'no-authority' },
    keyExists: (key: string) => set.hasKey(key) || set.isPending(key),
    stillCurrent: () => source.current().revision === set.revision,
    secrets: () => bound.flatMap((provider) => [...provider.keys.values()]),
    placements: () => (bound.length === 0 ? NO_PLACEMENTS : placementsOf(bound)),
  });
}

function unboundScope(set: CredentialSet, source: CredentialSource, family: PlaceholderFamily, hasResolver: boolean): CredentialScope {
  let kept = unboundScopes.get(set);
  if (kept === undefined) {
    kept = [];
    unboundScopes.set(set, kept);
  }
  for (const entry of kept) if (entry.source === source && entry.family === family && entry.scope.hasResolver === hasResolver) return entry.scope;
  const scope = makeScope(set, source, family, hasResolver, []);
  if (kept.length >= MAX_UNBOUND_SCOPES_PER_SET) kept.shift();
  kept.push({ source, family, scope });
  return scope;
}

/** The resolver for one request. Build it after the allow decision; check stillCurrent() before the write. */
export function scopeFor(request: ScopeRequest): CredentialScope {
  const set = request.source.current();
  const hasResolver = request.host !== undefined && request.host.length > 0;
  const family = request.family ?? DEFAULT_PLACEHOLDER_FAMILY;
  const bound = hasResolver ? boundProviders(set, request, request.host ?? '') : NO_PROVIDERS;
  // Most requests have no provider bound: they share a scope (no set, array, sort or functions made for them).
  return bound.length === 0 ? unboundScope(set, request.source, family, hasResolver) : makeScope(set, request.source, family, hasResolver, bound);
}

/**
 * Whether a connection to host:port could carry credentials (any path): a provider endpoint matches, or the
 * policy endpoint has credential_binding. An L4 or `tls: skip` route for which this is true must be refused
 * with 403 uninspected_credentials unless the endpoint sets allow_uninspected_credentials (docs/credentials.md#inspectable-routes-only).
 */
export function routeCarriesCredentials(request: {
  readonly source: CredentialSource;
  readonly host: string;
  readonly port: number;
  readonly endpoint?: Endpoint | undefined;
}): boolean {
  if (request.endpoint?.credentialProvider !== undefined) return true;
  const providers = request.source.current().providers;
  // No provider, no endpoint to match: the host goes unread.
  if (providers.size === 0) return false;
  const host = normaliseRequestHost(request.host);
  for (const provider of providers.values()) {
    // A client certificate is a credential too: presenting it needs the connection terminated (client-cert.ts).
    const holds = provider.keys.size > 0 || provider.grants.length > 0 || provider.clientCertificate !== undefined;
    if (holds && provider.endpoints.some((e) => e.matchesAuthority(host, request.port))) return true;
  }
  return false;
}
