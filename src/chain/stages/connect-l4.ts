// Stage `connect-l4` (CONNECT): the decision for host:port with the connection's identity; a denial is the 403 whose
// next_steps say what policy entry would allow it.

import { formatAuthority } from '../../net/host.js';
import { connectPolicyDenial } from '../denials.js';
import type { ProxyMetrics } from '../../proxy/metrics.js';
import { createL4Decisions } from '../l4-decisions.js';
import { timedDecide } from '../timing.js';
import type { ConnectionRequest } from '../connection.js';
import { identityFinding } from '../identity-gate.js';
import { CONTINUE, denied, type Stage } from '../stage.js';

export function createConnectL4Stage(deps: { readonly metrics: Pick<ProxyMetrics, 'now' | 'decisionSeconds'> }): Stage<ConnectionRequest> {
  const { metrics } = deps;
  // The l4 stage's memo: a CONNECT intent holds the same claims (host, port, identity; the adapter decides nothing).
  const decideL4 = createL4Decisions(timedDecide(metrics));
  return {
    name: 'connect-l4',
    run(c) {
      const host = c.host as string;
      const port = c.port as number;
      const policy = c.policy!;
      const decision = decideL4(policy, { adapter: 'connect', host, port, identity: c.identity });
      c.decision = decision;
      c.endpoint = decision.endpoint;
      if (decision.verdict !== 'deny') return CONTINUE;
      const denial = connectPolicyDenial(host, port, formatAuthority(host, port), decision, { policy, adapter: 'connect' });
      return denied(denial, decision.reason, decision.detail, identityFinding(decision));
    },
  };
}
