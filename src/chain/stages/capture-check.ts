// Stage `capture-check` (transparent capture): the current policy must still allow (name, port) through an endpoint
// that made the name eligible (checkCapture); a mapping from an older generation stays usable
// exactly as long as the new policy allows it.

import type { Mapping, MappingRoute, SyntheticLookup } from '../../net/synthetic.js';
import type { IdentityClaim } from '../../policy/binary-identity.js';
import { decide } from '../../policy/decide.js';
import type { Decision, Endpoint, Policy } from '../../policy/types.js';
import type { ConnectionRequest } from '../connection.js';
import { identityFinding } from '../identity-gate.js';
import type { OutcomeReason, ReasonCode } from '../events.js';
import { CONTINUE, refusal, type Stage } from '../stage.js';

/** Metric `reason` labels capture adds to the proxy's closed sets. */
export const CAPTURE_REASONS = ['mapping-missing', 'mapping-expired', 'stale-policy', 'port-mismatch', 'destination-denied'] as const satisfies readonly OutcomeReason[];

type CaptureCheck =
  | { readonly ok: true; readonly mapping: Mapping; readonly route: MappingRoute; readonly decision: Decision; readonly endpoint: Endpoint }
  | {
      readonly ok: false;
      readonly reason: ReasonCode;
      readonly message: string;
      readonly mapping?: Mapping;
      readonly decision?: Decision;
    };

/**
 * Steps 1-4 of docs/destinations.md#transparent-capture, pure: the mapping the local address names, and whether the current policy still
 * allows (name, port) through an endpoint that made the name eligible. A mapping from an older policy
 * generation stays usable exactly as long as the new policy allows it.
 */
export function checkCapture(policy: Policy, found: SyntheticLookup, port: number, identity?: IdentityClaim): CaptureCheck {
  if (found.state === 'missing') {
    return { ok: false, reason: 'mapping-missing', message: 'no synthetic mapping for this address in this epoch' };
  }
  const { mapping } = found;
  if (found.state === 'expired') {
    return { ok: false, reason: 'mapping-expired', message: `mapping for ${mapping.name} expired`, mapping };
  }
  const route = mapping.routes.find((r) => r.port === port);
  if (route === undefined) {
    return { ok: false, reason: 'port-mismatch', message: `port ${port} is not in the mapping of ${mapping.name}`, mapping };
  }
  const decision = decide(policy, { adapter: 'capture', host: mapping.name, port, identity });
  const inSet = (e: Endpoint | undefined): e is Endpoint => e !== undefined && route.endpointIds.includes(e.id);
  const endpoint = decision.verdict === 'deny' ? undefined : inSet(decision.endpoint) ? decision.endpoint : decision.endpoints.find(inSet);
  if (endpoint === undefined) {
    const stale = mapping.policyGeneration !== policy.generation;
    return {
      ok: false,
      reason: stale ? 'stale-policy' : decision.verdict === 'deny' ? decision.reason : 'destination-denied',
      message: decision.verdict === 'deny' ? decision.detail : `no endpoint of the decision made ${mapping.name} eligible (DNS correlation)`,
      mapping,
      decision,
    };
  }
  return { ok: true, mapping, route, decision, endpoint };
}

/** The ports of a mapping that the policy still allows: the listeners that should exist. */
export function allowedPorts(policy: Policy, mapping: Mapping): number[] {
  return mapping.ports.filter((port) => checkCapture(policy, { state: 'live', mapping }, port).ok);
}

export function createCaptureCheckStage(): Stage<ConnectionRequest> {
  return {
    name: 'capture-check',
    run(c) {
      const check = checkCapture(c.policy!, c.lookup!, c.syntheticPort, c.identity);
      if (check.mapping !== undefined) c.host = check.mapping.name;
      if (check.decision !== undefined) c.decision = check.decision;
      if (!check.ok) return refusal('deny', check.reason, check.message, undefined, { finding: check.decision === undefined ? undefined : identityFinding(check.decision) });
      c.mappingRoute = check.route;
      c.endpoint = check.endpoint;
      return CONTINUE;
    },
  };
}
