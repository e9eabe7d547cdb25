// Stage `always-blocked` (requests and CONNECT): a destination no policy entry can open (a metadata or local name, an
// IP literal in an always-blocked class, boundary's own listener) is refused as such before policy is asked, so its
// denial says the refusal is permanent and never proposes an entry (docs/destinations.md#always-blocked).

import { formatAuthority } from '../../net/host.js';
import type { PermanentCheck } from '../../net/destination.js';
import { ssrfDenial } from '../denials.js';
import type { DestinationFacts } from '../request.js';
import { CONTINUE, denied, type Refusal, type Stage } from '../stage.js';

export type { PermanentCheck } from '../../net/destination.js';

interface Destined {
  readonly host: string | undefined;
  readonly port: number | undefined;
  destinationFacts: DestinationFacts | undefined;
}

function refuseForever<R extends Destined>(r: R, permanent: PermanentCheck): Refusal | undefined {
  const host = r.host as string;
  const port = r.port as number;
  const found = permanent(host, port);
  if (found === undefined) return CONTINUE;
  r.destinationFacts = { check: found.check, dropped: [`${host} ${found.addressClass}`] };
  return denied(ssrfDenial(formatAuthority(host, port), found.check, found.message), 'ssrf-denied', found.message);
}

export function createAlwaysBlockedStage<R extends Destined>(deps: { readonly permanent: PermanentCheck }): Stage<R> {
  const { permanent } = deps;
  return { name: 'always-blocked', run: (r) => refuseForever(r, permanent) };
}
