// CredentialSet: one immutable revision of every provider's keys (as Secrets) and compiled endpoints, plus
// the identities of the last REVISIONS_KEPT revisions for `v<rev>_KEY` placeholders. Validates; no I/O.

import { createHash } from 'node:crypto';
import { BoundaryError, type Issue } from '../shared/errors.js';
import { type ClientCertificate, sameClientCertificate } from './client-cert.js';
import { type DeliveredExtras, fromDelivery } from './delivered.js';
import { compileHostPattern, compilePathGlob } from './endpoint-match.js';
import { sameGrant, type TokenGrantInput } from './grant.js';
import { keyNameProblem } from './placeholder.js';
import { Secret } from './secret.js';
import { indexShaped, type PlaceholderFormat, shapedPlaceholder } from './shaped.js';

export const MAX_PROVIDERS = 256;
export const MAX_KEYS_PER_PROVIDER = 1_024;
export const MAX_ENDPOINTS_PER_PROVIDER = 256;
export const MAX_SECRET_CHARS = 65_536;
/** OpenShell keeps 8 revisions for pinned placeholders (docs/credentials.md#placeholder-forms). */
export const REVISIONS_KEPT = 8;

const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export interface CredentialEndpointInput {
  readonly host: string;
  readonly port: number;
  readonly path?: string | undefined;
}

/** A provider as the file source or the control channel hands it over (the latter with DeliveredExtras). */
export interface ProviderInput extends DeliveredExtras {
  readonly name: string;
  readonly env: Readonly<Record<string, string | Secret>>;
  readonly endpoints?: readonly CredentialEndpointInput[];
  /** Presented on the upstream TLS handshake to this provider's own endpoints (client-cert.ts). */
  readonly clientCertificate?: ClientCertificate | undefined;
  /** Keys whose placeholder is shaped like the real token (shaped.ts). */
  readonly formats?: Readonly<Record<string, PlaceholderFormat>> | undefined;
  /** Token grants: each key is in `env` while grants/ holds a valid token for it, else pending. */
  readonly grants?: readonly TokenGrantInput[];
}

interface CredentialEndpoint {
  readonly host: string;
  readonly port: number;
  readonly path: string | undefined;
  /** Host and port only: used to tell whether an uninspected route would carry credentials. */
  matchesAuthority(host: string, port: number): boolean;
  matches(host: string, port: number, path: string): boolean;
}

export interface CredentialProvider {
  readonly name: string;
  readonly keys: ReadonlyMap<string, Secret>;
  readonly endpoints: readonly CredentialEndpoint[];
  readonly clientCertificate: ClientCertificate | undefined;
  /** Key -> its shaped placeholder, and its format, for the keys with a format. */
  readonly shaped: ReadonlyMap<string, string>;
  readonly formats: ReadonlyMap<string, PlaceholderFormat>;
  readonly grants: readonly TokenGrantInput[];
}

export interface CredentialSet {
  readonly revision: number;
  readonly providers: ReadonlyMap<string, CredentialProvider>;
  /** Every key of every provider, sorted and deduplicated. */
  readonly keys: readonly string[];
  hasKey(key: string): boolean;
  /** A token grant declares `key` but holds no valid token now: its placeholders fail closed (token-unavailable). */
  isPending(key: string): boolean;
  /** Which providers define `key` (sorted, comma-joined) at a retained revision; undefined when not retained. */
  identityAt(revision: number, key: string): string | undefined;
  /** Retained revisions (oldest first, this one last) -> key -> identity. */
  readonly history: ReadonlyMap<number, ReadonlyMap<string, string>>;
  /** Same providers, keys, values and endpoints: a reload that changes nothing keeps its revision. */
  sameAs(other: CredentialSet): boolean;
}

/** The `s<64hex>_KEY` handle of a key in a provider: stable across rotations of its value. */
export function stableHandle(provider: string, key: string): string {
  return createHash('sha256').update(`boundary-credential-handle\u0000${provider}\u0000${key}`).digest('hex');
}

/** Why a value cannot be a credential, or undefined. CR, LF and NUL would split a header (CR-09). */
export function secretValueProblem(value: string): string | undefined {
  if (value.length === 0) return 'is empty';
  if (value.length > MAX_SECRET_CHARS) return `is longer than ${MAX_SECRET_CHARS} characters`;
  if (/[\r\n\u0000]/.test(value)) return 'contains CR, LF or NUL';
  return undefined;
}

