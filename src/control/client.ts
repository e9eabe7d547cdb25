// The boundary's side of the control channel: one mTLS HTTP/2 session to the supervisor, attach, watch
// for pushes, acknowledge, forward events, serve relays; reconnect with backoff until closed or superseded
// by another process, and name every failure. Never decides policy (apply.ts hands policies to the store)
// and never imports supervisor/.

import { randomUUID } from 'node:crypto';
import { type ClientHttp2Session, connect as http2Connect, constants } from 'node:http2';
import type { Socket } from 'node:net';
import { BoundaryError, type Issue } from '../errors.js';
import { parsePolicy } from '../policy/parse.js';
import { emptyPolicy } from '../policy/store.js';
import type { Policy } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import { type ApplyOutcome, type ApplyState, type CredentialTarget, createControlApplier, type PolicyTarget } from './apply.js';
import { type BackoffOptions, createBackoff, type ReconnectReason } from './backoff.js';
import {
  type ControlLookup,
  ControlFailure,
  type ControlTls,
  type ControlTlsProvider,
  classifyError,
  describeError,
  dialSupervisor,
  fixedControlTls,
} from './dial.js';
import { createEventBuffer, MAX_BUFFERED_EVENTS } from './events.js';
import { attachFailedEvent, sessionEndedEvent } from './failure-events.js';
import {
  type AttachMessage,
  type ControlErrorKind,
  decodeMessage,
  encodeMessage,
  MAX_CONTROL_MESSAGE_BYTES,
  PUSH_KINDS,
  type PushMessage,
  type RelayTarget,
  type StatusMessage,
} from './messages.js';
import { isHttp2ProtocolError, request, responseStatus } from './h2.js';
import { decodeMessages, readBody } from './ndjson.js';
import { supersededMessage } from './readiness.js';
import { openRelay, SESSION_HEADER } from './relay.js';

export const REQUEST_TIMEOUT_MS = 15_000;
export const HEARTBEAT_INTERVAL_MS = 15_000;
export const PING_TIMEOUT_MS = 10_000;
export const EVENTS_FLUSH_INTERVAL_MS = 2_000;

/** `superseded`: another boundary process took this (sandbox, instance); the loop has stopped for good. */
export const CONTROL_PHASES = ['idle', 'connecting', 'attached', 'waiting', 'superseded', 'closed'] as const;
export type ControlPhase = (typeof CONTROL_PHASES)[number];

export interface ControlError {
  readonly kind: ControlErrorKind;
  readonly message: string;
  /** Epoch ms. */
  readonly at: number;
}

/** Who took this boundary's identity: set once, with phase `superseded`. */
export interface SupersededBy {
  /** The boot id of the boundary process that attached as the same sandbox and instance. */
  readonly bootId: string;
  readonly sandboxId: string;
  readonly instanceId: string;
  /** Epoch ms. */
  readonly at: number;
}

export interface ControlState {
  readonly phase: ControlPhase;
  /** `host:port` of the supervisor. */
  readonly supervisor: string;
  readonly sessionId: string | undefined;
  readonly connectedSince: number | undefined;
  /** Set from start until the first admission, and from every session loss until the next. */
  readonly disconnectedSince: number | undefined;
  readonly lastError: ControlError | undefined;
  /** Failed attempts since start. */
  readonly failedAttempts: number;
  /** Failed attempts since the last healthy session (backoff.ts); a session attached too briefly counts as one. */
  readonly failuresSinceHealthy: number;
  readonly nextAttemptAt: number | undefined;
  /** Why the wait until nextAttemptAt is as long as it is; set exactly when nextAttemptAt is. */
  readonly nextAttemptReason: ReconnectReason | undefined;
  readonly policy: ApplyState;
  readonly events: { readonly buffered: number; readonly sent: number; readonly dropped: number };
  readonly relays: number;
  readonly superseded: SupersededBy | undefined;
}

