// The replicated SupervisorStore on PostgreSQL: every replica shares one database; compare-and-set and claims are
// single statements or transactions, and changes reach every replica by NOTIFY on one channel. Holds no secrets;
// the schema and rows live in postgres-schema.ts, the pool and the LISTEN connection in postgres-connection.ts.

import type { Logger } from '../../telemetry/logger.js';
import { createPostgresConnection } from './postgres-connection.js';
import {
  migrate,
  NOTIFY_CHANNEL,
  notifyIn,
  parseChange,
  type Queryable,
  type Row,
  TRIM_LOCK_KEY,
  toInstance,
  toSandbox,
  toWithdrawal,
} from './postgres-schema.js';
import { MAX_WITHDRAWAL_RECORDS, type StoredSandbox, type StoredWithdrawal, type SupervisorStore } from './store.js';
import { createSubscribers } from './subscribers.js';
import { byDeadline, byNextAttempt, newWithdrawal, orderWithdrawals, publicWithdrawal } from './withdrawals.js';

/**
 * Drops the oldest settled withdrawals past MAX_WITHDRAWAL_RECORDS (withdrawalsToDrop's rule, in SQL). One trimmer
 * at a time: a transaction that finds another trimming skips it (the next insert trims again, and withdrawals()
 * never lists more than the bound).
 */
async function trimWithdrawals(db: Queryable): Promise<void> {
  const { rows } = await db.query<Row>('SELECT pg_try_advisory_xact_lock($1) AS mine', [TRIM_LOCK_KEY]);
  if (rows[0]?.mine !== true) return;
  await db.query(
    `DELETE FROM supervisor_withdrawals WHERE id IN (SELECT id FROM supervisor_withdrawals WHERE hook <> 'pending'
       ORDER BY at DESC, seq DESC OFFSET $1)`,
    [MAX_WITHDRAWAL_RECORDS],
  );
}

const DETACH = 'replica_id = NULL, session_id = NULL';

