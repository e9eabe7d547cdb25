// Reads a provider's `token_grants` map (docs/credentials.md#token-grants): one entry per key, each validated here
// with located issues (CREDENTIALS_GRANT_INVALID). The client secret and refresh token must be value_from
// references, never inline: the credentials file is the kind of file that ends up in a ConfigMap or a log.

import { isMap, isScalar } from 'yaml';
import {
  CLIENT_AUTH_METHODS,
  type ClientAuthMethod,
  GRANT_TYPES,
  type GrantPlacement,
  type GrantType,
  grantParameterProblem,
  MAX_GRANTS_PER_PROVIDER,
  placementHeaderProblem,
  tokenEndpointProblem,
} from './grant.js';
import { asMap, asString, type EnvEntrySpec, entries, type Located, locate, readEnvValue, report, type Walk } from './parse-walk.js';
import { keyNameProblem } from './placeholder.js';

const GRANT_FIELDS = [
  'grant_type',
  'token_endpoint',
  'client_id',
  'client_secret',
  'client_auth',
  'refresh_token',
  'scope',
  'audience',
  'resource',
  'placement',
  'private_token_endpoint',
] as const;

/** A grant as the file declares it; its secrets are resolved by file-source.ts like env value_from entries. */
export interface GrantSpec {
  readonly key: string;
  readonly at: Located;
  readonly grantType: GrantType;
  readonly tokenEndpoint: string;
  readonly clientId: string;
  readonly clientSecret: EnvEntrySpec | undefined;
  readonly clientAuth: ClientAuthMethod;
  readonly refreshToken: EnvEntrySpec | undefined;
  readonly scope: string | undefined;
  readonly audience: string | undefined;
  readonly resource: string | undefined;
  readonly placement: GrantPlacement | undefined;
  readonly privateTokenEndpoint: boolean;
}

type Fields = Partial<Record<(typeof GRANT_FIELDS)[number], [unknown, unknown]>>;

function oneOf<T extends string>(walk: Walk, node: unknown, path: string, allowed: readonly T[]): T | undefined {
  const text = asString(walk, node, path);
  if (text === undefined) return undefined;
  if ((allowed as readonly string[]).includes(text)) return text as T;
  report(walk, 'CREDENTIALS_GRANT_INVALID', node, path, `must be one of ${allowed.join(', ')}`);
  return undefined;
}

function parameter(walk: Walk, node: unknown, path: string): string | undefined {
  const text = asString(walk, node, path);
  const problem = text === undefined ? undefined : grantParameterProblem(text);
  if (problem !== undefined) report(walk, 'CREDENTIALS_GRANT_INVALID', node, path, problem);
  return problem === undefined ? text : undefined;
}

/** A client secret or refresh token: value_from only. */
function secretRef(walk: Walk, node: unknown, keyNode: unknown, path: string): EnvEntrySpec | undefined {
  if (!isMap(node)) {
    report(walk, 'CREDENTIALS_GRANT_INVALID', node, path, 'must be { value_from: { file | env } }, never inline');
    return undefined;
  }
  const value = readEnvValue(walk, node, path);
  return value === undefined ? undefined : { key: path, value, at: locate(walk, keyNode, path) };
}

function readPlacement(walk: Walk, node: unknown, path: string): GrantPlacement | undefined {
  if (isScalar(node) && node.value === 'bearer') return { kind: 'bearer' };
  const map = isMap(node) ? asMap(walk, node, path) : undefined;
  const header = map === undefined ? undefined : entries(walk, map, path, ['header']);
  const name = header?.length === 1 ? asString(walk, header[0]?.[1], `${path}.header`) : undefined;
  if (name === undefined) {
    if (header === undefined || header.length === 0) report(walk, 'CREDENTIALS_GRANT_INVALID', node, path, 'must be bearer or { header: NAME }');
    return undefined;
  }
  const problem = placementHeaderProblem(name);
  if (problem !== undefined) report(walk, 'CREDENTIALS_GRANT_INVALID', header?.[0]?.[1], `${path}.header`, problem);
  return problem === undefined ? { kind: 'header', name } : undefined;
}