export interface ControlClientOptions {
  readonly address: { readonly host: string; readonly port: number };
  /** Fixed material, or a provider asked before every dial (attached mode follows --tls-dir: control/tls-source.ts). */
  readonly tls: ControlTls | ControlTlsProvider;
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly bootId: string;
  readonly version: string;
  readonly now: () => number;
  readonly sink: AuditSink;
  readonly logger?: Logger | undefined;
  readonly store: PolicyTarget;
  readonly credentials?: CredentialTarget | undefined;
  /** Defaults: policy/parse.ts parsePolicy and policy/store.ts emptyPolicy, as in standalone mode. */
  readonly parsePolicy?: ((text: string, options?: { source?: string }) => Policy) | undefined;
  readonly emptyPolicy?: (() => Policy) | undefined;
  /** Reload checks standalone mode runs before a swap (policy/store.ts reloadIssues); issues fail the push. */
  readonly preflight?: ((previous: Policy, next: Policy) => readonly Issue[]) | undefined;
  /** Loopback targets a relay may reach (`--relay-allow`); empty refuses every relay. */
  readonly relayAllow?: readonly RelayTarget[] | undefined;
  readonly lookup?: ControlLookup | undefined;
  /** Audit events to forward on /v1/events (telemetry/audit.ts's sink fits). */
  readonly events?: { subscribe(listener: (event: object) => void): () => void } | undefined;
  readonly onState?: ((state: ControlState) => void) | undefined;
  /** Tests only change these; production keeps backoff.ts's constants. */
  readonly backoff?: Omit<BackoffOptions, 'now'>;
  readonly timeouts?: {
    readonly connectMs?: number;
    readonly handshakeMs?: number;
    readonly requestMs?: number;
    readonly heartbeatMs?: number;
    readonly pingMs?: number;
    readonly eventsFlushMs?: number;
  };
}

export interface ControlClient {
  start(): Promise<void>;
  close(): Promise<void>;
  state(): ControlState;
}

/** What runSession reports to the loop: admission (a session exists) and attachment (its first policy acknowledged). */
interface SessionHooks {
  onAdmitted(): void;
  onAttached(): void;
}

interface LiveSession {
  readonly session: ClientHttp2Session;
  finish(failure: ControlFailure | undefined, note?: string): void;
}

