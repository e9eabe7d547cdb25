// The single-replica SupervisorStore: plain Maps, optionally persisted to one JSON state file (--state-dir)
// through state-file.ts; a mutation resolves once the write that holds it is durable. Never shared by replicas.

import type { Logger } from '../../telemetry/logger.js';
import { createStateFileWriter, prepareStateDir, readStateFile, type StateContents, type StateWithdrawal as Withdrawal } from './state-file.js';
import type {
  AttachRecord,
  SandboxPublication,
  StatusRecord,
  StoreChange,
  StoredInstance,
  StoredSandbox,
  StoredWithdrawal,
  SupervisorStore,
} from './store.js';
import { createSubscribers } from './subscribers.js';
import { byDeadline, byNextAttempt, newWithdrawal, orderWithdrawals, publicWithdrawal, withdrawalsToDrop } from './withdrawals.js';

const instanceKey = (sandboxId: string, instanceId: string) => `${sandboxId}\u0000${instanceId}`;

/** JSON with sorted keys, so settings compare by content and not by key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function createMemoryStore(options: { stateFile?: string; logger?: Logger } = {}): SupervisorStore {
  const { stateFile, logger } = options;
  const sandboxes = new Map<string, StoredSandbox>();
  const instances = new Map<string, StoredInstance>();
  const withdrawals = new Map<string, Withdrawal>();
  const heartbeats = new Map<string, number>();
  const subscribers = createSubscribers(logger);
  let nextSeq = 1;

  const notify = (changes: readonly StoreChange[]): void => {
    for (const change of changes) subscribers.notify(change);
  };
  const snapshot = (): StateContents => ({
    nextSeq,
    sandboxes: [...sandboxes.values()],
    instances: [...instances.values()],
    withdrawals: [...withdrawals.values()],
  });
  const writer = stateFile === undefined ? undefined : createStateFileWriter({ path: stateFile, snapshot, durable: notify, logger });

  /** Resolves once `changes` (and the state they came with) are durable, then tells subscribers. */
  function commit(...changes: StoreChange[]): Promise<void> {
    if (writer !== undefined) return writer.commit(changes);
    if (changes.length > 0) queueMicrotask(() => notify(changes));
    return Promise.resolve();
  }

  /** For a call that changed nothing: resolves once what it saw is durable (state-file.ts says why). */
  function settled(): Promise<void> {
    return writer?.settled() ?? Promise.resolve();
  }

  function detach(key: string, row: StoredInstance, at: number, deadlineAt: number): void {
    instances.set(key, { ...row, replicaId: null, sessionId: null, deadlineAt, detachedAt: at });
  }

  function trimWithdrawals(): void {
    for (const old of withdrawalsToDrop([...withdrawals.values()])) withdrawals.delete(old.id);
  }

  return {
    kind: stateFile === undefined ? 'memory' : 'file',

    async start() {
      if (stateFile === undefined || writer === undefined) return;
      await prepareStateDir(stateFile);
      const state = await readStateFile(stateFile);
      if (state !== undefined) {
        for (const s of state.sandboxes) sandboxes.set(s.sandboxId, s);
        for (const i of state.instances) instances.set(instanceKey(i.sandboxId, i.instanceId), i);
        for (const w of state.withdrawals) withdrawals.set(w.id, w);
        nextSeq = state.nextSeq;
        logger?.info({ stateFile, sandboxes: sandboxes.size, instances: instances.size }, 'supervisor state loaded');
      }
      // Written once now: a directory the supervisor cannot write refuses the start, not the first operator call.
      await writer.writeNow();
    },

    writeFailure: () => writer?.failure(),

    async close() {
      await writer?.close();
    },

    async publishSandbox(publication: SandboxPublication) {
      const stored = sandboxes.get(publication.sandboxId);
      const same =
        stored !== undefined &&
        stored.policyHash === publication.policyHash &&
        stored.credentialsHash === publication.credentialsHash &&
        canonical(stored.settings) === canonical(publication.settings);
      if (same) {
        await settled();
        return stored;
      }
      const next: StoredSandbox = { ...publication, generation: (stored?.generation ?? 0) + 1 };
      sandboxes.set(next.sandboxId, next);
      await commit({ kind: 'sandbox', sandboxId: next.sandboxId, generation: next.generation });
      return next;
    },

    async raiseGeneration(sandboxId: string, generation: number) {
      const stored = sandboxes.get(sandboxId);
      if (stored === undefined || stored.generation >= generation) {
        await settled();
        return stored;
      }
      const next = { ...stored, generation };
      sandboxes.set(sandboxId, next);
      await commit({ kind: 'sandbox', sandboxId, generation });
      return next;
    },

    sandbox: async (sandboxId: string) => sandboxes.get(sandboxId),
    sandboxes: async () => [...sandboxes.values()],

    async expect(sandboxId: string, instanceId: string, deadlineAt: number) {
      const key = instanceKey(sandboxId, instanceId);
      const row = instances.get(key);
      if (row === undefined) {
        instances.set(key, {
          sandboxId, instanceId, bootId: 'expected', version: '', replicaId: null, sessionId: null, deadlineAt,
          effectiveGeneration: null, policyHash: null, lastStatus: null, lastError: null, attachedAt: null, detachedAt: null,
        });
      } else if (row.replicaId === null) {
        const earlier = row.deadlineAt === null ? deadlineAt : Math.min(row.deadlineAt, deadlineAt);
        if (earlier === row.deadlineAt) return settled();
        instances.set(key, { ...row, deadlineAt: earlier });
      } else {
        return settled();
      }
      await commit();
    },

    async attached(record: AttachRecord) {
      const { sandboxId, instanceId, bootId, version, replicaId, sessionId, at } = record;
      const key = instanceKey(sandboxId, instanceId);
      const row = instances.get(key);
      // A new boot has applied nothing yet: what the previous process acknowledged says nothing about it.
      const keep = row !== undefined && row.bootId === bootId;
      instances.set(key, {
        sandboxId, instanceId, bootId, version, replicaId, sessionId, deadlineAt: null,
        effectiveGeneration: keep ? row.effectiveGeneration : null,
        policyHash: keep ? row.policyHash : null,
        lastStatus: keep ? row.lastStatus : null,
        lastError: keep ? row.lastError : null,
        attachedAt: at,
        detachedAt: null,
      });
      await commit({ kind: 'attached', sandboxId, instanceId, replicaId, sessionId, bootId });
    },

    async status(sandboxId: string, instanceId: string, sessionId: string, status: StatusRecord) {
      const key = instanceKey(sandboxId, instanceId);
      const row = instances.get(key);
      if (row === undefined || row.sessionId !== sessionId) return settled();
      instances.set(key, {
        ...row, effectiveGeneration: status.generation, policyHash: status.policyHash, lastStatus: status.state, lastError: status.error,
      });
      await commit();
    },

    async detached(sandboxId: string, instanceId: string, sessionId: string, at: number, deadlineAt: number) {
      const key = instanceKey(sandboxId, instanceId);
      const row = instances.get(key);
      if (row === undefined || row.sessionId !== sessionId) return settled();
      detach(key, row, at, deadlineAt);
      await commit();
    },

    instances: async () => [...instances.values()],
    instance: async (sandboxId: string, instanceId: string) => instances.get(instanceKey(sandboxId, instanceId)),

    async claimDue(now, replicaId, hook, reason) {
      const due = [...instances.entries()]
        .filter(([, i]) => i.replicaId === null && i.deadlineAt !== null && i.deadlineAt <= now)
        .sort(([, a], [, b]) => byDeadline(a, b));
      if (due.length === 0) return [];
      const claimed: StoredWithdrawal[] = [];
      for (const [key, instance] of due) {
        instances.delete(key);
        const withdrawal = newWithdrawal(instance, { now, replicaId, hook, reason });
        withdrawals.set(withdrawal.id, { ...withdrawal, seq: nextSeq++, leaseUntil: null });
        claimed.push(withdrawal);
      }
      trimWithdrawals();
      await commit();
      return claimed;
    },

    // Heartbeats are not persisted: after a restart the previous process's sessions count as held by a replica
    // that never sent one, which releaseStaleReplicas treats as stale, as it should.
    async heartbeat(replicaId: string, now: number) {
      heartbeats.set(replicaId, now);
    },

    async releaseReplica(replicaId: string, at: number, deadlineAt: number) {
      let count = 0;
      for (const [key, row] of instances) {
        if (row.replicaId !== replicaId) continue;
        detach(key, row, at, deadlineAt);
        count++;
      }
      if (count > 0) await commit();
      return count;
    },

    async releaseStaleReplicas(self: string, staleBefore: number, at: number, deadlineAt: number) {
      const stale = (replica: string) => replica !== self && (heartbeats.get(replica) ?? -Infinity) < staleBefore;
      let count = 0;
      for (const [key, row] of instances) {
        if (row.replicaId === null || !stale(row.replicaId)) continue;
        detach(key, row, at, deadlineAt);
        count++;
      }
      for (const replica of [...heartbeats.keys()]) if (stale(replica)) heartbeats.delete(replica);
      if (count > 0) await commit();
      return count;
    },

    async claimHookDeliveries(now: number, leaseUntil: number, limit: number) {
      const due = [...withdrawals.values()]
        .filter((w) => w.hook === 'pending' && (w.nextAttemptAt ?? 0) <= now && (w.leaseUntil === null || w.leaseUntil <= now))
        .sort(byNextAttempt)
        .slice(0, Math.max(0, limit));
      if (due.length === 0) return [];
      const leased = due.map((w) => ({ ...w, attempts: w.attempts + 1, leaseUntil }));
      for (const w of leased) withdrawals.set(w.id, w);
      await commit();
      return leased.map(publicWithdrawal);
    },

    async hookDelivered(id: string, at: number) {
      const w = withdrawals.get(id);
      if (w === undefined || w.hook !== 'pending') return;
      withdrawals.set(id, { ...w, hook: 'delivered', deliveredAt: at, nextAttemptAt: null, leaseUntil: null });
      trimWithdrawals();
      await commit();
    },

    async hookFailed(id: string, error: string, nextAttemptAt: number) {
      const w = withdrawals.get(id);
      if (w === undefined || w.hook !== 'pending') return;
      withdrawals.set(id, { ...w, lastError: error, nextAttemptAt, leaseUntil: null });
      await commit();
    },

    withdrawals: async () => orderWithdrawals([...withdrawals.values()]).map(publicWithdrawal),

    subscribe: subscribers.subscribe,
  };
}