export function providerNameProblem(name: string): string | undefined {
  return PROVIDER_NAME.test(name) ? undefined : 'must be 1-128 characters of A-Z a-z 0-9 _ . - (starting alphanumeric)';
}

function compileEndpoint(input: CredentialEndpointInput, path: string, issues: Issue[]): CredentialEndpoint | undefined {
  const host = compileHostPattern(input.host);
  if (!host.ok) issues.push({ code: 'CREDENTIALS_ENDPOINT_INVALID', path: `${path}.host`, message: host.message });
  if (!Number.isInteger(input.port) || input.port < 1 || input.port > 65_535) {
    issues.push({ code: 'CREDENTIALS_ENDPOINT_INVALID', path: `${path}.port`, message: 'must be an integer 1-65535' });
  }
  const glob = input.path === undefined ? undefined : compilePathGlob(input.path);
  if (glob !== undefined && !glob.ok) {
    issues.push({ code: 'CREDENTIALS_ENDPOINT_INVALID', path: `${path}.path`, message: glob.message });
  }
  if (!host.ok || (glob !== undefined && !glob.ok)) return undefined;
  const matchHost = host.value;
  const matchPath = glob?.ok === true ? glob.value : () => true;
  return Object.freeze({
    host: input.host,
    port: input.port,
    path: input.path,
    matchesAuthority: (h: string, p: number) => p === input.port && matchHost(h),
    matches: (h: string, p: number, requestPath: string) => p === input.port && matchHost(h) && matchPath(requestPath),
  });
}

function compileProvider(input: ProviderInput, issues: Issue[]): CredentialProvider {
  const base = `providers.${input.name}`;
  const nameProblem = providerNameProblem(input.name);
  if (nameProblem !== undefined) issues.push({ code: 'CREDENTIALS_PROVIDER_INVALID', path: base, message: nameProblem });
  const keys = new Map<string, Secret>();
  const entries = Object.entries(input.env);
  if (entries.length > MAX_KEYS_PER_PROVIDER) {
    issues.push({ code: 'CREDENTIALS_LIMIT', path: `${base}.env`, message: `more than ${MAX_KEYS_PER_PROVIDER} keys` });
  }
  for (const [key, raw] of entries.slice(0, MAX_KEYS_PER_PROVIDER)) {
    const keyProblem = keyNameProblem(key);
    if (keyProblem !== undefined) {
      issues.push({ code: 'CREDENTIALS_KEY_INVALID', path: `${base}.env.${key}`, message: keyProblem });
      continue;
    }
    const secret = raw instanceof Secret ? raw : new Secret(raw);
    const valueProblem = secretValueProblem(secret.reveal());
    if (valueProblem !== undefined) {
      issues.push({ code: 'CREDENTIALS_VALUE_INVALID', path: `${base}.env.${key}`, message: `value ${valueProblem}` });
      continue;
    }
    keys.set(key, secret);
  }
  const endpointInputs = input.endpoints ?? [];
  if (endpointInputs.length > MAX_ENDPOINTS_PER_PROVIDER) {
    issues.push({ code: 'CREDENTIALS_LIMIT', path: `${base}.endpoints`, message: `more than ${MAX_ENDPOINTS_PER_PROVIDER}` });
  }
  const endpoints: CredentialEndpoint[] = [];
  endpointInputs.slice(0, MAX_ENDPOINTS_PER_PROVIDER).forEach((endpoint, index) => {
    const compiled = compileEndpoint(endpoint, `${base}.endpoints[${index}]`, issues);
    if (compiled !== undefined) endpoints.push(compiled);
  });
  const delivered = fromDelivery(input, base, issues);
  const clientCertificate = input.clientCertificate ?? delivered.clientCertificate;
  const formats = new Map(Object.entries(input.formats ?? delivered.formats ?? {}).filter(([key]) => keys.has(key)));
  const shaped = shapedPlaceholders(input.name, formats, base, issues);
  return Object.freeze({
    name: input.name,
    keys,
    endpoints: Object.freeze(endpoints),
    grants: Object.freeze([...(input.grants ?? [])]),
    clientCertificate,
    shaped,
    formats,
  });
}

