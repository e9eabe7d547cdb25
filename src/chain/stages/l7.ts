// Stage `l7`: the request-level decision on an inspected route: method, canonical path, query and what the body hold
// read. The stricter of two readings stands where an origin could act on either: the path as Windows/IIS read it
// (docs/policy.md#trailing-dots-and-spaces) and a method-override header's method (docs/destinations.md#method-override-headers).
// Then the target that goes upstream is the canonical one.

import type { Decision } from '../../policy/types.js';
import { methodOverrideDenial } from '../denials.js';
import { methodOverride } from '../method-override.js';
import type { ProxyMetrics } from '../../proxy/metrics.js';
import { timedDecide } from '../timing.js';
import { refusedEscape } from '../path.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, refusal, type Stage } from '../stage.js';

/** A deny from either wins, then an audit; on a tie the first reading's decision stands. */
export function stricter(first: Decision, second: Decision): Decision {
  if (first.verdict === 'deny') return first;
  if (second.verdict === 'deny') return second;
  return first.verdict === 'allow' && second.verdict === 'audit' ? second : first;
}

export function createL7Stage(deps: { readonly metrics: Pick<ProxyMetrics, 'now' | 'decisionSeconds'> }): Stage<ChainRequest> {
  const { metrics } = deps;
  const decideAs = (r: ChainRequest, method: string): Decision => {
    const { adapter, query, identity } = r;
    const host = r.host as string;
    const port = r.port as number;
    const policy = r.policy!;
    const read = r.read ?? {};
    // Continues from the connection-level allow: the host is matched and the binaries narrowed once per request.
    const after = r.l4;
    const asWritten = timedDecide(metrics, policy, { adapter, host, port, method, path: r.path as string, query, identity, after, ...read });
    if (r.strippedPath === undefined) return asWritten;
    return stricter(asWritten, timedDecide(metrics, policy, { adapter, host, port, method, path: r.strippedPath, query, identity, after, ...read }));
  };
  return {
    name: 'l7',
    run(r) {
      if (!r.canonical) {
        r.decided = true;
        return CONTINUE;
      }
      const canon = r.canon!;
      if (r.inspected) {
        let decision = decideAs(r, r.method);
        // A framework that honours the override acts on its method, so both are decided and both must allow.
        const override = methodOverride(r.wire.rawHeaders);
        if (override !== undefined && !override.ok) {
          return denied(methodOverrideDenial(override.problem), 'method-override-invalid', `method override refused: ${override.problem}`);
        }
        if (override !== undefined && override.method !== r.method) {
          const overridden = decideAs(r, override.method);
          const standing = stricter(decision, overridden);
          if (standing === overridden) r.decidedMethod = override.method;
          decision = standing;
          r.overrideMethod = override.method;
        }
        r.decision = decision;
      }
      const kept = refusedEscape(canon, r.decision?.endpoint);
      if (kept !== undefined) return refusal('deny', 'bad-request', `request target refused: ${kept}`, 400);
      r.target = canon.query === '' ? canon.path : `${canon.path}?${canon.query}`;
      r.decided = true;
      return CONTINUE;
    },
  };
}
