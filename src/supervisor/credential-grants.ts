// Which credential providers a sandbox's policy binds (docs/credentials.md#what-a-sandbox-is-given): those an
// endpoint names in credential_binding, and those whose own endpoints a policy endpoint reaches (a name both host
// patterns can match, on a port both list). The supervisor gives a sandbox these and no others. Pure.

import type { CredentialProvider } from '../credentials/set.js';
import { normaliseHost } from '../net/host.js';
import { compileHostPattern, type HostMatcher, hostPatternsOverlap } from '../policy/match.js';
import type { Policy } from '../policy/types.js';

/** What of a policy decides its credential grants: kept per policy hash instead of the compiled policy. */
export interface PolicyReach {
  /** Providers named by an endpoint's credential_binding. */
  readonly bindings: ReadonlySet<string>;
  /** Each distinct host pattern the policy allows (the hostless form included), with every port it allows. */
  readonly hosts: readonly { readonly matcher: HostMatcher; readonly ports: ReadonlySet<number> }[];
}

export function policyReach(policy: Pick<Policy, 'endpoints'>): PolicyReach {
  const bindings = new Set<string>();
  const hosts = new Map<string, { matcher: HostMatcher; ports: Set<number> }>();
  for (const endpoint of policy.endpoints) {
    if (endpoint.credentialProvider !== undefined) bindings.add(endpoint.credentialProvider);
    const key = `${endpoint.hostKind} ${endpoint.host ?? ''}`;
    let entry = hosts.get(key);
    if (entry === undefined) {
      entry = { matcher: compileHostPattern(endpoint.host, endpoint.hostKind), ports: new Set() };
      hosts.set(key, entry);
    }
    for (const port of endpoint.ports) entry.ports.add(port);
  }
  return Object.freeze({ bindings, hosts: Object.freeze([...hosts.values()]) });
}

/** A provider endpoint's host as the policy's matcher reads it: the same normalisation credentials/set.ts matches with. */
function providerHostMatcher(host: string): HostMatcher | undefined {
  if (host.includes('*')) return compileHostPattern(host.toLowerCase().replace(/\.$/, ''), 'wildcard');
  const normal = normaliseHost(host);
  if (!normal.ok) return undefined;
  return compileHostPattern(normal.host, normal.kind === 'name' ? 'exact' : 'ip');
}

function reaches(reach: PolicyReach, provider: CredentialProvider): boolean {
  if (reach.bindings.has(provider.name)) return true;
  for (const endpoint of provider.endpoints) {
    const matcher = providerHostMatcher(endpoint.host);
    if (matcher === undefined) continue;
    for (const allowed of reach.hosts) {
      if (allowed.ports.has(endpoint.port) && hostPatternsOverlap(allowed.matcher, matcher)) return true;
    }
  }
  return false;
}

/** The providers `reach` binds, in the order given. */
export function providersBoundBy(reach: PolicyReach, providers: Iterable<CredentialProvider>): CredentialProvider[] {
  const bound: CredentialProvider[] = [];
  for (const provider of providers) if (reaches(reach, provider)) bound.push(provider);
  return bound;
}
