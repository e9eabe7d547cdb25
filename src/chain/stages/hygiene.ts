// Stage `hygiene`: header tricks refused on every route, L4 ones too, before anything is decided: a header name that
// folds into a framing header on some origin (docs/destinations.md#framing-header-lookalikes), and an h2c upgrade
// (cleartext HTTP/2 is taken by prior knowledge only, docs/destinations.md#http2).

import { framingLookalike } from '../../http1/framing.js';
import { redactPlaceholders } from '../../credentials/placeholder.js';
import { framingLookalikeDenial, unsupportedL7Denial } from '../denials.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, type Stage } from '../stage.js';

/** The request target's path, placeholders shown as `[CREDENTIAL]`: what an event may say of a request not canonicalised. */
export function shownRawPath(target: string): string {
  const q = target.indexOf('?');
  return redactPlaceholders(q < 0 ? target : target.slice(0, q));
}

export function createHygieneStage(): Stage<ChainRequest> {
  return {
    name: 'hygiene',
    run(r) {
      const lookalike = framingLookalike(r.wire.rawHeaders);
      if (lookalike !== undefined) {
        r.path = shownRawPath(r.target);
        return denied(framingLookalikeDenial(lookalike), 'framing-header-lookalike', `a header name folds into ${lookalike}`);
      }
      if (r.framing?.upgrade?.includes('h2c') === true) {
        r.path = shownRawPath(r.target);
        return denied(unsupportedL7Denial('h2c upgrades are not supported'), 'unsupported-l7-protocol', 'h2c upgrade refused');
      }
      return CONTINUE;
    },
  };
}
