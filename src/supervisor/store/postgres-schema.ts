// What the PostgreSQL store keeps and how: the schema and its migration (serialised across replicas, refusing a
// newer schema), rows to Stored* values, and change notifications to and from their JSON payload. No connections.

import type pg from 'pg';
import { BoundaryError } from '../../shared/errors.js';
import type { StoreChange, StoredInstance, StoredSandbox, StoredWithdrawal } from './store.js';
import type { KeptWithdrawal } from './withdrawals.js';

/** The schema this code creates and reads; a database migrated by newer code is refused. */
const SCHEMA_VERSION = 1;
/** The one channel every change is announced on. */
export const NOTIFY_CHANNEL = 'boundary_supervisor';
/** Serialises migrations of replicas starting together (an arbitrary constant key, the same in every replica). */
const MIGRATION_LOCK_KEY = 0x62_6f_75_6e;
/** Serialises trims of the settled withdrawals. */
export const TRIM_LOCK_KEY = MIGRATION_LOCK_KEY + 1;

const MIGRATION = `
CREATE TABLE IF NOT EXISTS supervisor_sandboxes (
  sandbox_id text PRIMARY KEY, generation bigint NOT NULL, policy_hash text NOT NULL, policy_text text NOT NULL,
  credentials_hash text NOT NULL, settings jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS supervisor_instances (
  sandbox_id text NOT NULL, instance_id text NOT NULL, boot_id text NOT NULL, version text NOT NULL,
  replica_id text, session_id text, deadline_at bigint, effective_generation bigint, policy_hash text,
  last_status text, last_error jsonb, attached_at bigint, detached_at bigint, PRIMARY KEY (sandbox_id, instance_id));
CREATE INDEX IF NOT EXISTS supervisor_instances_due ON supervisor_instances (deadline_at) WHERE replica_id IS NULL;
CREATE INDEX IF NOT EXISTS supervisor_instances_replica ON supervisor_instances (replica_id);
CREATE TABLE IF NOT EXISTS supervisor_withdrawals (
  id text PRIMARY KEY, seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE, sandbox_id text NOT NULL,
  instance_id text NOT NULL, reason text NOT NULL, at bigint NOT NULL, replica_id text NOT NULL,
  hook text NOT NULL CHECK (hook IN ('none', 'pending', 'delivered')), attempts integer NOT NULL DEFAULT 0,
  next_attempt_at bigint, last_error text, delivered_at bigint, lease_until bigint);
CREATE INDEX IF NOT EXISTS supervisor_withdrawals_pending ON supervisor_withdrawals (next_attempt_at) WHERE hook = 'pending';
CREATE TABLE IF NOT EXISTS supervisor_replicas (replica_id text PRIMARY KEY, heartbeat_at bigint NOT NULL);
`;

export type Row = Record<string, unknown>;
export type Queryable = Pick<pg.ClientBase, 'query'>;

/** Brings the schema to SCHEMA_VERSION; run inside a transaction, which holds the migration lock until it ends. */
export async function migrate(db: Queryable): Promise<void> {
  // Two replicas starting together would race on CREATE TABLE IF NOT EXISTS; the lock ends with the transaction.
  await db.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
  await db.query('CREATE TABLE IF NOT EXISTS supervisor_schema (id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)');
  const found = await db.query<Row>('SELECT version FROM supervisor_schema WHERE id = 1');
  const version = found.rows[0] === undefined ? 0 : num(found.rows[0].version);
  if (version > SCHEMA_VERSION) {
    throw new BoundaryError(
      'STORE_STATE_INVALID',
      `the database has schema version ${version}; this supervisor knows up to ${SCHEMA_VERSION} (upgrade it)`,
    );
  }
  if (version === SCHEMA_VERSION) return;
  await db.query(MIGRATION);
  await db.query('INSERT INTO supervisor_schema (id, version) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET version = $1', [SCHEMA_VERSION]);
}

/** pg hands bigint back as a string; every stored time and generation is well inside Number's exact range. */
const num = (value: unknown): number => Number(value);
const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

export function toSandbox(r: Row): StoredSandbox {
  return {
    sandboxId: r.sandbox_id as string, generation: num(r.generation), policyHash: r.policy_hash as string,
    policyText: r.policy_text as string, credentialsHash: r.credentials_hash as string,
    settings: r.settings as StoredSandbox['settings'],
  };
}

export function toInstance(r: Row): StoredInstance {
  return {
    sandboxId: r.sandbox_id as string, instanceId: r.instance_id as string, bootId: r.boot_id as string,
    version: r.version as string, replicaId: (r.replica_id as string | null) ?? null, sessionId: (r.session_id as string | null) ?? null,
    deadlineAt: numOrNull(r.deadline_at), effectiveGeneration: numOrNull(r.effective_generation),
    policyHash: (r.policy_hash as string | null) ?? null, lastStatus: (r.last_status as string | null) ?? null,
    lastError: (r.last_error as StoredInstance['lastError']) ?? null, attachedAt: numOrNull(r.attached_at),
    detachedAt: numOrNull(r.detached_at),
  };
}

/** Without the lease: it matters only to the claiming query, which reads it in SQL. */
export function toWithdrawal(r: Row): KeptWithdrawal {
  return {
    id: r.id as string, sandboxId: r.sandbox_id as string, instanceId: r.instance_id as string, reason: r.reason as string,
    at: num(r.at), replicaId: r.replica_id as string, hook: r.hook as StoredWithdrawal['hook'], attempts: num(r.attempts),
    nextAttemptAt: numOrNull(r.next_attempt_at), lastError: (r.last_error as string | null) ?? null,
    deliveredAt: numOrNull(r.delivered_at), seq: num(r.seq),
  };
}

/** Announces `change` to every replica; inside a transaction it is delivered only if that commits. */
export function notifyIn(db: Queryable, change: StoreChange): Promise<unknown> {
  return db.query('SELECT pg_notify($1, $2)', [NOTIFY_CHANNEL, JSON.stringify(change)]);
}

/** A notification payload as a StoreChange, or undefined when it is not one (another writer on the channel). */
export function parseChange(payload: string | undefined): StoreChange | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(payload ?? '');
  } catch {
    return undefined;
  }
  const c = raw as Record<string, unknown> | null;
  if (c === null || typeof c !== 'object' || typeof c.sandboxId !== 'string') return undefined;
  if (c.kind === 'sandbox' && typeof c.generation === 'number') return { kind: 'sandbox', sandboxId: c.sandboxId, generation: c.generation };
  const strings = ['instanceId', 'replicaId', 'sessionId', 'bootId'].every((key) => typeof c[key] === 'string');
  if (c.kind === 'attached' && strings) return c as unknown as StoreChange;
  return undefined;
}
