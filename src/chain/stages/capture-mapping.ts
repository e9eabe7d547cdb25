// Stage `capture-mapping` (transparent capture): the accepted socket's local address names a synthetic mapping
// (docs/destinations.md#transparent-capture); a live one gives the name and port the connection is decided for.

import type { SyntheticPool } from '../../net/synthetic.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, type Stage } from '../stage.js';

export function createCaptureMappingStage(deps: { readonly pool: SyntheticPool }): Stage<ConnectionRequest> {
  const { pool } = deps;
  return {
    name: 'capture-mapping',
    run(c) {
      c.port = c.syntheticPort;
      const found = pool.lookup(c.syntheticIp);
      c.lookup = found;
      if (found.state !== 'missing') c.mapping = found.mapping;
      if (found.state === 'live') c.host = found.mapping.name;
      return CONTINUE;
    },
  };
}
