// Stage `verdict`: the decision that stands, turned into an answer when it denies: the L7 body (field-compatible with
// OpenShell) or the forward proxy's, or a JSON-RPC error per request id so an MCP session goes on
// (docs/policy.md#denials-as-json-rpc-errors). An allow or audit continues towards the upstream.

import { formatAuthority } from '../../net/host.js';
import { percentDecode } from '../../policy/query.js';
import { redactPlaceholders } from '../../credentials/placeholder.js';
import { type Denial, forwardPolicyDenial, l7PolicyDenial, unsupportedL7Denial } from '../denials.js';
import { jsonRpcDenial } from '../jsonrpc-denial.js';
import { replayQueryKeys } from '../../telemetry/replay.js';
import { identityFinding } from '../identity-gate.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, type Stage } from '../stage.js';

export function createVerdictStage(): Stage<ChainRequest> {
  return {
    name: 'verdict',
    run(r) {
      const decision = r.decision!;
      if (decision.verdict !== 'deny') return CONTINUE;
      const { detail } = decision;
      const target = r.target;
      const q = target.indexOf('?');
      // Keys only, for the denial's replay fields: a query value may carry anything, a secret included.
      if (q >= 0) r.queryKeys = replayQueryKeys(target.slice(q + 1).replace(/#.*$/s, ''), percentDecode, redactPlaceholders);
      if (decision.reason === 'unsupported-l7-protocol') return denied(unsupportedL7Denial(detail), decision.reason, detail);
      const host = r.host as string;
      const port = r.port as number;
      const path = r.path ?? '/';
      const request = { policy: r.policy!, adapter: r.adapter };
      const policyDenial = (): Denial =>
        decision.layer === 'l7'
          ? l7PolicyDenial({ method: r.decidedMethod, path, host, port }, decision, request)
          : forwardPolicyDenial(r.method, formatAuthority(host, port), path, decision, { ...request, host, port });
      const read = r.read;
      const denial = read !== undefined && 'jsonRpc' in read ? jsonRpcDenial(read.jsonRpc, decision, policyDenial) : policyDenial();
      return denied(denial, decision.reason, detail, identityFinding(decision));
    },
  };
}
