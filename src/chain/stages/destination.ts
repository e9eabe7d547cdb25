// Stage `destination`: where an allowed request may go. A request in a tunnel goes to the tunnel's pinned addresses,
// checked when it opened. A forward request's name is resolved once, through the one upstream-lookup gate, and every
// answer validated for the endpoint (docs/destinations.md#validation-plans); only what survives is dialled.

import { formatAuthority } from '../../net/host.js';
import { isLookupRefused, isResolveFailure } from '../../net/destination.js';
import type { DestinationTarget } from '../../proxy/context.js';
import type { DestinationResult } from '../../net/destination.js';
import { ssrfDenial } from '../denials.js';
import { upstreamUnreachableDenial } from '../upstream-denials.js';
import { lookupRefused } from '../lookup-refusal.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, type Refusal, type Stage } from '../stage.js';

/** The SSRF check of a destination: its result now when nothing must be resolved, else a promise of it. */
export type DestinationCheck = (target: DestinationTarget) => DestinationResult | Promise<DestinationResult>;

function droppedFacts(dropped: readonly { readonly ip: string; readonly class: string }[]): string[] {
  return dropped.map((d) => `${d.ip} ${d.class}`);
}

function checked(r: ChainRequest, dest: DestinationResult): Refusal | undefined {
  const host = r.host as string;
  const port = r.port as number;
  if (isLookupRefused(dest)) {
    r.lookupRefusal = dest.refusal;
    return lookupRefused(formatAuthority(host, port), dest.refusal);
  }
  if (isResolveFailure(dest)) return denied(upstreamUnreachableDenial(formatAuthority(host, port), dest.failure), 'resolve-failed', dest.message);
  if (!dest.ok) {
    r.destinationFacts = { plan: dest.plan, check: dest.check, dropped: droppedFacts(dest.dropped) };
    return denied(ssrfDenial(formatAuthority(host, port), dest.check, dest.message), 'ssrf-denied', dest.message);
  }
  if (dest.dropped.length > 0) r.destinationFacts = { dropped: droppedFacts(dest.dropped) };
  r.destination = { addresses: dest.addresses, tls: false };
  return CONTINUE;
}

export function createDestinationStage(deps: { readonly check: DestinationCheck }): Stage<ChainRequest> {
  const { check } = deps;
  return {
    name: 'destination',
    run(r) {
      const tunnel = r.tunnel;
      if (tunnel !== undefined) {
        r.destination = { addresses: tunnel.addresses, tls: tunnel.tls };
        return CONTINUE;
      }
      const decision = r.decision!;
      const target = { host: r.host as string, kind: r.hostForm!, port: r.port as number, endpoint: decision.endpoint, endpoints: decision.endpoints };
      const dest = check(target);
      return dest instanceof Promise ? dest.then((d) => checked(r, d)) : checked(r, dest);
    },
  };
}
