// Stage `connect-destination` (CONNECT): the name resolved once, through the one upstream-lookup gate, and every
// answer validated for the endpoint (docs/destinations.md#validation-plans); only what survives is dialled. SSRF is
// checked before the CA (a missing CA never hides an SSRF refusal).

import { formatAuthority } from '../../net/host.js';
import { isLookupRefused, isResolveFailure } from '../../net/destination.js';
import type { DestinationResult } from '../../net/destination.js';
import { ssrfDenial } from '../denials.js';
import { upstreamUnreachableDenial } from '../upstream-denials.js';
import { lookupRefused } from '../lookup-refusal.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, denied, type Refusal, type Stage } from '../stage.js';
import type { DestinationCheck } from './destination.js';

function checked(c: ConnectionRequest, dest: DestinationResult): Refusal | undefined {
  const target = formatAuthority(c.host as string, c.port as number);
  if (isLookupRefused(dest)) {
    c.lookupRefusal = dest.refusal;
    return lookupRefused(target, dest.refusal);
  }
  if (isResolveFailure(dest)) return denied(upstreamUnreachableDenial(target, dest.failure), 'resolve-failed', dest.message);
  const dropped = dest.dropped.map((d) => `${d.ip} ${d.class}`);
  if (!dest.ok) {
    c.destinationFacts = { plan: dest.plan, check: dest.check, dropped };
    return denied(ssrfDenial(target, dest.check, dest.message), 'ssrf-denied', dest.message);
  }
  if (dropped.length > 0) c.destinationFacts = { dropped };
  c.addresses = dest.addresses;
  return CONTINUE;
}

export function createConnectDestinationStage(deps: { readonly check: DestinationCheck }): Stage<ConnectionRequest> {
  const { check } = deps;
  return {
    name: 'connect-destination',
    run(c) {
      const dest = check({ host: c.host as string, kind: c.hostForm!, port: c.port as number, endpoint: c.endpoint, endpoints: c.decision!.endpoints });
      return dest instanceof Promise ? dest.then((d) => checked(c, d)) : checked(c, dest);
    },
  };
}
