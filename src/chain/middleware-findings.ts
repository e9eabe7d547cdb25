// The FINDING events of network middleware findings (docs/events.md#middleware-findings), emitted beside the decision
// event of the request or WebSocket message they were found in. Kind, count, entry and subject; never a matched value.

import type { MiddlewareInvocation } from '../middleware/outcome.js';
import type { AuditEvent } from '../telemetry/event.js';
import type { Outcome } from './events.js';

/**
 * One FINDING per finding a network middleware reported (docs/events.md#middleware-findings): BLOCKED and HIGH when its
 * entry denied, else CREATE and MED (a redaction, a detection that let the request go). Kind, count and entry only.
 */
export function middlewareFindingEvents(o: Pick<Outcome, 'adapter' | 'host' | 'port' | 'policy' | 'generation' | 'policyHash'>, invocations: readonly MiddlewareInvocation[]): AuditEvent[] {
  const events: AuditEvent[] = [];
  for (const i of invocations) {
    const denied = i.decision === 'deny';
    for (const f of i.findings ?? []) {
      const unmapped: Record<string, unknown> = {
        finding: f.type,
        count: f.count,
        middleware: i.key,
        implementation: i.implementation,
        binding: i.binding,
        transformed: i.transformed,
        adapter: o.adapter,
      };
      if (f.subject !== undefined) unmapped.subject = f.subject;
      if (i.reasonCode !== undefined) unmapped.reason_code = i.reasonCode;
      events.push({
        class: 'FINDING',
        activity: denied ? 'BLOCKED' : 'CREATE',
        severity: denied ? 'HIGH' : 'MED',
        action: denied ? 'DENIED' : 'ALLOWED',
        engine: 'middleware',
        dst: { ...(o.host === undefined ? {} : { host: o.host }), ...(o.port === undefined ? {} : { port: o.port }) },
        message: `${f.type} x${f.count} in network middleware ${i.key}`,
        detail: `network middleware ${i.key} found ${f.type}`,
        ...(o.policy === undefined ? {} : { policy: o.policy }),
        ...(o.generation === undefined ? {} : { generation: o.generation }),
        ...(o.policyHash === undefined ? {} : { policyHash: o.policyHash }),
        unmapped,
      });
    }
  }
  return events;
}
