// Stage `connection-route`: whether the connection is inspected (TLS terminated, each request decided): an L7
// protocol's endpoint, or a route that carries credentials, whose placeholders are then rewritten or refused per
// request even on an L4 endpoint (docs/credentials.md#inspectable-routes-only).

import type { CredentialSource } from '../../credentials/source.js';
import { decisionNeedsInspection } from '../inspection.js';
import { credentialRoute } from '../credential-injection.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, type Stage } from '../stage.js';

export function createConnectionRouteStage(deps: { readonly credentials: CredentialSource }): Stage<ConnectionRequest> {
  const { credentials } = deps;
  return {
    name: 'connection-route',
    run(c) {
      const decision = c.decision!;
      c.credentialRoute = credentialRoute(credentials, decision, c.host as string, c.port as number);
      c.inspect = decisionNeedsInspection(decision) || c.credentialRoute === 'inspect';
      return CONTINUE;
    },
  };
}
