// The push fan-out: control messages written onto a session's watch stream (a boundary that stops reading is cut
// off), and changed sandbox configuration pushed to every instance attached here. Never admits or withdraws.

import type { ServerHttp2Session } from 'node:http2';
import { encodeMessage, type PushMessage, type WireMiddlewareService } from '../control/messages.js';
import type { LiveSession, SupervisorContext } from './context.js';
import type { ConfigChange, InstanceRecord } from './tables.js';

/** A boundary that does not read its watch stream is cut off before its backlog grows past this. */
const MAX_WATCH_BACKLOG_BYTES = 8_388_608;

export function pushMessage(ctx: SupervisorContext, session: LiveSession, message: PushMessage): boolean {
  const watch = session.watch;
  if (watch === undefined || watch.destroyed || watch.closed) return false;
  if (watch.writableLength > MAX_WATCH_BACKLOG_BYTES) {
    ctx.logger.warn({ sandboxId: session.sandboxId, instanceId: session.instanceId }, 'boundary is not reading its watch stream; session closed');
    session.session.destroy();
    return false;
  }
  try {
    watch.write(encodeMessage(message));
    return true;
  } catch (err) {
    ctx.logger.warn({ err, sandboxId: session.sandboxId }, 'push failed');
    return false;
  }
}

export function pushConfig(
  ctx: SupervisorContext,
  session: LiveSession,
  instance: InstanceRecord,
  parts: { policy: boolean; credentials: boolean; settings: boolean },
): void {
  const record = ctx.tables.sandbox(session.sandboxId);
  if (record === undefined) return;
  const { generation, config: c } = record;
  let sent = true;
  if (parts.credentials) sent &&= pushMessage(ctx, session, { kind: 'credentials', generation, credentialsHash: c.credentialsHash, credentials: c.providers });
  if (parts.settings) sent &&= pushMessage(ctx, session, { kind: 'settings', generation, settings: c.settings });
  if (parts.policy) sent &&= pushMessage(ctx, session, { kind: 'policy', generation, policyHash: c.policyHash, policy: c.policyText, ...withMiddleware(ctx) });
  if (sent) {
    instance.sentGeneration = generation;
    ctx.emit({ type: 'pushed', sandboxId: session.sandboxId, instanceId: session.instanceId, generation });
  }
}

/** The registrations a policy is delivered with; left out when there are none, so older boundaries are unaffected. */
export function withMiddleware(ctx: SupervisorContext): { middleware?: readonly WireMiddlewareService[] } {
  const services = ctx.middleware();
  return services.length === 0 ? {} : { middleware: services };
}

/**
 * Ends a live session on this replica: tells the boundary why (a withdraw push), forgets the session and ends its
 * watch stream and, unless it is `keep` (the connection a newer session of the same boundary arrived on), closes it.
 */
export function endSession(ctx: SupervisorContext, session: LiveSession, withdraw: Extract<PushMessage, { kind: 'withdraw' }>, keep?: ServerHttp2Session): void {
  pushMessage(ctx, session, withdraw);
  ctx.live.delete(session.sessionId);
  session.watch?.end();
  if (session.session !== keep) session.session.close();
}

/** Pushes what changed in a sandbox's configuration to each of its boundaries attached to this replica. */
export function pushChange(ctx: SupervisorContext, sandboxId: string, change: ConfigChange): void {
  for (const session of ctx.live.values()) {
    if (session.sandboxId !== sandboxId) continue;
    const instance = ctx.tables.bySession(session.sessionId);
    if (instance !== undefined) pushConfig(ctx, session, instance, change);
  }
}
