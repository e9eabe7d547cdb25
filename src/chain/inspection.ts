// Which endpoints' traffic boundary terminates and parses: an L7 protocol or bound credentials, never `tls: skip`.

import type { Decision, Endpoint } from '../policy/types.js';

/** An endpoint whose traffic must be terminated and parsed: L7 protocol or bound credentials, never tls: skip. */
export function needsInspection(endpoint: Endpoint): boolean {
  return endpoint.tls !== 'skip' && (endpoint.inspected || endpoint.credentialProvider !== undefined);
}

/** `tls: skip` or raw TCP: nothing of the traffic can be read, whatever would need it. */
export function cannotInspect(endpoint: Endpoint): boolean {
  return endpoint.tls === 'skip' || endpoint.protocol === 'tcp';
}

export function decisionNeedsInspection(decision: Decision): boolean {
  return decision.endpoints.some(needsInspection);
}
