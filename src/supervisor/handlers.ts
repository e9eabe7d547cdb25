// The control handlers createControlServer is given: attach (idempotent; the newest session wins), watch, status,
// events, relay and session close. Admission rules live in tables.ts; this file keeps the live sessions in step.

import { randomUUID } from 'node:crypto';
import type { ServerHttp2Session } from 'node:http2';
import type { AttachMessage, RefusedMessage } from '../control/messages.js';
import type { LiveSession, SupervisorContext } from './context.js';
import type { AttachDeadlines } from './deadlines.js';
import { pushConfig, pushMessage } from './push.js';
import type { ControlHandlers, Peer } from './server.js';
import type { SupersededSession } from './tables.js';

/**
 * Idempotent attach: the newest session wins and the old one is told why and closed. When the old one is
 * another process (other boot id) whose session is still open and had acked, two live boundaries share one
 * identity: they would supersede each other forever, so the old one is told `superseded` and stops competing.
 * A restarted process also brings a new boot id, but its old session is closed (or never acked) by then.
 */
function replaceSession(
  ctx: SupervisorContext,
  previous: LiveSession,
  superseded: SupersededSession,
  message: AttachMessage,
  peer: Peer,
  h2session: ServerHttp2Session,
): void {
  const { sandboxId, instanceId, bootId } = message;
  const alive = previous.session !== h2session && !previous.session.closed && !previous.session.destroyed;
  if (superseded.bootId !== bootId && superseded.acked && alive) {
    ctx.logger.warn(
      { sandboxId, instanceId, bootId, remote: peer.remote, supersededBootId: superseded.bootId, supersededRemote: previous.remote },
      'two live boundary processes attached as one instance: the newer wins, the older is told it is superseded and stops re-attaching; give each a unique --instance-id or stop the duplicate',
    );
    pushMessage(ctx, previous, {
      kind: 'withdraw',
      code: 'superseded',
      bootId,
      reason: `another boundary process (boot ${bootId}, from ${peer.remote}) attached as sandbox ${sandboxId} instance ${instanceId}`,
    });
    ctx.emit({ type: 'superseded', sandboxId, instanceId, detail: `boot ${superseded.bootId} superseded by boot ${bootId}` });
  } else {
    pushMessage(ctx, previous, { kind: 'withdraw', code: 'replaced', reason: 'superseded by a newer session of the same instance' });
  }
  ctx.live.delete(previous.sessionId);
  previous.watch?.end();
  if (previous.session !== h2session) previous.session.close();
}

function sessionFor(ctx: SupervisorContext, peer: Peer, sessionId: string): LiveSession | undefined {
  const session = ctx.live.get(sessionId);
  return session !== undefined && session.sandboxId === peer.sandboxId ? session : undefined;
}

const unknownSession = (sessionId: string): RefusedMessage => ({
  kind: 'refused',
  code: 'unknown-session',
  message: `session ${sessionId.slice(0, 64) || '(none)'} is not attached; attach again`,
  retryable: true,
});

export function createControlHandlers(ctx: SupervisorContext, deadlines: AttachDeadlines): ControlHandlers {
  const { logger, tables, live, broker, emit } = ctx;
  return {
    attach(peer, h2session, message) {
      const refused = (refusal: RefusedMessage): RefusedMessage => {
        logger.warn({ sandboxId: message.sandboxId, instanceId: message.instanceId, code: refusal.code, remote: peer.remote }, `attach refused: ${refusal.message}`);
        emit({ type: 'refused', sandboxId: message.sandboxId, instanceId: message.instanceId, detail: refusal.code });
        return refusal;
      };
      if (ctx.closing()) return refused({ kind: 'refused', code: 'shutting-down', message: 'supervisor is shutting down', retryable: true });
      if (message.sandboxId !== peer.sandboxId) {
        return refused({
          kind: 'refused',
          code: 'identity-mismatch',
          message: `attach names sandbox ${message.sandboxId} but the certificate names ${peer.sandboxId}`,
          retryable: false,
        });
      }
      const found = ctx.configFor(message.sandboxId);
      if (!found.ok) return refused(found.refusal);
      const sessionId = randomUUID();
      const result = tables.admit(message, found.config, sessionId);
      if (!result.ok) return refused({ kind: 'refused', code: result.code, message: result.message, retryable: true });
      deadlines.disarm(message.sandboxId, message.instanceId);
      const previous = result.superseded === undefined ? undefined : live.get(result.superseded.sessionId);
      if (previous !== undefined && result.superseded !== undefined) replaceSession(ctx, previous, result.superseded, message, peer, h2session);
      live.set(sessionId, {
        sessionId,
        session: h2session,
        sandboxId: message.sandboxId,
        instanceId: message.instanceId,
        bootId: message.bootId,
        remote: peer.remote,
        watch: undefined,
      });
      logger.info(
        { sandboxId: message.sandboxId, instanceId: message.instanceId, generation: result.admitted.generation, resent: result.admitted.policy !== undefined },
        'boundary attached',
      );
      emit({
        type: 'attached',
        sandboxId: message.sandboxId,
        instanceId: message.instanceId,
        generation: result.admitted.generation,
        detail: result.admitted.policy === undefined ? 'held-policy-current' : 'policy-sent',
      });
      return result.admitted;
    },
    watch(peer, h2session, sessionId, stream) {
      const session = sessionFor(ctx, peer, sessionId);
      if (session === undefined || session.session !== h2session) return unknownSession(sessionId);
      session.watch?.end();
      session.watch = stream;
      stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
      stream.on('close', () => {
        if (session.watch === stream) session.watch = undefined;
      });
      // A push that happened between admission and this watch is caught up now.
      const instance = tables.bySession(sessionId);
      const record = tables.sandbox(session.sandboxId);
      if (instance !== undefined && record !== undefined && instance.sentGeneration < record.generation) {
        pushConfig(ctx, session, instance, { policy: true, credentials: true, settings: true });
      }
      return undefined;
    },
    status(peer, sessionId, message) {
      const session = sessionFor(ctx, peer, sessionId);
      if (session === undefined) return unknownSession(sessionId);
      tables.status(sessionId, message);
      emit({ type: 'status', sandboxId: session.sandboxId, instanceId: session.instanceId, generation: message.generation, detail: message.state });
      return undefined;
    },
    events(peer, sessionId, message) {
      const session = sessionFor(ctx, peer, sessionId);
      if (session === undefined) return unknownSession(sessionId);
      tables.events(sessionId, message.events.length, message.dropped);
      logger.debug({ sandboxId: session.sandboxId, count: message.events.length, dropped: message.dropped }, 'events received');
      emit({ type: 'events', sandboxId: session.sandboxId, instanceId: session.instanceId, detail: `${message.events.length} events, ${message.dropped} dropped` });
      return undefined;
    },
    relay(peer, sessionId, relayId, stream, headers) {
      broker.accept(peer.sandboxId ?? '', sessionId, relayId, stream, headers);
    },
    sessionClosed(h2session) {
      for (const session of [...live.values()]) {
        if (session.session !== h2session) continue;
        live.delete(session.sessionId);
        const instance = tables.detach(session.sessionId);
        if (instance === undefined || ctx.closing()) continue;
        deadlines.arm(session.sandboxId, session.instanceId);
        logger.info({ sandboxId: session.sandboxId, instanceId: session.instanceId }, 'boundary detached');
        emit({ type: 'detached', sandboxId: session.sandboxId, instanceId: session.instanceId });
      }
    },
  };
}
