// One session of the control client: dial, admit over HTTP/2, watch for pushes, acknowledge, flush events,
// heartbeat, and name the failure that ended it. The reconnect loop, backoff and published state stay in
// client.ts, which hands this file its shared state explicitly (SessionShared) and reads it back.

import { type ClientHttp2Session, connect as http2Connect, constants } from 'node:http2';
import type { Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { type CertificateSummary, certificateText, summarisePem } from '../pki/certificate-summary.js';
import { attachedEvent } from './attach-event.js';
import type { ApplyOutcome, ControlApplier } from './apply.js';
import type { ControlClientOptions, ControlError, ControlPhase, SupersededBy } from './client.js';
import { ControlFailure, type ControlTlsProvider, classifyError, dialSupervisor } from './dial.js';
import type { EventBuffer } from './events.js';
import { isHttp2ProtocolError, request, responseStatus } from './h2.js';
import {
  type AttachMessage,
  decodeMessage,
  encodeMessage,
  MAX_CONTROL_MESSAGE_BYTES,
  PUSH_KINDS,
  type PushMessage,
  type StatusMessage,
} from './messages.js';
import { decodeMessages, readBody } from './ndjson.js';
import { supersededMessage } from './readiness.js';
import { describeError, SESSION_HEADER } from './protocol.js';
import { openRelay } from './relay.js';

export const REQUEST_TIMEOUT_MS = 15_000;
const HEARTBEAT_INTERVAL_MS = 15_000;
const PING_TIMEOUT_MS = 10_000;
const EVENTS_FLUSH_INTERVAL_MS = 2_000;

/** What runSession reports to the loop: admission (a session exists) and attachment (its first policy acknowledged). */
interface SessionHooks {
  onAdmitted(): void;
  onAttached(): void;
}

export interface LiveSession {
  readonly session: ClientHttp2Session;
  finish(failure: ControlFailure | undefined, note?: string): void;
}

/** The client's mutable state that a session reads and writes; client.ts owns it and publishes it. */
export interface SessionShared {
  closed: boolean;
  live: LiveSession | undefined;
  sessionId: string | undefined;
  connectedSince: number | undefined;
  disconnectedSince: number | undefined;
  lastError: ControlError | undefined;
  /** Set by protocol() when the supervisor's refusal says retrying cannot help; read once by the loop. */
  refusedNotRetryable: boolean;
  superseded: SupersededBy | undefined;
  /** Some session of this process was admitted: the next admission is a re-attach. */
  attachedBefore: boolean;
  /** Attempts that failed before admission since the last admission (or start); the loop counts, an admission resets. */
  failedSinceAttached: number;
}

/** What the dial learnt about the supervisor, for the attach line. */
interface Dialled {
  readonly remoteAddress: string | undefined;
  readonly certificate: CertificateSummary | undefined;
}

interface SessionContext {
  readonly options: ControlClientOptions;
  /** `host:port` of the supervisor, as dialled and reported. */
  readonly supervisor: string;
  readonly applier: ControlApplier;
  readonly tlsForDial: ControlTlsProvider;
  readonly buffer: EventBuffer;
  readonly relays: Set<Socket>;
  readonly shared: SessionShared;
  /** Aborted by the client's close(): a dial in progress ends then, not at its timeouts. */
  readonly closing: AbortSignal;
  publish(next?: ControlPhase): void;
}

interface SessionRunner {
  runSession(hooks: SessionHooks): Promise<string>;
  /** The tail of the ordered status-ack chain; settles once every queued ack was tried. */
  acksSettled(): Promise<void>;
}

// One runner per client: the ack chain and the events-in-flight flag outlive a single session.
export function createSessionRunner(ctx: SessionContext): SessionRunner {
  const { options, supervisor, applier, buffer, relays, shared } = ctx;
  const { now, sink, address } = options;
  const timeouts = options.timeouts ?? {};
  const requestMs = timeouts.requestMs ?? REQUEST_TIMEOUT_MS;

  async function runSession(hooks: SessionHooks): Promise<string> {
    ctx.publish('connecting');
    const material = await ctx.tlsForDial({ lastFailure: shared.lastError?.kind });
    let certificate: CertificateSummary | undefined;
    const socket = await dialSupervisor({
      host: address.host,
      port: address.port,
      tls: material.tls,
      secureContext: material.secureContext,
      lookup: options.lookup,
      connectTimeoutMs: timeouts.connectMs,
      handshakeTimeoutMs: timeouts.handshakeMs,
      signal: ctx.closing,
      onPeerCertificate(presented) {
        certificate = presented;
      },
    });
    if (shared.closed) {
      socket.destroy();
      return 'closed';
    }
    // Under TLS 1.3 a rejection of our certificate arrives after the handshake: keep the first socket
    // error so a later session failure is reported as what it really was.
    let socketError: Error | undefined;
    socket.on('error', (err) => {
      socketError ??= err;
    });
    const dialled: Dialled = { remoteAddress: socket.remoteAddress, certificate };
    const session = http2Connect(`https://${supervisor}`, { createConnection: () => socket });
    let greeted = false;
    session.once('remoteSettings', () => {
      greeted = true;
    });
    return new Promise<string>((resolve, reject) => {
      let settled = false;
      const timers: NodeJS.Timeout[] = [];
      // Which certificate the supervisor refused: the operator compares it with the supervisor's own log line.
      const presented = (): string => {
        const summary = summarisePem(material.tls.certPem);
        return summary === undefined ? '' : `; we presented ${certificateText(summary)}`;
      };
      const toFailure = (err: unknown): ControlFailure => {
        if (socketError !== undefined && classifyError(socketError, 'session') === 'tls-auth') {
          return new ControlFailure('tls-auth', `supervisor ${supervisor} rejected our client certificate: ${describeError(socketError)}${presented()}`, {
            cause: socketError,
          });
        }
        // Node's TLS server checks the client certificate after the handshake and just closes the
        // socket, with no alert. A supervisor hangs up before its HTTP/2 SETTINGS only for that reason.
        if (!greeted && !(err instanceof BoundaryError) && !isHttp2ProtocolError(err) && !(err instanceof ControlFailure && err.kind !== 'http2')) {
          return new ControlFailure(
            'tls-auth',
            `supervisor ${supervisor} closed the connection right after the TLS handshake, before any HTTP/2 frame: it did not accept our client certificate (expired, not issued by its CA, or not a sandbox identity)${socketError === undefined ? '' : ` (${describeError(socketError)})`}${presented()}`,
            { cause: err },
          );
        }
        if (err instanceof ControlFailure) return err;
        if (err instanceof BoundaryError && (err.code === 'CONTROL_MESSAGE_INVALID' || err.code === 'MESSAGE_TOO_LARGE')) {
          return new ControlFailure('protocol', err.message, { cause: err });
        }
        return new ControlFailure(classifyError(socketError ?? err, 'session'), describeError(socketError ?? err), { cause: err });
      };
      const finish = (failure: ControlFailure | undefined, note = 'session closed'): void => {
        if (settled) return;
        settled = true;
        for (const timer of timers) clearInterval(timer);
        for (const relay of relays) relay.destroy();
        session.destroy();
        socket.destroy();
        if (failure === undefined) resolve(note);
        else reject(failure);
      };
      shared.live = { session, finish };
      session.on('error', (err) => finish(toFailure(err)));
      session.on('close', () => {
        // Give the socket's own error (an alert) a turn to arrive before naming the cause.
        setImmediate(() => finish(toFailure(new ControlFailure('http2', 'supervisor closed the session'))));
      });
      session.on('goaway', (code) => {
        if (code !== constants.NGHTTP2_NO_ERROR) finish(new ControlFailure('http2', `supervisor sent GOAWAY (code ${code})`));
      });
      protocol(session, dialled, {
        onAdmitted() {
          hooks.onAdmitted();
          timers.push(startHeartbeat(session, finish));
          timers.push(setInterval(() => flushEvents(session), timeouts.eventsFlushMs ?? EVENTS_FLUSH_INTERVAL_MS));
        },
        onAttached() {
          // An ack can land while the session is being torn down; it must not mark the next one attached.
          if (!settled) hooks.onAttached();
        },
      }).then(
        (note) => finish(undefined, note),
        (err) => finish(toFailure(err)),
      );
    });
  }

  async function protocol(session: ClientHttp2Session, dialled: Dialled, hooks: SessionHooks): Promise<string> {
    // A push of the last session may still compile: what the attach says is held must be what is in force.
    await applier.settled();
    const attach: AttachMessage = {
      kind: 'attach',
      sandboxId: options.sandboxId,
      instanceId: options.instanceId,
      bootId: options.bootId,
      version: options.version,
      ...applier.held(),
      ...(shared.lastError === undefined ? {} : { lastError: { kind: shared.lastError.kind, message: shared.lastError.message.slice(0, 1_000) } }),
    };
    const response = await request(session, { ':method': 'POST', ':path': '/v1/attach' }, encodeMessage(attach), requestMs);
    let reply: ReturnType<typeof decodeMessage<'admitted' | 'refused'>>;
    try {
      reply = decodeMessage(response.body, ['admitted', 'refused']);
    } catch (err) {
      throw new ControlFailure('protocol', `attach answered HTTP ${response.status} with an invalid body: ${describeError(err)}`, { cause: err });
    }
    if (reply.kind === 'refused') {
      shared.refusedNotRetryable = !reply.retryable;
      throw new ControlFailure(
        'refused-by-supervisor',
        `${reply.code}: ${reply.message}${reply.retryable ? '' : ' (supervisor says retrying will not help until this is fixed)'}`,
      );
    }
    shared.sessionId = reply.sessionId;
    const admittedAt = now();
    const lostAt = shared.disconnectedSince ?? admittedAt;
    shared.connectedSince = admittedAt;
    shared.disconnectedSince = undefined;
    hooks.onAdmitted();
    const outcomes = await applier.applyAdmitted(reply);
    ctx.publish('attached');
    sink.emit(
      attachedEvent({
        address,
        supervisor,
        ...dialled,
        sessionId: reply.sessionId,
        generation: reply.generation,
        policyHash: reply.policyHash,
        policy: outcomes[outcomes.length - 1]?.result ?? 'unchanged',
        reattach: shared.attachedBefore,
        afterMs: admittedAt - lostAt,
        failedAttempts: shared.failedSinceAttached,
      }),
    );
    shared.attachedBefore = true;
    shared.failedSinceAttached = 0;
    // Attached for the reconnect schedule once the supervisor has taken every ack of the admission.
    void Promise.all(outcomes.map((outcome) => acknowledge(session, Promise.resolve(outcome)))).then((delivered) => {
      if (delivered.every(Boolean)) hooks.onAttached();
    });
    const watch = session.request({ ':method': 'GET', ':path': '/v1/watch', [SESSION_HEADER]: reply.sessionId }, { endStream: true });
    const status = await responseStatus(watch, requestMs);
    if (status !== 200) {
      const body = await readBody(watch, MAX_CONTROL_MESSAGE_BYTES).catch(() => Buffer.alloc(0));
      throw new ControlFailure('protocol', `watch answered HTTP ${status}: ${body.toString('utf8').slice(0, 500)}`);
    }
    for await (const push of decodeMessages(watch, { expect: PUSH_KINDS })) {
      const end = handlePush(session, reply.sessionId, push);
      if (end !== undefined) return end;
    }
    throw new ControlFailure('http2', 'supervisor ended the watch stream');
  }

  function handlePush(session: ClientHttp2Session, id: string, push: PushMessage): string | undefined {
    switch (push.kind) {
      // Queued in the applier behind any compile in flight; the watch keeps being read, so a withdraw is not.
      case 'policy':
        acknowledge(session, published(applier.applyPolicy(push)));
        break;
      case 'credentials':
        acknowledge(session, published(applier.applyCredentials(push)));
        break;
      case 'settings':
        acknowledge(session, published(applier.applySettings(push)));
        break;
      case 'relay-open':
        openRelay(push, { session, sessionId: id, relayAllow: options.relayAllow ?? [], sink, active: relays });
        break;
      case 'withdraw':
        if (push.code === 'superseded') {
          const bootId = push.bootId ?? 'unknown';
          shared.superseded = { bootId, sandboxId: options.sandboxId, instanceId: options.instanceId, at: now() };
          throw new ControlFailure('superseded', supersededMessage(shared.superseded));
        }
        throw new ControlFailure('refused-by-supervisor', `withdrawn by the supervisor: ${push.reason}`);
    }
    ctx.publish();
    return undefined;
  }

  /** The outcome, after publishing the state it left (the applied policy, the new settings). */
  function published<T>(outcome: Promise<T>): Promise<T> {
    return outcome.finally(() => ctx.publish());
  }

  let statusChain: Promise<void> = Promise.resolve();
  /**
   * Resolves true once the supervisor accepted the ack (or there was nothing to acknowledge); never rejects.
   * Chained in arrival order and each waits for its own outcome, so acks leave in generation order.
   */
  function acknowledge(session: ClientHttp2Session, outcome: Promise<ApplyOutcome>): Promise<boolean> {
    // Acks go out in order, one at a time: the supervisor's table must end at the newest.
    const delivered = statusChain.then(async () => {
      let status: StatusMessage | undefined;
      try {
        status = (await outcome).status;
      } catch (err) {
        options.logger?.error({ err }, 'applying a control push failed unexpectedly');
        return false;
      }
      if (status === undefined) return true;
      try {
        const response = await request(session, { ':method': 'POST', ':path': '/v1/status', [SESSION_HEADER]: shared.sessionId ?? '' }, encodeMessage(status), requestMs);
        if (response.status !== 200) options.logger?.warn({ status: response.status }, 'supervisor did not accept a status ack');
        return response.status === 200;
      } catch (err) {
        options.logger?.debug({ err }, 'status ack not delivered; the next attach reports the state again');
        return false;
      }
    });
    statusChain = delivered.then(() => undefined);
    return delivered;
  }

  let eventsInFlight = false;
  function flushEvents(session: ClientHttp2Session): void {
    if (eventsInFlight || session.destroyed) return;
    const batch = buffer.take();
    if (batch === undefined) return;
    eventsInFlight = true;
    request(session, { ':method': 'POST', ':path': '/v1/events', [SESSION_HEADER]: shared.sessionId ?? '' }, batch.body, requestMs)
      .then((response) => (response.status === 200 ? buffer.delivered(batch) : buffer.failed(batch)))
      .catch(() => buffer.failed(batch))
      .finally(() => {
        eventsInFlight = false;
      });
  }

  function startHeartbeat(session: ClientHttp2Session, finish: LiveSession['finish']): NodeJS.Timeout {
    const pingMs = timeouts.pingMs ?? PING_TIMEOUT_MS;
    return setInterval(() => {
      const timer = setTimeout(() => finish(new ControlFailure('http2', `supervisor did not answer a ping within ${pingMs} ms`)), pingMs);
      try {
        session.ping((err) => {
          clearTimeout(timer);
          if (err !== null) finish(new ControlFailure('http2', `ping failed: ${describeError(err)}`));
        });
      } catch (err) {
        clearTimeout(timer);
        finish(new ControlFailure('http2', `ping failed: ${describeError(err)}`));
      }
    }, timeouts.heartbeatMs ?? HEARTBEAT_INTERVAL_MS);
  }

  return {
    runSession,
    acksSettled: () => statusChain,
  };
}
