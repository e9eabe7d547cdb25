// Stage `identity`: the process behind the request (docs/identity.md#when-a-process-is-looked-up). A tunnel's requests
// carry the tunnel's claim; a forward connection is looked up on its first request that needs it (the one wait),
// and its later requests reuse the claim. Also takes the policy every later stage decides against.

import type { PolicyStore } from '../../policy/store.js';
import { type IdentityGate, requestIdentity } from '../identity-gate.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, type Stage } from '../stage.js';

export function createIdentityStage(deps: { readonly store: PolicyStore; readonly identity: IdentityGate | undefined }): Stage<ChainRequest> {
  const { store, identity: gate } = deps;
  const settle = (r: ChainRequest): undefined => {
    r.policy = store.current();
    r.identity = requestIdentity(gate, r.wire.socket, r.tunnel);
    return CONTINUE;
  };
  return {
    name: 'identity',
    run(r) {
      const socket = r.wire.socket;
      const lookup = r.tunnel === undefined && socket !== undefined ? gate?.ready(socket, store.current()) : undefined;
      return lookup === undefined ? settle(r) : lookup.then(() => settle(r));
    },
  };
}
