// Stage `l4`: the connection-level decision for host:port with the request's identity. Which endpoints match decides
// whether the request is inspected at all: an L7 protocol, or a route that carries credentials (whose path is
// canonicalised even on an L4 endpoint, so a provider's path globs see what the upstream acts on).

import type { CredentialSource } from '../../credentials/source.js';
import { needsInspection } from '../inspection.js';
import { routeHasCredentials } from '../credential-injection.js';
import type { ProxyMetrics } from '../../proxy/metrics.js';
import { createL4Decisions } from '../l4-decisions.js';
import { timedDecide } from '../timing.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, type Stage } from '../stage.js';

export function createL4Stage(deps: {
  readonly metrics: Pick<ProxyMetrics, 'now' | 'decisionSeconds'>;
  readonly credentials: CredentialSource;
}): Stage<ChainRequest> {
  const { metrics, credentials } = deps;
  const decideL4 = createL4Decisions(timedDecide(metrics));
  return {
    name: 'l4',
    run(r) {
      const host = r.host as string;
      const port = r.port as number;
      const l4 = decideL4(r.policy!, { adapter: r.adapter, host, port, identity: r.identity });
      r.l4 = l4;
      r.decision = l4;
      if (l4.verdict !== 'deny') {
        r.inspected = l4.endpoints.some(needsInspection);
        r.canonical = r.inspected || routeHasCredentials(credentials, l4, host, port);
      }
      return CONTINUE;
    },
  };
}