function readGrant(walk: Walk, key: string, node: unknown, keyNode: unknown, path: string): GrantSpec | undefined {
  const keyProblem = keyNameProblem(key);
  if (keyProblem !== undefined) report(walk, 'CREDENTIALS_KEY_INVALID', keyNode, path, keyProblem);
  const map = asMap(walk, node, path);
  if (map === undefined) return undefined;
  const fields: Fields = {};
  for (const [field, value, fieldKey] of entries(walk, map, path, GRANT_FIELDS)) fields[field as keyof Fields] = [value, fieldKey];
  const at = (field: keyof Fields) => `${path}.${field}`;
  const read = <T>(field: keyof Fields, fn: (value: unknown, fieldKey: unknown, where: string) => T): T | undefined => {
    const entry = fields[field];
    return entry === undefined ? undefined : fn(entry[0], entry[1], at(field));
  };
  const grantType = read('grant_type', (v, _k, p) => oneOf(walk, v, p, GRANT_TYPES));
  const tokenEndpoint = read('token_endpoint', (v, _k, p) => {
    const text = asString(walk, v, p);
    const problem = text === undefined ? undefined : tokenEndpointProblem(text);
    if (problem !== undefined) report(walk, 'CREDENTIALS_GRANT_INVALID', v, p, problem);
    return problem === undefined ? text : undefined;
  });
  const clientId = read('client_id', (v, _k, p) => parameter(walk, v, p));
  const clientSecret = read('client_secret', (v, k, p) => secretRef(walk, v, k, p));
  const refreshToken = read('refresh_token', (v, k, p) => secretRef(walk, v, k, p));
  const clientAuth = read('client_auth', (v, _k, p) => oneOf(walk, v, p, CLIENT_AUTH_METHODS)) ?? 'client_secret_basic';
  const placement = read('placement', (v, _k, p) => readPlacement(walk, v, p));
  const privateEndpoint = read('private_token_endpoint', (v, _k, p) => {
    if (isScalar(v) && typeof v.value === 'boolean') return v.value;
    report(walk, 'CREDENTIALS_TYPE', v, p, 'expected true or false');
    return undefined;
  });
  for (const required of ['grant_type', 'token_endpoint', 'client_id'] as const) {
    if (fields[required] === undefined) report(walk, 'CREDENTIALS_GRANT_INVALID', map, at(required), 'required');
  }
  if (grantType === 'client_credentials' && fields.client_secret === undefined) {
    report(walk, 'CREDENTIALS_GRANT_INVALID', map, at('client_secret'), 'required for client_credentials');
  }
  if (grantType === 'client_credentials' && fields.refresh_token !== undefined) {
    report(walk, 'CREDENTIALS_GRANT_INVALID', fields.refresh_token[1], at('refresh_token'), 'only for grant_type refresh_token');
  }
  if (grantType === 'refresh_token' && fields.refresh_token === undefined) {
    report(walk, 'CREDENTIALS_GRANT_INVALID', map, at('refresh_token'), 'required for refresh_token');
  }
  if (fields.client_auth !== undefined && fields.client_secret === undefined) {
    report(walk, 'CREDENTIALS_GRANT_INVALID', fields.client_auth[1], at('client_auth'), 'needs client_secret');
  }
  const scope = read('scope', (v, _k, p) => parameter(walk, v, p));
  const audience = read('audience', (v, _k, p) => parameter(walk, v, p));
  const resource = read('resource', (v, _k, p) => parameter(walk, v, p));
  if (keyProblem !== undefined || grantType === undefined || tokenEndpoint === undefined || clientId === undefined) return undefined;
  return {
    key,
    at: locate(walk, keyNode, path),
    grantType,
    tokenEndpoint,
    clientId,
    clientSecret,
    clientAuth,
    refreshToken,
    scope,
    audience,
    resource,
    placement,
    privateTokenEndpoint: privateEndpoint ?? false,
  };
}

/** The `token_grants` map of one provider: key -> grant. */
export function readGrants(walk: Walk, node: unknown, path: string): GrantSpec[] {
  const map = asMap(walk, node, path);
  const items = map === undefined ? [] : entries(walk, map, path);
  if (items.length > MAX_GRANTS_PER_PROVIDER) report(walk, 'CREDENTIALS_LIMIT', node, path, `more than ${MAX_GRANTS_PER_PROVIDER} grants`);
  const grants: GrantSpec[] = [];
  for (const [key, value, keyNode] of items.slice(0, MAX_GRANTS_PER_PROVIDER)) {
    const grant = readGrant(walk, key, value, keyNode, `${path}.${key}`);
    if (grant !== undefined) grants.push(grant);
  }
  return grants;
}
