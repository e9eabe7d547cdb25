// Stage `connection-middleware`: a connection to a host network middlewares select is inspected (TLS terminated, each
// request through the request chain), or, when nothing of it can be read (tls: skip, raw TCP), refused for an entry
// whose on_uninspectable is deny and otherwise relayed, the adapter adding a finding (chain/middleware-route.ts).

import { formatAuthority } from '../../net/host.js';
import type { ConnectionRequest } from '../connection.js';
import { middlewareUninspectableDenial } from '../middleware-denials.js';
import { middlewareRoute } from '../middleware-route.js';
import { CONTINUE, denied, type Stage } from '../stage.js';

export function createConnectionMiddlewareStage(): Stage<ConnectionRequest> {
  return {
    name: 'connection-middleware',
    run(c) {
      const route = middlewareRoute(c.policy!, c.decision!, c.host as string);
      c.middlewareRoute = route;
      if (route === 'inspect') c.inspect = true;
      if (route !== 'refuse') return CONTINUE;
      const target = formatAuthority(c.host as string, c.port as number);
      return denied(middlewareUninspectableDenial(target), 'middleware-uninspectable', `${target} is selected by a network middleware that cannot inspect it`);
    },
  };
}
