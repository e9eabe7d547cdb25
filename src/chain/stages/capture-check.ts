// Stage `capture-check` (transparent capture): the current policy must still allow (name, port) through an endpoint
// that made the name eligible (checkCapture, proxy/capture.ts); a mapping from an older generation stays usable
// exactly as long as the new policy allows it.

import { checkCapture } from '../../proxy/capture.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, refusal, type Stage } from '../stage.js';

export function createCaptureCheckStage(): Stage<ConnectionRequest> {
  return {
    name: 'capture-check',
    run(c) {
      const check = checkCapture(c.policy!, c.lookup!, c.syntheticPort, c.identity);
      if (check.mapping !== undefined) c.host = check.mapping.name;
      if (check.decision !== undefined) c.decision = check.decision;
      if (!check.ok) return refusal('deny', check.reason, check.message, undefined);
      c.mappingRoute = check.route;
      c.endpoint = check.endpoint;
      return CONTINUE;
    },
  };
}
