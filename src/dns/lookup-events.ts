// The audit events of the lookup gate's reports (docs/dns.md#the-lookup-gate): new names over the budget and
// tunnelling-shaped names, from policy DNS and the proxy alike, as the events policy DNS has always written for them.

import type { LookupReport } from '../net/lookup-gate.js';
import type { Policy } from '../policy/types.js';
import type { AuditEvent } from '../telemetry/event.js';
import { limitEvent } from './rate-limit.js';

export function lookupReportEvent(report: LookupReport, policy: Pick<Policy, 'generation' | 'hash'>): AuditEvent {
  if (report.kind === 'rate-limited') {
    return limitEvent({ limit: 'unique', limits: report.limits, policy, queries: report.names, name: report.name, byAdapter: report.byVia });
  }
  const enforce = report.mode === 'enforce';
  const under = report.base === '' ? 'a hostless endpoint' : `*.${report.base}`;
  return {
    class: 'FINDING',
    activity: enforce ? 'BLOCKED' : 'CREATE',
    severity: 'HIGH',
    action: enforce ? 'DENIED' : 'ALLOWED',
    engine: 'dns',
    dst: { host: report.name },
    statusDetail: 'policy_dns_tunnel_suspected',
    message: `Tunnelling-shaped names under ${under} (${report.signals.join(', ')}): ${report.names} flagged, ${enforce ? 'not resolved' : 'resolved (audit)'}`,
    generation: policy.generation,
    policyHash: policy.hash,
    unmapped: { parent: report.base, signals: report.signals, flagged_names: report.names, mode: report.mode, by_adapter: report.byVia },
  };
}
