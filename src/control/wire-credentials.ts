// Turns delivered credential providers (messages.ts WireProvider) into what the credential source takes: token
// grants become credentials/grant.ts definitions with their secrets as Secrets, checked with the rules the
// credentials file's grants pass (docs/credentials.md#token-grants). Pure; never puts a value in an issue.

import {
  CLIENT_AUTH_METHODS,
  type ClientAuthMethod,
  GRANT_TYPES,
  type GrantType,
  grantParameterProblem,
  MAX_GRANTS_PER_PROVIDER,
  placementHeaderProblem,
  type TokenGrantInput,
  tokenEndpointProblem,
} from '../credentials/grant.js';
import { keyNameProblem } from '../credentials/placeholder.js';
import { Secret } from '../credentials/secret.js';
import { type ProviderInput, secretValueProblem } from '../credentials/set.js';
import { BoundaryError, type Issue } from '../shared/errors.js';
import type { WireProvider, WireTokenGrant } from './messages.js';

/** Throws CREDENTIALS_INVALID (issues: CREDENTIALS_GRANT_INVALID, CREDENTIALS_KEY_INVALID, CREDENTIALS_LIMIT) for a grant that breaks a rule. */
export function providersFromWire(wire: readonly WireProvider[]): ProviderInput[] {
  const issues: Issue[] = [];
  const providers = wire.map(({ tokenGrants, ...provider }): ProviderInput => {
    if (tokenGrants === undefined) return provider;
    const base = `providers.${provider.name}.tokenGrants`;
    if (tokenGrants.length > MAX_GRANTS_PER_PROVIDER) issues.push(problem('CREDENTIALS_LIMIT', base, `more than ${MAX_GRANTS_PER_PROVIDER} grants`));
    const seen = new Set(Object.keys(provider.env));
    const grants: TokenGrantInput[] = [];
    for (const grant of tokenGrants.slice(0, MAX_GRANTS_PER_PROVIDER)) {
      const at = `${base}.${grant.key}`;
      if (seen.has(grant.key)) issues.push(problem('CREDENTIALS_KEY_INVALID', at, 'is also an env key or another grant of this provider'));
      seen.add(grant.key);
      const read = grantFromWire(grant, at, issues);
      if (read !== undefined) grants.push(read);
    }
    return { ...provider, grants };
  });
  if (issues.length > 0) {
    const first = issues[0] as Issue;
    const more = issues.length > 1 ? ` (+${issues.length - 1} more)` : '';
    throw new BoundaryError('CREDENTIALS_INVALID', `credentials: ${first.path}: ${first.message}${more}`, { issues });
  }
  return providers;
}

function problem(code: Issue['code'], path: string, message: string): Issue {
  return { code, path, message };
}

function grantFromWire(wire: WireTokenGrant, at: string, issues: Issue[]): TokenGrantInput | undefined {
  const count = issues.length;
  const check = (field: string, why: string | undefined): void => {
    if (why !== undefined) issues.push(problem('CREDENTIALS_GRANT_INVALID', `${at}.${field}`, why));
  };
  const keyProblem = keyNameProblem(wire.key);
  if (keyProblem !== undefined) issues.push(problem('CREDENTIALS_KEY_INVALID', at, keyProblem));
  const grantType = wire.grantType as GrantType;
  check('grantType', GRANT_TYPES.includes(grantType) ? undefined : `must be one of ${GRANT_TYPES.join(', ')}`);
  check('tokenEndpoint', tokenEndpointProblem(wire.tokenEndpoint));
  check('clientId', grantParameterProblem(wire.clientId));
  const clientAuth = wire.clientAuth as ClientAuthMethod;
  check('clientAuth', CLIENT_AUTH_METHODS.includes(clientAuth) ? undefined : `must be one of ${CLIENT_AUTH_METHODS.join(', ')}`);
  for (const field of ['scope', 'audience', 'resource'] as const) {
    const value = wire[field];
    if (value !== undefined) check(field, grantParameterProblem(value));
  }
  for (const field of ['clientSecret', 'refreshToken'] as const) {
    const value = wire[field];
    if (value !== undefined) check(field, secretValueProblem(value));
  }
  if (grantType === 'client_credentials') {
    check('clientSecret', wire.clientSecret === undefined ? 'required for client_credentials' : undefined);
    check('refreshToken', wire.refreshToken === undefined ? undefined : 'only for grant_type refresh_token');
  }
  if (grantType === 'refresh_token') check('refreshToken', wire.refreshToken === undefined ? 'required for refresh_token' : undefined);
  if (wire.placement?.kind === 'header') check('placement.name', placementHeaderProblem(wire.placement.name));
  if (issues.length > count) return undefined;
  return {
    key: wire.key,
    grantType,
    tokenEndpoint: wire.tokenEndpoint,
    clientId: wire.clientId,
    clientSecret: wire.clientSecret === undefined ? undefined : new Secret(wire.clientSecret),
    clientAuth,
    refreshToken: wire.refreshToken === undefined ? undefined : new Secret(wire.refreshToken),
    scope: wire.scope,
    audience: wire.audience,
    resource: wire.resource,
    placement: wire.placement,
    privateTokenEndpoint: wire.privateTokenEndpoint,
  };
}