export function createPostgresStore(options: { connectionString: string; logger: Logger; poolSize?: number }): SupervisorStore {
  const { logger } = options;
  const subscribers = createSubscribers(logger);
  const { pool, failure, query, transaction, listen, close } = createPostgresConnection({
    ...options,
    channel: NOTIFY_CHANNEL,
    onPayload(payload) {
      const change = parseChange(payload);
      if (change === undefined) logger.warn({ channel: NOTIFY_CHANNEL }, 'supervisor store: ignored a malformed change notification');
      else subscribers.notify(change);
    },
  });

  async function sandboxIn(db: Queryable, sandboxId: string): Promise<StoredSandbox | undefined> {
    const { rows } = await db.query<Row>('SELECT * FROM supervisor_sandboxes WHERE sandbox_id = $1', [sandboxId]);
    return rows[0] === undefined ? undefined : toSandbox(rows[0]);
  }

  return {
    kind: 'postgres',

    async start() {
      try {
        await transaction('starting: connecting and migrating the schema', migrate);
        await listen().catch((err: unknown) => {
          throw failure('starting: listening for change notifications', err);
        });
      } catch (err) {
        await pool.end().catch(() => undefined);
        throw err;
      }
    },

    close,

    // Every change is one transaction: it either happened or its caller saw the error; nothing waits to be written.
    writeFailure: () => undefined,

    publishSandbox(p) {
      return transaction(`publishing sandbox ${p.sandboxId}`, async (db) => {
        // The WHERE makes this a compare-and-set: a concurrent publisher of the same content waits on the row,
        // then finds nothing different and leaves the generation alone.
        const { rows } = await db.query<Row>(
          `INSERT INTO supervisor_sandboxes AS s (sandbox_id, generation, policy_hash, policy_text, credentials_hash, settings)
           VALUES ($1, 1, $2, $3, $4, $5::jsonb)
           ON CONFLICT (sandbox_id) DO UPDATE SET generation = s.generation + 1, policy_hash = EXCLUDED.policy_hash,
             policy_text = EXCLUDED.policy_text, credentials_hash = EXCLUDED.credentials_hash, settings = EXCLUDED.settings
           WHERE s.policy_hash <> EXCLUDED.policy_hash OR s.credentials_hash <> EXCLUDED.credentials_hash
             OR s.settings <> EXCLUDED.settings
           RETURNING *`,
          [p.sandboxId, p.policyHash, p.policyText, p.credentialsHash, JSON.stringify(p.settings)],
        );
        if (rows[0] === undefined) return (await sandboxIn(db, p.sandboxId)) as StoredSandbox;
        const stored = toSandbox(rows[0]);
        await notifyIn(db, { kind: 'sandbox', sandboxId: stored.sandboxId, generation: stored.generation });
        return stored;
      });
    },

    raiseGeneration(sandboxId, generation) {
      return transaction(`raising the generation of sandbox ${sandboxId}`, async (db) => {
        const { rows } = await db.query<Row>(
          'UPDATE supervisor_sandboxes SET generation = $2 WHERE sandbox_id = $1 AND generation < $2 RETURNING *',
          [sandboxId, generation],
        );
        if (rows[0] === undefined) return sandboxIn(db, sandboxId);
        await notifyIn(db, { kind: 'sandbox', sandboxId, generation });
        return toSandbox(rows[0]);
      });
    },

    async sandbox(sandboxId) {
      try {
        return await sandboxIn(pool, sandboxId);
      } catch (err) {
        throw failure(`reading sandbox ${sandboxId}`, err);
      }
    },

    async sandboxes() {
      return (await query('listing sandboxes', 'SELECT * FROM supervisor_sandboxes ORDER BY sandbox_id')).rows.map(toSandbox);
    },

    async expect(sandboxId, instanceId, deadlineAt) {
      // LEAST ignores NULL, so a detached instance without a deadline takes this one.
      await query(
        `expecting instance ${sandboxId}/${instanceId}`,
        `INSERT INTO supervisor_instances AS i (sandbox_id, instance_id, boot_id, version, deadline_at)
         VALUES ($1, $2, 'expected', '', $3)
         ON CONFLICT (sandbox_id, instance_id) DO UPDATE SET deadline_at = LEAST(i.deadline_at, EXCLUDED.deadline_at)
         WHERE i.replica_id IS NULL`,
        [sandboxId, instanceId, deadlineAt],
      );
    },

    attached(r) {
      return transaction(`recording the attach of ${r.sandboxId}/${r.instanceId}`, async (db) => {
        // A new boot has applied nothing yet: what the previous process acknowledged says nothing about it.
        const keep = (column: string) => `${column} = CASE WHEN i.boot_id = EXCLUDED.boot_id THEN i.${column} END`;
        await db.query(
          `INSERT INTO supervisor_instances AS i (sandbox_id, instance_id, boot_id, version, replica_id, session_id, attached_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (sandbox_id, instance_id) DO UPDATE SET boot_id = EXCLUDED.boot_id, version = EXCLUDED.version,
             replica_id = EXCLUDED.replica_id, session_id = EXCLUDED.session_id, deadline_at = NULL,
             attached_at = EXCLUDED.attached_at, detached_at = NULL, ${['effective_generation', 'policy_hash', 'last_status', 'last_error'].map(keep).join(', ')}`,
          [r.sandboxId, r.instanceId, r.bootId, r.version, r.replicaId, r.sessionId, r.at],
        );
        const { sandboxId, instanceId, replicaId, sessionId, bootId } = r;
        await notifyIn(db, { kind: 'attached', sandboxId, instanceId, replicaId, sessionId, bootId });
      });
    },

    async status(sandboxId, instanceId, sessionId, s) {
      await query(
        `recording the status of ${sandboxId}/${instanceId}`,
        `UPDATE supervisor_instances SET effective_generation = $4, policy_hash = $5, last_status = $6, last_error = $7::jsonb
         WHERE sandbox_id = $1 AND instance_id = $2 AND session_id = $3`,
        [sandboxId, instanceId, sessionId, s.generation, s.policyHash, s.state, s.error === null ? null : JSON.stringify(s.error)],
      );
    },

    async detached(sandboxId, instanceId, sessionId, at, deadlineAt) {
      await query(
        `recording the detach of ${sandboxId}/${instanceId}`,
        `UPDATE supervisor_instances SET ${DETACH}, deadline_at = $5, detached_at = $4
         WHERE sandbox_id = $1 AND instance_id = $2 AND session_id = $3`,
        [sandboxId, instanceId, sessionId, at, deadlineAt],
      );
    },

    async instances() {
      const sql = 'SELECT * FROM supervisor_instances ORDER BY sandbox_id, instance_id';
      return (await query('listing instances', sql)).rows.map(toInstance);
    },

    async instance(sandboxId, instanceId) {
      const sql = 'SELECT * FROM supervisor_instances WHERE sandbox_id = $1 AND instance_id = $2';
      const { rows } = await query(`reading instance ${sandboxId}/${instanceId}`, sql, [sandboxId, instanceId]);
      return rows[0] === undefined ? undefined : toInstance(rows[0]);
    },

    claimDue(now, replicaId, hook, reason) {
      return transaction('claiming due instances', async (db) => {
        // SKIP LOCKED: concurrent claimers split the due rows between them instead of waiting (or deadlocking);
        // a row is deleted by exactly one transaction, and its withdrawal commits with that delete.
        const { rows } = await db.query<Row>(
          `WITH due AS (SELECT sandbox_id, instance_id FROM supervisor_instances
             WHERE replica_id IS NULL AND deadline_at <= $1 FOR UPDATE SKIP LOCKED)
           DELETE FROM supervisor_instances i USING due
           WHERE i.sandbox_id = due.sandbox_id AND i.instance_id = due.instance_id RETURNING i.*`,
          [now],
        );
        if (rows.length === 0) return [];
        const claimed = rows.map(toInstance).sort(byDeadline);
        const withdrawals: StoredWithdrawal[] = claimed.map((instance) => newWithdrawal(instance, { now, replicaId, hook, reason }));
        await db.query(
          `INSERT INTO supervisor_withdrawals (id, sandbox_id, instance_id, reason, at, replica_id, hook, next_attempt_at)
           SELECT id, sandbox_id, instance_id, reason, $5, $6, $7, $8
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS t(id, sandbox_id, instance_id, reason, n)
           ORDER BY n`,
          [
            withdrawals.map((w) => w.id), withdrawals.map((w) => w.sandboxId), withdrawals.map((w) => w.instanceId),
            withdrawals.map((w) => w.reason), now, replicaId, hook ? 'pending' : 'none', hook ? now : null,
          ],
        );
        await trimWithdrawals(db);
        return withdrawals;
      });
    },

    async heartbeat(replicaId, now) {
      await query(
        `recording the heartbeat of replica ${replicaId}`,
        `INSERT INTO supervisor_replicas (replica_id, heartbeat_at) VALUES ($1, $2)
         ON CONFLICT (replica_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at`,
        [replicaId, now],
      );
    },

    async releaseReplica(replicaId, at, deadlineAt) {
      const { rowCount } = await query(
        `releasing the instances of replica ${replicaId}`,
        `UPDATE supervisor_instances SET ${DETACH}, deadline_at = $3, detached_at = $2 WHERE replica_id = $1`,
        [replicaId, at, deadlineAt],
      );
      return rowCount ?? 0;
    },

    releaseStaleReplicas(self, staleBefore, at, deadlineAt) {
      return transaction('releasing stale replicas', async (db) => {
        // A holder with no heartbeat row at all (it never sent one, or was forgotten) is stale too.
        const { rowCount } = await db.query(
          `UPDATE supervisor_instances i SET ${DETACH}, deadline_at = $4, detached_at = $3
           WHERE i.replica_id IS NOT NULL AND i.replica_id <> $1 AND NOT EXISTS (
             SELECT 1 FROM supervisor_replicas r WHERE r.replica_id = i.replica_id AND r.heartbeat_at >= $2)`,
          [self, staleBefore, at, deadlineAt],
        );
        await db.query('DELETE FROM supervisor_replicas WHERE replica_id <> $1 AND heartbeat_at < $2', [self, staleBefore]);
        return rowCount ?? 0;
      });
    },

    async claimHookDeliveries(now, leaseUntil, limit) {
      const { rows } = await query(
        'leasing hook deliveries',
        `WITH due AS (SELECT id FROM supervisor_withdrawals
           WHERE hook = 'pending' AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
           ORDER BY next_attempt_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED)
         UPDATE supervisor_withdrawals w SET attempts = w.attempts + 1, lease_until = $2 FROM due WHERE w.id = due.id
         RETURNING w.*`,
        [now, leaseUntil, Math.max(0, limit)],
      );
      return rows.map(toWithdrawal).sort(byNextAttempt).map(publicWithdrawal);
    },

    hookDelivered(id, at) {
      return transaction(`recording the delivery of withdrawal ${id}`, async (db) => {
        await db.query(
          `UPDATE supervisor_withdrawals SET hook = 'delivered', delivered_at = $2, next_attempt_at = NULL, lease_until = NULL
           WHERE id = $1 AND hook = 'pending'`,
          [id, at],
        );
        await trimWithdrawals(db);
      });
    },

    async hookFailed(id, error, nextAttemptAt) {
      await query(
        `recording a failed delivery of withdrawal ${id}`,
        `UPDATE supervisor_withdrawals SET last_error = $2, next_attempt_at = $3, lease_until = NULL WHERE id = $1 AND hook = 'pending'`,
        [id, error, nextAttemptAt],
      );
    },

    async withdrawals() {
      const { rows } = await query(
        'listing withdrawals',
        `(SELECT * FROM supervisor_withdrawals WHERE hook = 'pending')
         UNION ALL (SELECT * FROM supervisor_withdrawals WHERE hook <> 'pending' ORDER BY at DESC, seq DESC LIMIT $1)`,
        [MAX_WITHDRAWAL_RECORDS],
      );
      return orderWithdrawals(rows.map(toWithdrawal)).map(publicWithdrawal);
    },

    subscribe: subscribers.subscribe,
  };
}
