// Stage `canonical`: the request target as the upstream will act on it (docs/policy.md#path-canonicalisation) on
// inspected and credentialed routes: escapes decoded, dot segments resolved, lookalikes refused. Policy and logs
// see `[CREDENTIAL]` where a placeholder stands. Elsewhere the target goes as received, only a fragment refused.

import { redactPlaceholders } from '../../credentials/placeholder.js';
import { canonicalTarget, escapeOptionsOf } from '../path.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, refusal, type Stage } from '../stage.js';
import { shownRawPath } from './hygiene.js';

export function createCanonicalStage(): Stage<ChainRequest> {
  return {
    name: 'canonical',
    run(r) {
      if (!r.canonical) {
        if (r.target.includes('#')) return refusal('deny', 'bad-request', 'request target refused: fragment', 400);
        r.path = shownRawPath(r.target);
        return CONTINUE;
      }
      const canon = canonicalTarget(r.target, escapeOptionsOf(r.l4!.endpoints));
      if (!canon.ok) return refusal('deny', 'bad-request', `request target refused: ${canon.problem}`, 400);
      r.canon = canon;
      r.path = redactPlaceholders(canon.path);
      r.query = redactPlaceholders(canon.query);
      // docs/policy.md#trailing-dots-and-spaces: Windows and IIS read `/admin.` as `/admin`; that reading is decided too.
      r.strippedPath = canon.strippedPath === undefined ? undefined : redactPlaceholders(canon.strippedPath);
      return CONTINUE;
    },
  };
}
