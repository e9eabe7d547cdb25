// Stage `connect-head` (CONNECT): the request line and head. A CONNECT inside a tunnel would nest tunnels with no
// decision of their own; an oversized head is a 431; the target is a strict host:port authority.

import { MAX_HEADER_COUNT } from '../../http1/framing.js';
import { type HostCache, parseAuthority } from '../../net/host.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, refusal, type Stage } from '../stage.js';

/** docs/destinations.md#limits: a CONNECT head beyond this is a 431. */
export const MAX_CONNECT_HEAD_BYTES = 8_192;

function headBytes(c: ConnectionRequest): number {
  let n = c.url.length + 19;
  for (const part of c.rawHeaders) n += part.length + 2;
  return n + 2;
}

export function createConnectHeadStage(deps: { readonly hosts: HostCache | undefined; readonly inTunnel: (c: ConnectionRequest) => boolean }): Stage<ConnectionRequest> {
  const { hosts, inTunnel } = deps;
  return {
    name: 'connect-head',
    run(c) {
      if (inTunnel(c)) return refusal('deny', 'bad-request', 'CONNECT inside a tunnel', 400);
      if (headBytes(c) > MAX_CONNECT_HEAD_BYTES || c.rawHeaders.length / 2 > MAX_HEADER_COUNT) return refusal('deny', 'head-too-large', 'CONNECT head too large', 431);
      const auth = parseAuthority(c.url, { hosts });
      if (!auth.ok) return refusal('deny', 'bad-request', `bad CONNECT target: ${auth.message}`, 400);
      c.host = auth.host;
      c.port = auth.port;
      c.hostForm = auth.kind;
      return CONTINUE;
    },
  };
}
