// The boundary's side of the control channel: the reconnect loop around session.ts's one mTLS HTTP/2
// session, with backoff until closed or superseded by another process; the published ControlState; and a
// named event for every failure. Never decides policy (apply.ts does) and never imports supervisor/.

import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { BoundaryError, type Issue } from '../shared/errors.js';
import { parsePolicy } from '../policy/parse.js';
import { emptyPolicy } from '../policy/store.js';
import type { Policy } from '../policy/types.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import { type ApplyState, type CredentialTarget, createControlApplier, type MiddlewareTarget, type PolicyTarget } from './apply.js';
import { type BackoffOptions, createBackoff, type ReconnectReason } from './backoff.js';
import {
  type ControlLookup,
  ControlFailure,
  type ControlTls,
  type ControlTlsProvider,
  classifyError,
  fixedControlTls,
} from './dial.js';
import { describeError } from './protocol.js';
import { createEventBuffer, MAX_BUFFERED_EVENTS } from './events.js';
import { attachFailedEvent, sessionEndedEvent } from './failure-events.js';
import type { ControlErrorKind, RelayTarget } from './messages.js';
import { supersededMessage } from './readiness.js';
import { createSessionRunner, type SessionShared } from './session.js';

/** `superseded`: another boundary process took this (sandbox, instance); the loop has stopped for good. */
const CONTROL_PHASES = ['idle', 'connecting', 'attached', 'waiting', 'superseded', 'closed'] as const;
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
  /** Where the supervisor's middleware service registrations go; none: they are not applied. */
  readonly middleware?: MiddlewareTarget | undefined;
  /** Defaults: policy/parse.ts parsePolicy and policy/store.ts emptyPolicy, as in standalone mode. A parse may
   *  be async (attached.ts compiles large policies off the event loop); pushes still apply in order. */
  readonly parsePolicy?: ((text: string, options?: { source?: string }) => Policy | Promise<Policy>) | undefined;
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

export function createControlClient(options: ControlClientOptions): ControlClient {
  const { now, sink, address } = options;
  const supervisor = `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
  validateOptions(options);
  const applier = createControlApplier({
    store: options.store,
    credentials: options.credentials,
    middleware: options.middleware,
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
  const shared: SessionShared = {
    closed: false,
    live: undefined,
    sessionId: undefined,
    connectedSince: undefined,
    disconnectedSince: undefined,
    lastError: undefined,
    refusedNotRetryable: false,
    superseded: undefined,
    attachedBefore: false,
    failedSinceAttached: 0,
  };
  let failedAttempts = 0;
  let nextAttemptAt: number | undefined;
  let nextAttemptReason: ReconnectReason | undefined;
  let loopDone: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  let unsubscribe: (() => void) | undefined;

  function state(): ControlState {
    return {
      phase,
      supervisor,
      sessionId: shared.sessionId,
      connectedSince: shared.connectedSince,
      disconnectedSince: shared.disconnectedSince,
      lastError: shared.lastError,
      failedAttempts,
      failuresSinceHealthy: backoff.failures(),
      nextAttemptAt,
      nextAttemptReason,
      policy: applier.state(),
      events: { buffered: buffer.size(), ...buffer.stats() },
      relays: relays.size,
      superseded: shared.superseded,
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

  // Aborted by close(): a dial to a black-holed or silent supervisor would hold the drain for its timeouts.
  const closing = new AbortController();
  const { runSession, acksSettled } = createSessionRunner({ options, supervisor, applier, tlsForDial, buffer, relays, shared, closing: closing.signal, publish });

  async function loop(): Promise<void> {
    while (!shared.closed) {
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
      shared.live = undefined;
      shared.sessionId = undefined;
      shared.connectedSince = undefined;
      if (shared.closed) break;
      shared.disconnectedSince ??= now();
      if (failure !== undefined) shared.lastError = { kind: failure.kind, message: failure.message, at: now() };
      // The supervisor may close the session before its push is read, so the flag decides, not the failure.
      if (shared.superseded !== undefined) {
        stopSuperseded(shared.superseded);
        break;
      }
      if (admitted) {
        sink.emit(sessionEndedEvent({ address, failure, note }));
      } else if (failure !== undefined) {
        failedAttempts += 1;
        shared.failedSinceAttached += 1;
        sink.emit(attachFailedEvent({ address, supervisor, failure, retryable: !shared.refusedNotRetryable, attempt: failedAttempts }));
      }
      const { delayMs, reason } = backoff.next(attached ? { kind: 'session-ended' } : { kind: 'failed', retryable: !shared.refusedNotRetryable });
      shared.refusedNotRetryable = false;
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
    shared.lastError = { kind: failure.kind, message: failure.message, at: by.at };
    sink.emit(sessionEndedEvent({ address, failure, note: '' }));
    options.logger?.warn(
      { supervisor, sandboxId: by.sandboxId, instanceId: by.instanceId, bootId: options.bootId, supersededBy: by.bootId },
      `${failure.message}; this boundary stops re-attaching and keeps its last policy: restart it with a unique --instance-id, or stop the duplicate`,
    );
    publish('superseded');
  }

  return {
    async start() {
      if (loopDone !== undefined || shared.closed) return;
      shared.disconnectedSince = now();
      unsubscribe = options.events?.subscribe((event) => buffer.add(event));
      loopDone = loop().catch((err) => {
        options.logger?.error({ err }, 'control loop stopped unexpectedly');
      });
    },
    async close() {
      if (shared.closed) return;
      shared.closed = true;
      // First: a compile in flight is abandoned, so neither the loop nor the ack chain below waits for it.
      applier.close();
      closing.abort();
      unsubscribe?.();
      wake?.();
      shared.live?.finish(undefined, 'closed');
      await loopDone;
      await acksSettled();
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
