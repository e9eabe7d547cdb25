// Stage `connection-identity`: the policy the connection is decided against, and the process behind it, looked up
// only when an endpoint at its host and port lists binaries (docs/identity.md); one lookup for the whole tunnel.

import type { PolicyStore } from '../../policy/store.js';
import type { IdentityGate } from '../identity-gate.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, type Stage } from '../stage.js';

export function createConnectionIdentityStage(deps: { readonly store: PolicyStore; readonly identity: IdentityGate | undefined }): Stage<ConnectionRequest> {
  const { store, identity } = deps;
  return {
    name: 'connection-identity',
    run(c) {
      const policy = store.current();
      c.policy = policy;
      // A capture without a live mapping has no name to look up for: its check refuses it next.
      if (identity === undefined || c.host === undefined) return CONTINUE;
      return identity.forDestination(c.socket, policy, c.host, c.port as number).then((claim) => {
        c.identity = claim;
        return CONTINUE;
      });
    },
  };
}
