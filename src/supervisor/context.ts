// The state the supervisor's parts share, passed as one SupervisorContext that createSupervisor builds: the live
// sessions, the tables, the store and its writer, the relay broker, the event stream and the per-sandbox
// configuration. Types only.

import type { ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type { RefusedMessage, WireMiddlewareService } from '../control/messages.js';
import type { Logger } from '../telemetry/logger.js';
import type { SandboxDenials } from './denials.js';
import type { RelayBroker } from './relays.js';
import type { StateWriter } from './state-writer.js';
import type { SupervisorStore } from './store/store.js';
import type { SupervisorEvent } from './supervisor.js';
import type { SandboxConfig, Tables } from './tables.js';

export interface LiveSession {
  readonly sessionId: string;
  readonly session: ServerHttp2Session;
  readonly sandboxId: string;
  readonly instanceId: string;
  /** The boundary process behind the session (attach's bootId) and where it connected from, for conflict logs. */
  readonly bootId: string;
  readonly remote: string;
  watch: ServerHttp2Stream | undefined;
}

export type ConfigLookup = { ok: true; config: SandboxConfig } | { ok: false; refusal: RefusedMessage };

export interface SupervisorContext {
  readonly logger: Logger;
  readonly now: () => number;
  /** This process: unique per start, so replicas on one store and a restarted replica are told apart. */
  readonly replicaId: string;
  readonly attachDeadlineMs: number;
  /** The durable state every replica shares; `tables` is this replica's working copy of it and of its sessions. */
  readonly store: SupervisorStore;
  readonly writer: StateWriter;
  readonly tables: Tables;
  /** Live sessions by session id; Map order is attach order. */
  readonly live: Map<string, LiveSession>;
  readonly broker: RelayBroker;
  /** Recent denials per sandbox, from forwarded events (GET /v1/sandboxes/<id>/denials). */
  readonly denials: SandboxDenials;
  emit(event: SupervisorEvent): void;
  configFor(sandboxId: string): ConfigLookup;
  /** `--middleware-config`'s services, sent with every admission and policy push (none: the field is left out). */
  middleware(): readonly WireMiddlewareService[];
  /** True from the moment close() begins. */
  closing(): boolean;
}
