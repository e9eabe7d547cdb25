// What one sandbox's boundaries are given: its policy from the library, the credential providers that policy binds
// (credential-grants.ts), serialised for the wire once per policy and credentials revision, and the control
// settings. Reads only; never pushes or admits.

import type { ControlSettings, WireProvider, WireTokenGrant } from '../control/messages.js';
import type { FileCredentialSource } from '../credentials/file-source.js';
import type { TokenGrantInput } from '../credentials/grant.js';
import type { CredentialProvider } from '../credentials/set.js';
import { deliveryOf } from '../credentials/delivered.js';
import { canonicalJson, sha256Hex } from '../policy/canonical.js';
import type { Policy } from '../policy/types.js';
import type { Logger } from '../telemetry/logger.js';
import type { ConfigLookup } from './context.js';
import { type PolicyReach, policyReach, providersBoundBy } from './credential-grants.js';
import { MAX_POLICY_FILES, type PolicyLibrary } from './library.js';

/** Policies whose reach and grants are kept: every file of the library, and as many published by other replicas. */
const MAX_CACHED_POLICIES = 2 * MAX_POLICY_FILES;

/** A policy nothing can be read from binds nothing: its sandbox is given no credentials. */
const NO_REACH: PolicyReach = Object.freeze({ bindings: new Set<string>(), hosts: [] });

export interface Grants {
  readonly providers: readonly WireProvider[];
  readonly hash: string;
}

interface SandboxConfigs {
  configFor(sandboxId: string): ConfigLookup;
  /** The grants of a policy as the store holds it: a replica pushes its own, whichever replica published the policy. */
  grantsFor(policy: { readonly text: string; readonly hash: string }): Grants;
}

/** A Map that keeps its newest `max` entries, a hit counting as new. */
function boundedCache<V>(max: number) {
  const entries = new Map<string, V>();
  return {
    get(key: string): V | undefined {
      const value = entries.get(key);
      if (value !== undefined) {
        entries.delete(key);
        entries.set(key, value);
      }
      return value;
    },
    set(key: string, value: V): void {
      entries.delete(key);
      entries.set(key, value);
      if (entries.size > max) entries.delete(entries.keys().next().value as string);
    },
    clear: () => entries.clear(),
  };
}

function wireProvider(provider: CredentialProvider): WireProvider {
  return {
    ...(provider.grants.length === 0 ? {} : { tokenGrants: provider.grants.map(wireGrant) }),
    name: provider.name,
    // The one place values leave their Secret: serialised for the mTLS channel to the boundary.
    env: Object.fromEntries([...provider.keys].map(([name, secret]) => [name, secret.reveal()])),
    endpoints: provider.endpoints.map((e) => (e.path === undefined ? { host: e.host, port: e.port } : { host: e.host, port: e.port, path: e.path })),
    ...deliveryOf(provider),
  };
}

/** A token grant's definition and secrets for the boundary that runs it (docs/supervisor.md#token-grants). */
function wireGrant(grant: TokenGrantInput): WireTokenGrant {
  const { clientSecret, refreshToken, placement, ...rest } = grant;
  const fields = {
    ...rest,
    // Like env values: revealed only into the message for the mTLS channel.
    clientSecret: clientSecret?.reveal(),
    refreshToken: refreshToken?.reveal(),
    placement: placement === undefined ? undefined : { ...placement },
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as unknown as WireTokenGrant;
}

export function createSandboxConfigs(options: {
  library: PolicyLibrary;
  /** Read on every call: the source exists only once start() has loaded the credentials file. */
  credentials: () => FileCredentialSource | undefined;
  settings: ControlSettings;
  /** For policies this replica's folder does not hold (published by another replica). */
  parsePolicy: (text: string, options?: { source?: string }) => Policy;
  logger: Logger;
}): SandboxConfigs {
  const { library, settings, logger } = options;
  const reaches = boundedCache<PolicyReach>(MAX_CACHED_POLICIES);
  // By policy hash, for `revision` of the credentials only.
  const grants = boundedCache<Grants>(MAX_CACHED_POLICIES);
  let revision = -1;

  function reachOf(policy: { readonly text: string; readonly hash: string; readonly reach?: PolicyReach }): PolicyReach {
    if (policy.reach !== undefined) {
      // The library's own parse: kept, so the same policy read back from the store is not parsed again.
      reaches.set(policy.hash, policy.reach);
      return policy.reach;
    }
    const known = reaches.get(policy.hash);
    if (known !== undefined) return known;
    let reach = NO_REACH;
    try {
      reach = policyReach(options.parsePolicy(policy.text, { source: `stored policy ${policy.hash.slice(0, 12)}` }));
    } catch (err) {
      logger.warn({ policyHash: policy.hash, err: (err as Error).message }, 'a stored policy does not parse here; its sandbox is given no credentials');
    }
    reaches.set(policy.hash, reach);
    return reach;
  }

  function grantsFor(policy: { readonly text: string; readonly hash: string; readonly reach?: PolicyReach }): Grants {
    const set = options.credentials()?.current();
    const current = set?.revision ?? 0;
    if (current !== revision) {
      grants.clear();
      revision = current;
    }
    const cached = grants.get(policy.hash);
    if (cached !== undefined) return cached;
    const providers = set === undefined ? [] : providersBoundBy(reachOf(policy), set.providers.values()).map(wireProvider);
    const made = Object.freeze({ providers, hash: sha256Hex(canonicalJson(providers)) });
    grants.set(policy.hash, made);
    return made;
  }

  function configFor(sandboxId: string): ConfigLookup {
    const found = library.lookup(sandboxId);
    if (!found.ok) return { ok: false, refusal: { kind: 'refused', code: found.code, message: found.message, retryable: true } };
    const { providers, hash } = grantsFor(found.policy);
    return {
      ok: true,
      config: { policyText: found.policy.text, policyHash: found.policy.hash, providers, credentialsHash: hash, settings },
    };
  }

  return { configFor, grantsFor };
}
