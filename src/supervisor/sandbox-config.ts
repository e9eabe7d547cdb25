// What one sandbox's boundaries are given: its policy from the library, the credential grants serialised for the
// wire (once per credentials revision) and the control settings. Reads only; never pushes or admits.

import type { ControlSettings, WireProvider } from '../control/messages.js';
import type { FileCredentialSource } from '../credentials/file-source.js';
import type { CredentialSet } from '../credentials/set.js';
import { canonicalJson, sha256Hex } from '../policy/canonical.js';
import type { ConfigLookup } from './context.js';
import type { PolicyLibrary } from './library.js';

interface SandboxConfigs {
  configFor(sandboxId: string): ConfigLookup;
  /** The credential grants alone: a replica pushes its own, whichever replica published the policy. */
  credentials(): { readonly providers: readonly WireProvider[]; readonly hash: string };
}

export function createSandboxConfigs(options: {
  library: PolicyLibrary;
  /** Read on every call: the source exists only once start() has loaded the credentials file. */
  credentials: () => FileCredentialSource | undefined;
  settings: ControlSettings;
}): SandboxConfigs {
  const { library, settings } = options;
  let wire: { revision: number; providers: readonly WireProvider[]; hash: string } | undefined;

  function wireCredentials(): { providers: readonly WireProvider[]; hash: string } {
    const set: CredentialSet | undefined = options.credentials()?.current();
    const revision = set?.revision ?? 0;
    if (wire?.revision === revision) return wire;
    // The one place values leave their Secret: serialised for the mTLS channel to the boundary.
    const providers: WireProvider[] = [...(set?.providers.values() ?? [])].map((provider) => ({
      name: provider.name,
      env: Object.fromEntries([...provider.keys].map(([name, secret]) => [name, secret.reveal()])),
      endpoints: provider.endpoints.map((e) => (e.path === undefined ? { host: e.host, port: e.port } : { host: e.host, port: e.port, path: e.path })),
    }));
    wire = { revision, providers, hash: sha256Hex(canonicalJson(providers)) };
    return wire;
  }

  function configFor(sandboxId: string): ConfigLookup {
    const found = library.lookup(sandboxId);
    if (!found.ok) return { ok: false, refusal: { kind: 'refused', code: found.code, message: found.message, retryable: true } };
    const creds = wireCredentials();
    return {
      ok: true,
      config: { policyText: found.policy.text, policyHash: found.policy.hash, providers: creds.providers, credentialsHash: creds.hash, settings },
    };
  }

  return { configFor, credentials: wireCredentials };
}
