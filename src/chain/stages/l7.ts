// Stage `l7`: the request-level decision on an inspected route: method, canonical path, query and what the body hold
// read. The stricter of two readings stands where an origin could act on either: the path as Windows/IIS read it
// (docs/policy.md#trailing-dots-and-spaces) and a method-override header's method (docs/destinations.md#method-override-headers).
// Then the target that goes upstream is the canonical one.

import type { Decision, EgressIntent } from '../../policy/types.js';
import { methodOverrideDenial } from '../denials.js';
import { methodOverride } from '../method-override.js';
import type { ProxyMetrics } from '../../proxy/metrics.js';
import { createL7Decisions } from '../l7-decisions.js';
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

/** The request as decide() reads it, for `method` and `path`; continues from the connection-level allow (`after`):
 *  the host is matched and the binaries narrowed once per request. Without a body read (most requests) no empty
 *  object is made and spread. */
function intentOf(r: ChainRequest, method: string, path: string): EgressIntent {
  const { adapter, query, identity, read } = r;
  const host = r.host as string;
  const port = r.port as number;
  const after = r.l4;
  if (read === undefined) return { adapter, host, port, method, path, query, identity, after };
  return { adapter, host, port, method, path, query, identity, after, ...read };
}

export function createL7Stage(deps: { readonly metrics: Pick<ProxyMetrics, 'now' | 'decisionSeconds'> }): Stage<ChainRequest> {
  const { metrics } = deps;
  const decideL7 = createL7Decisions(timedDecide(metrics));
  const decideAs = (r: ChainRequest, method: string): Decision => {
    const policy = r.policy!;
    const asWritten = decideL7(policy, intentOf(r, method, r.path as string));
    if (r.strippedPath === undefined) return asWritten;
    return stricter(asWritten, decideL7(policy, intentOf(r, method, r.strippedPath)));
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
