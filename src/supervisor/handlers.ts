// The control handlers createControlServer is given: attach (idempotent; the newest session wins), watch, status,
// events, relay and session close. Admission rules live in tables.ts; this file keeps the live sessions in step.

import { randomUUID } from 'node:crypto';
import type { ServerHttp2Session } from 'node:http2';
import type { RefusedMessage } from '../control/messages.js';
import type { LiveSession, SupervisorContext } from './context.js';
import type { AttachDeadlines } from './deadlines.js';
import { pushConfig, withMiddleware } from './push.js';
import type { Replication } from './replication.js';
import type { ControlHandlers, Peer } from './server.js';
import { retireSession } from './retire.js';

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

export function createControlHandlers(ctx: SupervisorContext, parts: { deadlines: AttachDeadlines; replication: Replication }): ControlHandlers {
  const { logger, tables, live, broker, emit, store, writer, replicaId, now } = ctx;
  const { deadlines, replication } = parts;
  const key = (sandboxId: string, instanceId: string): string => `instance:${sandboxId}/${instanceId}`;
  // The sessions attached over each connection, so a closing connection finds its own without a scan of every
  // live session (a restart closes them all: a scan each would be quadratic). Entries another part already
  // removed from `live` (retired, withdrawn) are skipped on close and pruned on the next attach.
  const byConnection = new WeakMap<ServerHttp2Session, Set<LiveSession>>();
  function track(session: LiveSession): void {
    let attached = byConnection.get(session.session);
    if (attached === undefined) {
      attached = new Set();
      byConnection.set(session.session, attached);
    }
    for (const old of attached) if (live.get(old.sessionId) !== old) attached.delete(old);
    attached.add(session);
  }
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
      const generationBefore = tables.sandbox(message.sandboxId)?.generation;
      const result = tables.admit(message, found.config, sessionId);
      if (!result.ok) return refused({ kind: 'refused', code: result.code, message: result.message, retryable: true });
      const { sandboxId, instanceId, bootId, version } = message;
      writer.write(key(sandboxId, instanceId), 'attached', () => store.attached({ sandboxId, instanceId, bootId, version, replicaId, sessionId, at: now() }));
      if (generationBefore !== result.admitted.generation) replication.admitted(sandboxId);
      const previous = result.superseded === undefined ? undefined : live.get(result.superseded.sessionId);
      if (previous !== undefined && result.superseded !== undefined) {
        retireSession(ctx, previous, result.superseded, { bootId, from: peer.remote, h2session });
      }
      const session: LiveSession = {
        sessionId,
        session: h2session,
        sandboxId: message.sandboxId,
        instanceId: message.instanceId,
        bootId: message.bootId,
        remote: peer.remote,
        watch: undefined,
      };
      live.set(sessionId, session);
      track(session);
      logger.info(
        {
          sandboxId: message.sandboxId,
          instanceId: message.instanceId,
          generation: result.admitted.generation,
          resent: result.admitted.policy !== undefined,
          remote: peer.remote,
          bootId: message.bootId,
        },
        'boundary attached',
      );
      emit({
        type: 'attached',
        sandboxId: message.sandboxId,
        instanceId: message.instanceId,
        generation: result.admitted.generation,
        detail: result.admitted.policy === undefined ? 'held-policy-current' : 'policy-sent',
      });
      return { ...result.admitted, ...withMiddleware(ctx) };
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
      const first = tables.bySession(sessionId)?.sessionAcked === false;
      tables.status(sessionId, message);
      const { generation, policyHash, state } = message;
      // Once per session (what "attached" promised is now applied), and every failure: not every routine ack.
      const fields = { sandboxId: session.sandboxId, instanceId: session.instanceId, generation, state };
      if (state !== 'effective') logger.warn({ ...fields, error: message.error }, 'boundary could not apply its configuration');
      else if (first) logger.info(fields, 'boundary acknowledged its configuration');
      writer.write(key(session.sandboxId, session.instanceId), 'status', () =>
        store.status(session.sandboxId, session.instanceId, sessionId, { state, generation, policyHash, error: message.error ?? null }),
      );
      emit({ type: 'status', sandboxId: session.sandboxId, instanceId: session.instanceId, generation: message.generation, detail: message.state });
      return undefined;
    },
    events(peer, sessionId, message) {
      const session = sessionFor(ctx, peer, sessionId);
      if (session === undefined) return unknownSession(sessionId);
      tables.events(sessionId, message.events.length, message.dropped);
      ctx.denials.record(session.sandboxId, session.instanceId, message.events);
      logger.debug({ sandboxId: session.sandboxId, count: message.events.length, dropped: message.dropped }, 'events received');
      emit({ type: 'events', sandboxId: session.sandboxId, instanceId: session.instanceId, detail: `${message.events.length} events, ${message.dropped} dropped` });
      return undefined;
    },
    relay(peer, sessionId, relayId, stream, headers) {
      broker.accept(peer.sandboxId ?? '', sessionId, relayId, stream, headers);
    },
    sessionClosed(h2session) {
      const attached = byConnection.get(h2session);
      byConnection.delete(h2session);
      for (const session of attached ?? []) {
        if (live.get(session.sessionId) !== session) continue;
        live.delete(session.sessionId);
        const instance = tables.detach(session.sessionId);
        // Closing: the whole replica is released at once (store.releaseReplica), with the same deadline.
        if (instance === undefined || ctx.closing()) continue;
        const at = now();
        const deadlineAt = at + ctx.attachDeadlineMs;
        writer.write(key(session.sandboxId, session.instanceId), 'detached', () =>
          store.detached(session.sandboxId, session.instanceId, session.sessionId, at, deadlineAt),
        );
        deadlines.scheduleAt(deadlineAt);
        logger.info({ sandboxId: session.sandboxId, instanceId: session.instanceId }, 'boundary detached');
        emit({ type: 'detached', sandboxId: session.sandboxId, instanceId: session.instanceId });
      }
    },
  };
}
