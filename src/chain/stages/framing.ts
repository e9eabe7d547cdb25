// Stage `framing`: the head's framing as HTTP/1.1 reads it (http1/framing.ts), for HTTP/2 streams too once their
// fields are read into the same shape. A request the origin could frame differently is refused before anything else.

import { checkFraming } from '../../http1/framing.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, refusal, type Stage } from '../stage.js';

export function createFramingStage(): Stage<ChainRequest> {
  return {
    name: 'framing',
    run(r) {
      const framing = checkFraming(r.wire.httpVersion, r.wire.rawHeaders);
      if (!framing.ok) return refusal('deny', framing.status === 431 ? 'head-too-large' : 'bad-request', framing.problem, framing.status);
      r.framing = framing;
      return CONTINUE;
    },
  };
}
