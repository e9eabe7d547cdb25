// Builds compiled Endpoint values for tests without going through the policy parser.
// Defaults describe a plain exact-host L4 endpoint on 443; hostKind is derived from host unless given.

import type { Endpoint, EndpointOptions, HostKind } from '../../src/policy/types.js';
import { L7_PROTOCOLS } from '../../src/policy/types.js';

// Mirrors the parser's defaults (policy/endpoint-options.ts) without importing the parser.
const OPTIONS: EndpointOptions = Object.freeze({
  graphqlMaxBodyBytes: 64 * 1024,
  persistedQueries: 'deny',
  mcpStrictToolNames: true,
  mcpAllowAllKnownMethods: false,
  mcpFilterToolsList: false,
  mcpVersions: ['2025-11-25'] as const,
  jsonRpcMaxBodyBytes: 64 * 1024,
});

function hostKindOf(host: string | undefined): HostKind {
  if (host === undefined) return 'any';
  if (host.includes('*')) return 'wildcard';
  if (/^[0-9.]+$/.test(host) || host.includes(':')) return 'ip';
  return 'exact';
}

/**
 * A full, frozen Endpoint. `makeEndpoint({ host: '*.example.test' })` is a wildcard endpoint, and so on.
 * The default `selectsPath` accepts every path when `path` is undefined, else only that exact path; the default
 * `matchesBinary` accepts a binary listed exactly or `/**`. Pass either function for real glob semantics.
 */
export function makeEndpoint(partial: Partial<Endpoint> = {}): Endpoint {
  const host = 'host' in partial ? partial.host : 'api.example.test';
  const protocol = partial.protocol ?? 'l4';
  const index = partial.index ?? 0;
  const policy = partial.policy ?? 'test';
  const endpoint: Endpoint = {
    id: `${policy}#${index}`,
    policy,
    policyName: policy,
    index,
    host,
    hostKind: hostKindOf(host),
    ports: [443],
    protocol,
    tls: 'auto',
    enforcement: 'enforce',
    path: undefined,
    allowedIps: [],
    allowEncodedSlash: false,
    allowEncodedBackslash: false,
    allowEncodedNul: false,
    credentialProvider: undefined,
    requestBodyCredentialRewrite: false,
    websocketCredentialRewrite: false,
    allowUninspectedCredentials: false,
    binaries: [],
    inspected: L7_PROTOCOLS.has(protocol),
    order: index,
    access: undefined,
    rules: [],
    denyRules: [],
    selectorSpecificity: partial.path === undefined ? 0 : partial.path.replaceAll('*', '').length,
    selectsPath: (path: string) => partial.path === undefined || path === partial.path,
    matchesBinary: (path: string) => (partial.binaries ?? []).some((glob) => glob === path || glob === '/**'),
    credentialSigning: undefined,
    signingService: undefined,
    signingRegion: undefined,
    options: OPTIONS,
    ...partial,
  };
  return Object.freeze({
    ...endpoint,
    ports: Object.freeze([...endpoint.ports]),
    allowedIps: Object.freeze([...endpoint.allowedIps]),
    binaries: Object.freeze([...endpoint.binaries]),
    rules: Object.freeze([...endpoint.rules]),
    denyRules: Object.freeze([...endpoint.denyRules]),
  });
}
