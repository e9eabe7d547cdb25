// Stage `upgrade`: a protocol upgrade is relayed only where it can be: a WebSocket handshake on a websocket endpoint
// or an L4 one (whose frames pass raw). Anything else is refused, since what follows it could not be inspected; a
// request whose adapter cannot take an upgrade at all (the 'request' path) is a bad request.

import { needsInspection } from '../inspection.js';
import { unsupportedL7Denial } from '../denials.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, refusal, type Stage } from '../stage.js';

export function createUpgradeStage(): Stage<ChainRequest> {
  return {
    name: 'upgrade',
    run(r) {
      const upgrade = r.framing?.upgrade;
      if (upgrade === undefined) return CONTINUE;
      if (!r.upgradable) return refusal('deny', 'bad-request', `upgrade to ${upgrade} arrived as a plain request`, 400);
      const endpoint = r.decision?.endpoint;
      if (upgrade !== 'websocket' || (endpoint !== undefined && needsInspection(endpoint) && endpoint.protocol !== 'websocket')) {
        const detail = `upgrade to ${upgrade} is not allowed on this endpoint`;
        return denied(unsupportedL7Denial(detail), 'unsupported-l7-protocol', detail);
      }
      return CONTINUE;
    },
  };
}
