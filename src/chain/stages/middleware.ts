// Stage `middleware`: the network middlewares the destination host selects (docs/policy.md#network-middlewares), run
// after policy allowed the request (audit included) and before credentials are written into it: a request's body
// through each entry in order (chain/middleware-request.ts); a WebSocket upgrade's entries kept for its client text
// messages (proxy/ws-relay.ts); a streamed body, which no entry can hold, refused or passed by on_uninspectable. The
// last two are first shown to the entries that read a head alone (the reverse canary).

import type { BoundMiddleware } from '../../middleware/implementation.js';
import type { MiddlewareRegistry } from '../../middleware/registry.js';
import { middlewareRequestOf, type MiddlewareRunDeps, requestView, runHeadChecks, runRequestMiddlewares, uninspectableBody } from '../middleware-request.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, type Stage } from '../stage.js';

function websocketUpgrade(r: ChainRequest, registry: MiddlewareRegistry): undefined {
  const bound: BoundMiddleware[] = [];
  const request = middlewareRequestOf(r);
  for (const entry of r.policy!.middlewaresFor(r.host as string)) {
    const implementation = registry.implementationFor(entry);
    // Only an implementation bound to client text messages reads them (a service that described that binding).
    if (implementation?.bindings.has('websocket-message') === true) bound.push({ entry, implementation, view: requestView(r, entry, request) });
  }
  r.websocketMiddlewares = bound;
  return CONTINUE;
}

export function createMiddlewareStage(deps: MiddlewareRunDeps): Stage<ChainRequest> {
  return {
    name: 'middleware',
    run(r) {
      const entries = r.policy!.middlewaresFor(r.host as string);
      if (entries.length === 0) return CONTINUE;
      if (r.framing?.upgrade === 'websocket') return runHeadChecks(r, entries, deps.registry) ?? websocketUpgrade(r, deps.registry);
      if (r.streamed && (r.framing?.hasBody === true || r.bodyFollows)) return runHeadChecks(r, entries, deps.registry) ?? uninspectableBody(r, entries);
      return runRequestMiddlewares(r, entries, deps);
    },
  };
}
