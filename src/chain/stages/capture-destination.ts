// Stage `capture-destination` (transparent capture): the real addresses pinned when DNS answered, validated against
// the endpoint again now. Never resolves; an address inside boundary's own synthetic window would lead straight back
// into capture, so it is dropped.

import { validateDestination, type SelfAddresses } from '../../net/ssrf.js';
import type { SyntheticPool } from '../../net/synthetic.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, refusal, type Stage } from '../stage.js';

export function createCaptureDestinationStage(deps: {
  readonly pool: SyntheticPool;
  readonly allowLoopback: boolean;
  readonly selfAddresses: () => SelfAddresses;
}): Stage<ConnectionRequest> {
  const { pool, allowLoopback, selfAddresses } = deps;
  return {
    name: 'capture-destination',
    run(c) {
      const route = c.mappingRoute!;
      const dest = validateDestination({
        endpoint: c.endpoint,
        host: c.host as string,
        port: c.port as number,
        addresses: route.addresses.filter((a) => !pool.contains(a)),
        allowLoopback,
        selfAddresses: selfAddresses(),
      });
      if (!dest.ok) {
        c.destinationFacts = { check: dest.check, dropped: [] };
        return refusal('deny', 'ssrf-denied', dest.message, undefined);
      }
      c.addresses = dest.addresses;
      return CONTINUE;
    },
  };
}
