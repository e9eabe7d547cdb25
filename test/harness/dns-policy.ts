// A hand-built Policy for DNS tests: endpoints from a short spec, endpointsForHost with exact and `*.` matching.
// Keeps the DNS tests independent of the YAML parser; the shape is the frozen Policy contract of policy/types.ts.

import type { Endpoint, Policy, Protocol } from '../../src/policy/types.js';

export interface EndpointSpec {
  readonly host: string;
  readonly ports: readonly number[];
  readonly protocol?: Protocol;
  readonly allowedIps?: readonly string[];
}

export function stubEndpoint(spec: EndpointSpec, index: number, key = 'test'): Endpoint {
  const wildcard = spec.host.includes('*');
  return Object.freeze({
    id: `${key}#${index}`,
    policy: key,
    policyName: key,
    index,
    host: spec.host,
    hostKind: wildcard ? 'wildcard' : /^[0-9.]+$/.test(spec.host) ? 'ip' : 'exact',
    ports: spec.ports,
    protocol: spec.protocol ?? 'tcp',
    tls: 'auto',
    enforcement: 'enforce',
    path: undefined,
    allowedIps: spec.allowedIps ?? [],
    allowEncodedSlash: false,
    allowEncodedBackslash: false,
    allowEncodedNul: false,
    credentialProvider: undefined,
    requestBodyCredentialRewrite: false,
    websocketCredentialRewrite: false,
    allowUninspectedCredentials: false,
    binaries: [],
    inspected: false,
    order: index,
    access: undefined,
    rules: [],
    denyRules: [],
    selectorSpecificity: 0,
    selectsPath: () => true,
    matchesBinary: () => true,
    credentialSigning: undefined,
    signingService: undefined,
    signingRegion: undefined,
    options: {
      graphqlMaxBodyBytes: 65_536,
      persistedQueries: 'deny',
      mcpStrictToolNames: true,
      mcpAllowAllKnownMethods: false,
      mcpFilterToolsList: false,
      jsonRpcMaxBodyBytes: 65_536,
    },
    // A cast, not `satisfies`: the engine may add fields that DNS never reads while this stub stays valid.
  } as unknown as Endpoint);
}

/** `*.example.test` matches exactly one more label (`a.example.test`), never the apex. */
export function stubPolicy(specs: readonly EndpointSpec[], generation = 1): Policy {
  const endpoints = specs.map((s, i) => stubEndpoint(s, i));
  return Object.freeze({
    generation,
    hash: `stub-${generation}-${specs.map((s) => `${s.host}:${s.ports.join('+')}`).join(',')}`,
    // One entry holding every endpoint, like a one-key policy; none when there are no endpoints (decide(): no-policy).
    entries: endpoints.length === 0 ? [] : [Object.freeze({ key: 'test', name: 'test', endpoints, binaries: [], matchesBinary: () => true })],
    endpoints,
    warnings: [],
    notEnforced: [],
    middlewares: [],
    middlewaresFor: () => [],
    endpointsForHost(host: string) {
      return endpoints.filter((e) => {
        const pattern = e.host ?? '';
        if (!pattern.startsWith('*.')) return pattern === host;
        const suffix = pattern.slice(1);
        return host.endsWith(suffix) && !host.slice(0, -suffix.length).includes('.') && host.length > suffix.length;
      });
    },
  });
}