/** Derives (and indexes, for every scan) the shaped placeholders of the provider's keys that declare a format. */
function shapedPlaceholders(provider: string, formats: ReadonlyMap<string, PlaceholderFormat>, base: string, issues: Issue[]): ReadonlyMap<string, string> {
  const shaped = new Map<string, string>();
  for (const [key, format] of formats) {
    const value = shapedPlaceholder(provider, key, format);
    if (indexShaped(value, { key, handle: stableHandle(provider, key) })) shaped.set(key, value);
    else issues.push({ code: 'CREDENTIALS_LIMIT', path: `${base}.env.${key}.format`, message: 'too many shaped placeholders in this process' });
  }
  return shaped;
}

type Identities = ReadonlyMap<string, string>;

function identitiesOf(providers: ReadonlyMap<string, CredentialProvider>): Identities {
  const owners = new Map<string, string[]>();
  for (const provider of [...providers.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    // A grant's key keeps its identity while its token is pending, so `v<rev>_KEY` survives a refresh outage.
    const names = new Set([...provider.keys.keys(), ...provider.grants.map((grant) => grant.key)]);
    for (const key of names) owners.set(key, [...(owners.get(key) ?? []), provider.name]);
  }
  return new Map([...owners].map(([key, names]) => [key, names.join(',')]));
}

function sameProviders(a: ReadonlyMap<string, CredentialProvider>, b: ReadonlyMap<string, CredentialProvider>): boolean {
  if (a.size !== b.size) return false;
  for (const [name, left] of a) {
    const right = b.get(name);
    if (right === undefined || left.keys.size !== right.keys.size) return false;
    if (!sameClientCertificate(left.clientCertificate, right.clientCertificate)) return false;
    if (JSON.stringify([...left.shaped]) !== JSON.stringify([...right.shaped])) return false;
    for (const [key, secret] of left.keys) {
      const other = right.keys.get(key);
      if (other === undefined || !secret.equals(other)) return false;
    }
    const shape = (p: CredentialProvider) => JSON.stringify(p.endpoints.map((e) => [e.host, e.port, e.path ?? null]));
    if (shape(left) !== shape(right)) return false;
    if (left.grants.length !== right.grants.length || left.grants.some((g, i) => !sameGrant(g, right.grants[i] as TokenGrantInput))) return false;
  }
  return true;
}

/**
 * Validates and freezes one revision. Throws BoundaryError CREDENTIALS_INVALID listing every problem.
 * `previous` carries the identity history forward so `v<rev>_KEY` placeholders of recent revisions resolve.
 */
export function createCredentialSet(input: {
  readonly providers: readonly ProviderInput[];
  readonly revision: number;
  readonly previous?: CredentialSet | undefined;
}): CredentialSet {
  const issues: Issue[] = [];
  if (input.providers.length > MAX_PROVIDERS) {
    issues.push({ code: 'CREDENTIALS_LIMIT', path: 'providers', message: `more than ${MAX_PROVIDERS} providers` });
  }
  const providers = new Map<string, CredentialProvider>();
  for (const provider of input.providers.slice(0, MAX_PROVIDERS)) {
    if (providers.has(provider.name)) {
      issues.push({ code: 'CREDENTIALS_PROVIDER_INVALID', path: `providers.${provider.name}`, message: 'defined twice' });
    }
    providers.set(provider.name, compileProvider(provider, issues));
  }
  if (issues.length > 0) {
    throw new BoundaryError('CREDENTIALS_INVALID', `credentials: ${issues.length} problem(s)`, { issues });
  }
  const current = identitiesOf(providers);
  const history = new Map<number, Identities>();
  const earlier = input.previous === undefined ? [] : [...input.previous.history];
  for (const [revision, identities] of [...earlier, [input.revision, current] as const].slice(-REVISIONS_KEPT)) {
    history.set(revision, identities);
  }
  const present = new Set<string>();
  const pending = new Set<string>();
  for (const provider of providers.values()) {
    for (const key of provider.keys.keys()) present.add(key);
    for (const grant of provider.grants) if (!provider.keys.has(grant.key)) pending.add(grant.key);
  }
  const keys = Object.freeze([...present].sort());
  return Object.freeze({
    revision: input.revision,
    providers,
    keys,
    hasKey: (key: string) => present.has(key),
    isPending: (key: string) => pending.has(key) && !present.has(key),
    identityAt: (revision: number, key: string) => history.get(revision)?.get(key),
    history,
    sameAs: (other: CredentialSet) => sameProviders(providers, other.providers),
  });
}

