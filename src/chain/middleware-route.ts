// What network middlewares make of a connection (CONNECT, transparent capture; docs/policy.md#network-middlewares): a
// host an entry selects is inspected even on an L4 endpoint, so each request inside reaches the middleware stage. A
// route nothing can inspect (tls: skip, raw TCP) is refused when an entry's on_uninspectable is deny, else relayed
// with a detection finding. Pure, but for the finding event it builds.

import type { CredentialSource } from '../credentials/source.js';
import type { Decision, Policy } from '../policy/types.js';
import type { AuditEvent } from '../telemetry/event.js';
import { credentialRoute } from './credential-injection.js';
import type { Outcome } from './events.js';
import { cannotInspect } from './inspection.js';

const MIDDLEWARE_ROUTES = ['none', 'inspect', 'relay-uninspected', 'refuse'] as const;
export type MiddlewareRoute = (typeof MIDDLEWARE_ROUTES)[number];

/** The finding of traffic relayed past entries that could not see it. */
export const UNINSPECTABLE_FINDING = 'middleware-traffic-uninspectable';

export function middlewareRoute(policy: Policy, decision: Decision, host: string): MiddlewareRoute {
  if (decision.verdict === 'deny') return 'none';
  const entries = policy.middlewaresFor(host);
  if (entries.length === 0) return 'none';
  if (!decision.endpoints.some(cannotInspect)) return 'inspect';
  return entries.some((e) => e.onUninspectable === 'deny') ? 'refuse' : 'relay-uninspected';
}

/** Whether bytes that turn out not to be HTTP may still be relayed: every selecting entry allows uninspectable traffic. */
export function uninspectableAllowed(policy: Policy, host: string): boolean {
  return policy.middlewaresFor(host).every((e) => e.onUninspectable === 'allow');
}

/** A connection's route as credentials and middlewares make it: inspected if either needs it, refused if either says so. */
export function connectionRouteOf(credentials: CredentialSource, policy: Policy, decision: Decision, host: string, port: number): 'as-is' | 'inspect' | 'refuse' {
  const credential = credentialRoute(credentials, decision, host, port);
  const middleware = middlewareRoute(policy, decision, host);
  if (credential === 'refuse' || middleware === 'refuse') return 'refuse';
  return credential === 'inspect' || middleware === 'inspect' ? 'inspect' : 'as-is';
}

/** FINDING beside a connection relayed although middlewares select it: they saw none of it. */
export function uninspectableFindingEvent(o: Outcome, why: string): AuditEvent {
  return {
    class: 'FINDING',
    activity: 'CREATE',
    severity: 'MED',
    action: 'ALLOWED',
    engine: 'middleware',
    dst: { ...(o.host === undefined ? {} : { host: o.host }), ...(o.port === undefined ? {} : { port: o.port }) },
    message: `${UNINSPECTABLE_FINDING}: ${why}`,
    detail: why,
    ...(o.generation === undefined ? {} : { generation: o.generation }),
    ...(o.policyHash === undefined ? {} : { policyHash: o.policyHash }),
    unmapped: { finding: UNINSPECTABLE_FINDING, adapter: o.adapter },
  };
}
