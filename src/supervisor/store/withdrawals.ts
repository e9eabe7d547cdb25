// The withdrawal rules both stores share: the record a claim creates, the order withdrawals are listed and leased
// in, and which settled ones are kept. Pure: no I/O, no clock (times come in as arguments).

import { randomUUID } from 'node:crypto';
import { MAX_WITHDRAWAL_RECORDS, type StoredInstance, type StoredWithdrawal } from './store.js';

/** A withdrawal as a store keeps it: `seq` orders equal times, `leaseUntil` hides a leased hook delivery. */
export interface KeptWithdrawal extends StoredWithdrawal {
  readonly seq: number;
  readonly leaseUntil?: number | null;
}

interface ClaimContext {
  readonly now: number;
  readonly replicaId: string;
  readonly hook: boolean;
  readonly reason: (instance: StoredInstance) => string;
}

/** The withdrawal claimDue records for one due instance: hook `pending` (due now) when a hook is configured. */
export function newWithdrawal(instance: StoredInstance, { now, replicaId, hook, reason }: ClaimContext): StoredWithdrawal {
  return {
    id: randomUUID(), sandboxId: instance.sandboxId, instanceId: instance.instanceId, reason: reason(instance), at: now,
    replicaId, hook: hook ? 'pending' : 'none', attempts: 0, nextAttemptAt: hook ? now : null, lastError: null, deliveredAt: null,
  };
}

/** Due instances are withdrawn earliest deadline first. */
export const byDeadline = (a: StoredInstance, b: StoredInstance): number => (a.deadlineAt ?? 0) - (b.deadlineAt ?? 0);

/** Hook deliveries are leased earliest next attempt first, ties in insertion order. */
export const byNextAttempt = (a: KeptWithdrawal, b: KeptWithdrawal): number =>
  (a.nextAttemptAt ?? 0) - (b.nextAttemptAt ?? 0) || a.seq - b.seq;

/** Newest first, ties broken by insertion order (PostgreSQL: ORDER BY at DESC, seq DESC). */
const newestFirst = (a: KeptWithdrawal, b: KeptWithdrawal): number => b.at - a.at || b.seq - a.seq;

/** Pending first, then the rest up to MAX_WITHDRAWAL_RECORDS; newest first within each. */
export function orderWithdrawals<T extends KeptWithdrawal>(rows: readonly T[]): T[] {
  const pending = rows.filter((w) => w.hook === 'pending').sort(newestFirst);
  const rest = rows.filter((w) => w.hook !== 'pending').sort(newestFirst);
  return [...pending, ...rest.slice(0, MAX_WITHDRAWAL_RECORDS)];
}

/** The settled withdrawals past MAX_WITHDRAWAL_RECORDS, oldest last: the ones a store drops. Pending ones never are. */
export function withdrawalsToDrop<T extends KeptWithdrawal>(rows: readonly T[]): T[] {
  const settled = rows.filter((w) => w.hook !== 'pending');
  if (settled.length <= MAX_WITHDRAWAL_RECORDS) return [];
  return settled.sort(newestFirst).slice(MAX_WITHDRAWAL_RECORDS);
}

/** What callers see: the store's bookkeeping stripped. */
export function publicWithdrawal({ seq: _seq, leaseUntil: _lease, ...w }: KeptWithdrawal): StoredWithdrawal {
  return w;
}
