// Stage `identity`: the processes holding the request's connection (docs/identity.md#kept-alive-connections). Where an
// endpoint at the request's host and port lists binaries, the connection is looked up again for every request (the one
// wait), so a request is decided by whoever holds the connection when it arrives; elsewhere nothing is asked. Also
// takes the policy every later stage decides against.

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
      const socket = r.tunnel === undefined ? r.wire.socket : r.tunnel.socket;
      const policy = store.current();
      // Most policies never need a process: their requests pay for nothing here.
      if (gate === undefined || socket === undefined || !gate.watches(policy)) return settle(r);
      const lookup = gate.beforeRequest(socket, policy, r.host as string, r.port as number);
      return lookup === undefined ? settle(r) : lookup.then(() => settle(r));
    },
  };
}