export function createControlClient(options: ControlClientOptions): ControlClient {
  const { now, sink, address } = options;
  const supervisor = `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
  validateOptions(options);
  const timeouts = options.timeouts ?? {};
  const requestMs = timeouts.requestMs ?? REQUEST_TIMEOUT_MS;
  const applier = createControlApplier({
    store: options.store,
    credentials: options.credentials,
    parsePolicy: options.parsePolicy ?? parsePolicy,
    emptyPolicy: options.emptyPolicy ?? emptyPolicy,
    preflight: options.preflight,
    sink,
    now,
    source: `supervisor ${supervisor}`,
  });
  const backoff = createBackoff({ now, ...options.backoff });
  const tlsForDial: ControlTlsProvider = typeof options.tls === 'function' ? options.tls : fixedControlTls(options.tls);
  const buffer = createEventBuffer({ maxEvents: MAX_BUFFERED_EVENTS });
  const relays = new Set<Socket>();
  let phase: ControlPhase = 'idle';
  let closed = false;
  let live: LiveSession | undefined;
  let sessionId: string | undefined;
  let connectedSince: number | undefined;
  let disconnectedSince: number | undefined;
  let lastError: ControlError | undefined;
  let failedAttempts = 0;
  let nextAttemptAt: number | undefined;
  let nextAttemptReason: ReconnectReason | undefined;
  // Set by protocol() when the supervisor's refusal says retrying cannot help; read once by loop().
  let refusedNotRetryable = false;
  let superseded: SupersededBy | undefined;
  let loopDone: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  let unsubscribe: (() => void) | undefined;

  function state(): ControlState {
    return {
      phase,
      supervisor,
      sessionId,
      connectedSince,
      disconnectedSince,
      lastError,
      failedAttempts,
      failuresSinceHealthy: backoff.failures(),
      nextAttemptAt,
      nextAttemptReason,
      policy: applier.state(),
      events: { buffered: buffer.size(), ...buffer.stats() },
      relays: relays.size,
      superseded,
    };
  }

  function publish(next?: ControlPhase): void {
    if (next !== undefined) phase = next;
    try {
      options.onState?.(state());
    } catch (err) {
      options.logger?.warn({ err }, 'control onState listener threw');
    }
  }

  async function loop(): Promise<void> {
    while (!closed) {
      let admitted = false;
      let attached = false;
      let failure: ControlFailure | undefined;
      let note = '';
      try {
        note = await runSession({
          onAdmitted() {
            admitted = true;
          },
          onAttached() {
            attached = true;
            backoff.attached();
          },
        });
      } catch (err) {
        failure = err instanceof ControlFailure ? err : new ControlFailure(classifyError(err, 'session'), describeError(err), { cause: err });
      }
      live = undefined;
      sessionId = undefined;
      connectedSince = undefined;
      if (closed) break;
      disconnectedSince ??= now();
      if (failure !== undefined) lastError = { kind: failure.kind, message: failure.message, at: now() };
      // The supervisor may close the session before its push is read, so the flag decides, not the failure.
      if (superseded !== undefined) {
        stopSuperseded(superseded);
        break;
      }
      if (admitted) {
        sink.emit(sessionEndedEvent({ address, failure, note }));
      } else if (failure !== undefined) {
        failedAttempts += 1;
        sink.emit(attachFailedEvent({ address, supervisor, failure, retryable: !refusedNotRetryable, attempt: failedAttempts }));
      }
      const { delayMs, reason } = backoff.next(attached ? { kind: 'session-ended' } : { kind: 'failed', retryable: !refusedNotRetryable });
      refusedNotRetryable = false;
      if (reason === 'not-retryable') {
        options.logger?.warn({ delayMs, supervisor }, 'supervisor refused and says retrying will not help; next attempt after the full backoff cap');
      }
      nextAttemptAt = now() + delayMs;
      nextAttemptReason = reason;
      publish('waiting');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
      nextAttemptAt = undefined;
      nextAttemptReason = undefined;
    }
  }

  // Re-attaching would take the identity back from the newer process, which would then take it back again:
  // two live processes would flap forever. So the loop ends here; the last policy keeps enforcing and
  // /readyz says superseded until an operator restarts this process with a unique --instance-id or stops
  // the duplicate.
  function stopSuperseded(by: SupersededBy): void {
    const failure = new ControlFailure('superseded', supersededMessage(by));
    lastError = { kind: failure.kind, message: failure.message, at: by.at };
    sink.emit(sessionEndedEvent({ address, failure, note: '' }));
    options.logger?.warn(
      { supervisor, sandboxId: by.sandboxId, instanceId: by.instanceId, bootId: options.bootId, supersededBy: by.bootId },
      `${failure.message}; this boundary stops re-attaching and keeps its last policy: restart it with a unique --instance-id, or stop the duplicate`,
    );
    publish('superseded');
  }

  async function runSession(hooks: SessionHooks): Promise<string> {
    publish('connecting');
    const material = await tlsForDial({ lastFailure: lastError?.kind });
    const socket = await dialSupervisor({
      host: address.host,
      port: address.port,
      tls: material.tls,
      secureContext: material.secureContext,
      lookup: options.lookup,
      connectTimeoutMs: timeouts.connectMs,
      handshakeTimeoutMs: timeouts.handshakeMs,
    });
    if (closed) {
      socket.destroy();
      return 'closed';
    }
    // Under TLS 1.3 a rejection of our certificate arrives after the handshake: keep the first socket
    // error so a later session failure is reported as what it really was.
    let socketError: Error | undefined;
    socket.on('error', (err) => {
      socketError ??= err;
    });
    const session = http2Connect(`https://${supervisor}`, { createConnection: () => socket });
    let greeted = false;
    session.once('remoteSettings', () => {
      greeted = true;
    });
    return new Promise<string>((resolve, reject) => {
      let settled = false;
      const timers: NodeJS.Timeout[] = [];
      const toFailure = (err: unknown): ControlFailure => {
        if (socketError !== undefined && classifyError(socketError, 'session') === 'tls-auth') {
          return new ControlFailure('tls-auth', `supervisor rejected our client certificate: ${describeError(socketError)}`, { cause: socketError });
        }
        // Node's TLS server checks the client certificate after the handshake and just closes the
        // socket, with no alert. A supervisor hangs up before its HTTP/2 SETTINGS only for that reason.
        if (!greeted && !(err instanceof BoundaryError) && !isHttp2ProtocolError(err) && !(err instanceof ControlFailure && err.kind !== 'http2')) {
          return new ControlFailure(
            'tls-auth',
            `supervisor ${supervisor} closed the connection right after the TLS handshake, before any HTTP/2 frame: it did not accept our client certificate (expired, not issued by its CA, or not a sandbox identity)${socketError === undefined ? '' : ` (${describeError(socketError)})`}`,
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
      live = { session, finish };
      session.on('error', (err) => finish(toFailure(err)));
      session.on('close', () => {
        // Give the socket's own error (an alert) a turn to arrive before naming the cause.
        setImmediate(() => finish(toFailure(new ControlFailure('http2', 'supervisor closed the session'))));
      });
      session.on('goaway', (code) => {
        if (code !== constants.NGHTTP2_NO_ERROR) finish(new ControlFailure('http2', `supervisor sent GOAWAY (code ${code})`));
      });
      protocol(session, {
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

  async function protocol(session: ClientHttp2Session, hooks: SessionHooks): Promise<string> {
    const attach: AttachMessage = {
      kind: 'attach',
      sandboxId: options.sandboxId,
      instanceId: options.instanceId,
      bootId: options.bootId,
      version: options.version,
      ...applier.held(),
      ...(lastError === undefined ? {} : { lastError: { kind: lastError.kind, message: lastError.message.slice(0, 1_000) } }),
    };
    const response = await request(session, { ':method': 'POST', ':path': '/v1/attach' }, encodeMessage(attach), requestMs);
    let reply: ReturnType<typeof decodeMessage<'admitted' | 'refused'>>;
    try {
      reply = decodeMessage(response.body, ['admitted', 'refused']);
    } catch (err) {
      throw new ControlFailure('protocol', `attach answered HTTP ${response.status} with an invalid body: ${describeError(err)}`, { cause: err });
    }
    if (reply.kind === 'refused') {
      refusedNotRetryable = !reply.retryable;
      throw new ControlFailure(
        'refused-by-supervisor',
        `${reply.code}: ${reply.message}${reply.retryable ? '' : ' (supervisor says retrying will not help until this is fixed)'}`,
      );
    }
    sessionId = reply.sessionId;
    connectedSince = now();
    disconnectedSince = undefined;
    hooks.onAdmitted();
    const outcomes = applier.applyAdmitted(reply);
    publish('attached');
    // Attached for the reconnect schedule once the supervisor has taken every ack of the admission.
    void Promise.all(outcomes.map((outcome) => acknowledge(session, outcome))).then((delivered) => {
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
      case 'policy':
        acknowledge(session, applier.applyPolicy(push));
        break;
      case 'credentials':
        acknowledge(session, applier.applyCredentials(push));
        break;
      case 'settings':
        applier.applySettings(push);
        break;
      case 'relay-open':
        openRelay(push, { session, sessionId: id, relayAllow: options.relayAllow ?? [], sink, active: relays });
        break;
      case 'withdraw':
        if (push.code === 'superseded') {
          const bootId = push.bootId ?? 'unknown';
          superseded = { bootId, sandboxId: options.sandboxId, instanceId: options.instanceId, at: now() };
          throw new ControlFailure('superseded', supersededMessage(superseded));
        }
        throw new ControlFailure('refused-by-supervisor', `withdrawn by the supervisor: ${push.reason}`);
    }
    publish();
    return undefined;
  }

  let statusChain: Promise<void> = Promise.resolve();
  /** Resolves true once the supervisor accepted the ack (or there was nothing to acknowledge); never rejects. */
  function acknowledge(session: ClientHttp2Session, outcome: ApplyOutcome): Promise<boolean> {
    const status: StatusMessage | undefined = outcome.status;
    if (status === undefined) return Promise.resolve(true);
    // Acks go out in order, one at a time: the supervisor's table must end at the newest.
    const delivered = statusChain.then(async () => {
      try {
        const response = await request(session, { ':method': 'POST', ':path': '/v1/status', [SESSION_HEADER]: sessionId ?? '' }, encodeMessage(status), requestMs);
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
    request(session, { ':method': 'POST', ':path': '/v1/events', [SESSION_HEADER]: sessionId ?? '' }, batch.body, requestMs)
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
    async start() {
      if (loopDone !== undefined || closed) return;
      disconnectedSince = now();
      unsubscribe = options.events?.subscribe((event) => buffer.add(event));
      loopDone = loop().catch((err) => {
        options.logger?.error({ err }, 'control loop stopped unexpectedly');
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      unsubscribe?.();
      wake?.();
      live?.finish(undefined, 'closed');
      await loopDone;
      await statusChain;
      for (const relay of relays) relay.destroy();
      publish('closed');
    },
    state,
  };
}

const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

function validateOptions(options: ControlClientOptions): void {
  const problems: string[] = [];
  for (const key of ['sandboxId', 'instanceId', 'bootId'] as const) {
    if (!ID.test(options[key])) problems.push(`${key}: expected 1-128 characters of [A-Za-z0-9._:-]`);
  }
  if (!Number.isInteger(options.address.port) || options.address.port < 1 || options.address.port > 65_535) {
    problems.push('address.port: expected 1-65535');
  }
  if (options.address.host === '') problems.push('address.host: empty');
  if (problems.length > 0) {
    throw new BoundaryError('CONFIG_INVALID', `control client: ${problems.join('; ')}`, {
      issues: problems.map((message) => ({ code: 'CONFIG_INVALID', path: `control.${message.split(':')[0]}`, message })),
    });
  }
}

/** A fresh id per process start, for `bootId` (main.ts may pass its own). */
export function newBootId(): string {
  return randomUUID();
}
