// The supervisor's durable state behind one interface: sandbox generations and configuration (never secrets),
// known and expected instances with their attach deadlines, which replica holds each session, acknowledged
// generations, withdrawals and their hook deliveries, replica heartbeats. Implemented in memory (optionally
// persisted to --state-dir, one replica) and on PostgreSQL (any number of replicas). Types and limits only.

import type { ControlSettings, StatusError } from '../../control/messages.js';

/** Withdrawals kept once their hook is delivered (or when no hook is configured); pending ones are never dropped. */
export const MAX_WITHDRAWAL_RECORDS = 1_024;
/** A replica refreshes its heartbeat this often... */
export const REPLICA_HEARTBEAT_MS = 1_000;
/** ...and is taken for dead when its heartbeat is older than this: its sessions become detached instances. */
export const REPLICA_LEASE_MS = 5_000;

/** One sandbox's configuration as every replica pushes it. Credentials are represented by their hash only. */
export interface StoredSandbox {
  readonly sandboxId: string;
  readonly generation: number;
  readonly policyHash: string;
  readonly policyText: string;
  readonly credentialsHash: string;
  readonly settings: ControlSettings;
}

export interface SandboxPublication {
  readonly sandboxId: string;
  readonly policyHash: string;
  readonly policyText: string;
  readonly credentialsHash: string;
  readonly settings: ControlSettings;
}

export interface StoredInstance {
  readonly sandboxId: string;
  readonly instanceId: string;
  /** `expected` until a boundary process attaches. */
  readonly bootId: string;
  readonly version: string;
  /** The replica holding its session; null while detached or expected. */
  readonly replicaId: string | null;
  readonly sessionId: string | null;
  /** Withdrawn at this time (ms since the epoch) unless it attaches first; null while attached. */
  readonly deadlineAt: number | null;
  readonly effectiveGeneration: number | null;
  readonly policyHash: string | null;
  readonly lastStatus: string | null;
  readonly lastError: StatusError | null;
  /** When the instance was last admitted (null: never), and when it last detached (null: attached or never). */
  readonly attachedAt: number | null;
  readonly detachedAt: number | null;
}

type HookState = 'none' | 'pending' | 'delivered';

export interface StoredWithdrawal {
  /** Unique and stable: the idempotency key a webhook receives. */
  readonly id: string;
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly reason: string;
  readonly at: number;
  /** The replica that withdrew it. */
  readonly replicaId: string;
  readonly hook: HookState;
  readonly attempts: number;
  /** Pending: not tried again before this. */
  readonly nextAttemptAt: number | null;
  readonly lastError: string | null;
  readonly deliveredAt: number | null;
}

export interface AttachRecord {
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly bootId: string;
  readonly version: string;
  readonly replicaId: string;
  readonly sessionId: string;
  readonly at: number;
}

export interface StatusRecord {
  readonly state: string;
  readonly generation: number;
  readonly policyHash: string;
  readonly error: StatusError | null;
}

/** What another replica (or this one) changed; delivered to subscribers on every replica, the writer's included. */
export type StoreChange =
  | { readonly kind: 'sandbox'; readonly sandboxId: string; readonly generation: number }
  | {
      readonly kind: 'attached';
      readonly sandboxId: string;
      readonly instanceId: string;
      readonly replicaId: string;
      readonly sessionId: string;
      readonly bootId: string;
    };

export interface SupervisorStore {
  /** `memory`, `file` (--state-dir) or `postgres`: named in logs and /readyz. */
  readonly kind: 'memory' | 'file' | 'postgres';
  /** Opens (and for PostgreSQL migrates) the store; rejects with a readable message when it cannot. */
  start(): Promise<void>;
  /** Flushes what is pending and closes. */
  close(): Promise<void>;
  /**
   * Why this store holds changes it could not make durable (the --state-dir file's last write failed, and it is
   * being written again until it succeeds); undefined when everything it acknowledged is durable. /readyz shows it.
   */
  writeFailure(): string | undefined;

  /**
   * Compare and set: when any of policyHash, credentialsHash or settings differs from the stored sandbox (or
   * there is none), writes the publication with generation + 1 (1 for a new sandbox) and notifies; otherwise
   * changes nothing. Returns the stored sandbox either way. Two replicas publishing the same change bump once.
   */
  publishSandbox(publication: SandboxPublication): Promise<StoredSandbox>;
  /** Moves the generation to at least `generation` (a boundary held a later one); returns the stored sandbox. */
  raiseGeneration(sandboxId: string, generation: number): Promise<StoredSandbox | undefined>;
  sandbox(sandboxId: string): Promise<StoredSandbox | undefined>;
  sandboxes(): Promise<StoredSandbox[]>;

  /**
   * An instance the supervisor expects: inserted (bootId `expected`) with this deadline when unknown; a known
   * detached instance keeps the earlier of its deadline and this one; an attached instance is unchanged.
   */
  expect(sandboxId: string, instanceId: string, deadlineAt: number): Promise<void>;
  /** Admitted on `replicaId`: inserted or updated, deadline cleared. Notifies (`attached`). */
  attached(record: AttachRecord): Promise<void>;
  /** A status ack of the session; ignored unless `sessionId` is still the instance's session. */
  status(sandboxId: string, instanceId: string, sessionId: string, status: StatusRecord): Promise<void>;
  /** The session ended: detached with this deadline; ignored unless `sessionId` is still the instance's session. */
  detached(sandboxId: string, instanceId: string, sessionId: string, at: number, deadlineAt: number): Promise<void>;
  instances(): Promise<StoredInstance[]>;
  instance(sandboxId: string, instanceId: string): Promise<StoredInstance | undefined>;

  /**
   * Atomically removes every instance that is detached (no replica) with a deadline at or before `now` and
   * records a withdrawal for each (hook `pending` when `hook` is true, else `none`), with `reason(instance)`.
   * Across replicas on one database an instance is claimed by exactly one caller.
   */
  claimDue(now: number, replicaId: string, hook: boolean, reason: (instance: StoredInstance) => string): Promise<StoredWithdrawal[]>;

  /** Records this replica alive at `now`. */
  heartbeat(replicaId: string, now: number): Promise<void>;
  /** Every instance held by `replicaId` becomes detached with `deadlineAt` (a replica closing); returns how many. */
  releaseReplica(replicaId: string, at: number, deadlineAt: number): Promise<number>;
  /**
   * Every instance held by a replica whose heartbeat is older than `staleBefore` (or that never sent one) and
   * that is not `self` becomes detached with `deadlineAt`; the stale replicas are forgotten. Returns how many.
   */
  releaseStaleReplicas(self: string, staleBefore: number, at: number, deadlineAt: number): Promise<number>;

  /**
   * Leases up to `limit` pending hook deliveries whose next attempt is due at `now`, so no other caller gets
   * them before `leaseUntil`; each returned one has `attempts` already incremented.
   */
  claimHookDeliveries(now: number, leaseUntil: number, limit: number): Promise<StoredWithdrawal[]>;
  hookDelivered(id: string, at: number): Promise<void>;
  hookFailed(id: string, error: string, nextAttemptAt: number): Promise<void>;
  /** Newest first: every pending one, then the rest up to MAX_WITHDRAWAL_RECORDS. */
  withdrawals(): Promise<StoredWithdrawal[]>;

  /** Changes from any replica sharing the store, this one's included. Returns the unsubscribe function. */
  subscribe(listener: (change: StoreChange) => void): () => void;
}
