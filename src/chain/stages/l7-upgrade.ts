// Stage `l7-upgrade`: a graphql, json-rpc or mcp endpoint never takes a protocol upgrade. A request carrying an
// `Upgrade` header, whatever its value (WebSocket included, with or without `Connection: upgrade`), is refused 403
// `unsupported_l7_protocol` before its body is held and before policy is asked, under audit too: what would follow
// the upgrade is not the protocol the endpoint's rules read (docs/policy.md#protocol-upgrades).

import { unsupportedL7Denial } from '../denials.js';
import { bodyHold, INSPECTED_PROTOCOL_NAMES } from '../inspected-body.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, type Stage } from '../stage.js';

export function createL7UpgradeStage(): Stage<ChainRequest> {
  return {
    name: 'l7-upgrade',
    run(r) {
      if (!r.inspected || r.framing?.upgrade === undefined) return CONTINUE;
      // The endpoint the request goes to, as the body hold picks it: the most specific inspected selector of the path.
      const hold = bodyHold(r.l4!.endpoints, r.path as string);
      if (hold === undefined) return CONTINUE;
      const name = INSPECTED_PROTOCOL_NAMES[hold.protocol];
      const via = hold.protocol === 'graphql' ? '; GraphQL over WebSocket needs a protocol: websocket endpoint on another path or port' : '';
      const detail = `${name} endpoints do not take protocol upgrades: the request carries an Upgrade header${via}`;
      return denied(unsupportedL7Denial(detail), 'unsupported-l7-protocol', detail);
    },
  };
}
