// Which synthetic address belongs to which allocation key, and when an address may go to another key
// (docs/dns.md#synthetic-pools): live, held by a connection, in quarantine, free. Applies synthetic-budget.ts to
// every mapping made live. Pure state on an injected `now`; synthetic.ts builds the mappings and tells the world.

import type { Mapping } from './synthetic.js';
import { type BudgetRefusal, createMappingBudget, MAPPING_REFRESH_GRACE_MS, type MappingLimits, SYNTHETIC_QUARANTINE_MS } from './synthetic-budget.js';
import { formatIp } from './ip.js';
import { offsetIp, type Window } from './synthetic-window.js';

type Family = 4 | 6;

/** One high-water event per family and epoch when this share of the window is taken. */
const HIGH_WATER_RATIO = 0.8;

/** `live`: counted by the budget (unexpired, in the refresh grace or held); `held`: brought out of quarantine by a connection. */
type RecordState = 'live' | 'held' | 'quarantined';

export interface KeyRecord {
  readonly key: string;
  readonly contract: string;
  readonly ip: string;
  readonly family: Family;
  generation: number;
  /** The mapping published last; undefined only between claim() and the caller's first publication. */
  last: Mapping | undefined;
  holds: number;
  state: RecordState;
  expiryReported: boolean;
}

interface WindowUse {
  readonly window: Window;
  /** Offsets below this have been handed out in this epoch; the rest were never used. */
  cursor: number;
  taken: number;
  /** Oldest first (Map order), with the time each entered; an address leaves only after SYNTHETIC_QUARANTINE_MS. */
  readonly quarantine: Map<KeyRecord, number>;
  highWaterReported: boolean;
}

type Claim =
  | { readonly ok: true; readonly record: KeyRecord; readonly refreshed: boolean; readonly highWater: boolean }
  | { readonly ok: false; readonly failure: BudgetRefusal | 'exhausted'; readonly message: string };

export interface Reservations {
  byKey(key: string): KeyRecord | undefined;
  byIp(ip: string): KeyRecord | undefined;
  /** The record of `key`, made live: refreshed for free when it is live, else within the budget and with an address. */
  claim(key: string, family: Family, contract: string): Claim;
  hold(ip: string): () => void;
  /** Mappings that expired since the last sweep; records past the refresh grace with no connection go into quarantine. */
  sweep(): Mapping[];
  stats(): { readonly taken: Readonly<Record<Family, number>>; readonly live: number; readonly quarantined: number };
}

/** `limits` must fit the windows (createSyntheticPool checks mostAddressesTaken); tests may pass looser ones. */
export function createReservations(windows: Readonly<Record<Family, Window>>, limits: MappingLimits, now: () => number): Reservations {
  const uses: Record<Family, WindowUse> = { 4: use(windows[4]), 6: use(windows[6]) };
  const budget = createMappingBudget(limits, now);
  const keys = new Map<string, KeyRecord>();
  const ips = new Map<string, KeyRecord>();
  /** Records the budget counts as live; the sweep walks only these. */
  const live = new Set<KeyRecord>();

  function enterQuarantine(record: KeyRecord, at: number): void {
    if (record.state === 'live') {
      live.delete(record);
      budget.release(record.contract);
    }
    record.state = 'quarantined';
    uses[record.family].quarantine.set(record, at);
  }

  /** A never-used address of the window, else the oldest quarantined one whose quarantine is over (its record goes). */
  function freeAddress(u: WindowUse, at: number): string | undefined {
    if (u.cursor < u.window.capacity) return formatIp(offsetIp(u.window.base, u.cursor++));
    const oldest = u.quarantine.entries().next();
    if (oldest.done === true || at - oldest.value[1] < SYNTHETIC_QUARANTINE_MS) return undefined;
    const [record] = oldest.value;
    u.quarantine.delete(record);
    keys.delete(record.key);
    ips.delete(record.ip);
    u.taken--;
    return record.ip;
  }

  return {
    byKey: (key) => keys.get(key),
    byIp: (ip) => ips.get(ip),
    claim(key, family, contract) {
      let record = keys.get(key);
      const refreshed = record !== undefined;
      if (record?.state === 'live') return { ok: true, record, refreshed, highWater: false };
      const no = budget.refusal(contract);
      if (no !== undefined) return { ok: false, failure: no.refusal, message: no.message };
      let highWater = false;
      if (record === undefined) {
        const u = uses[family];
        const ip = freeAddress(u, now());
        if (ip === undefined) return { ok: false, failure: 'exhausted', message: `synthetic window ${u.window.cidr} is exhausted (${u.window.capacity} addresses)` };
        u.taken++;
        if (!u.highWaterReported && u.taken >= Math.ceil(u.window.capacity * HIGH_WATER_RATIO)) {
          u.highWaterReported = true;
          highWater = true;
        }
        record = { key, contract, ip, family, generation: 0, last: undefined, holds: 0, state: 'live', expiryReported: false };
        keys.set(key, record);
        ips.set(ip, record);
      } else {
        uses[family].quarantine.delete(record);
        record.state = 'live';
      }
      budget.spend(contract);
      live.add(record);
      return { ok: true, record, refreshed, highWater };
    },
    hold(ip) {
      const record = ips.get(ip);
      if (record === undefined) return () => undefined;
      record.holds++;
      if (record.state === 'quarantined') {
        // A connection to an address in quarantine (capture refuses it at once): its quarantine starts again after.
        uses[record.family].quarantine.delete(record);
        record.state = 'held';
      }
      let released = false;
      return function release() {
        if (released) return;
        released = true;
        record.holds--;
        if (record.holds === 0 && record.state === 'held') enterQuarantine(record, now());
      };
    },
    sweep() {
      const at = now();
      const expired: Mapping[] = [];
      for (const record of live) {
        const last = record.last;
        if (last === undefined || last.expiresAt > at) continue;
        if (!record.expiryReported) {
          record.expiryReported = true;
          expired.push(last);
        }
        if (record.holds === 0 && at - last.expiresAt >= MAPPING_REFRESH_GRACE_MS) enterQuarantine(record, at);
      }
      budget.sweep();
      return expired;
    },
    stats() {
      const at = now();
      let unexpired = 0;
      for (const record of live) if (record.last !== undefined && record.last.expiresAt > at) unexpired++;
      return { taken: { 4: uses[4].taken, 6: uses[6].taken }, live: unexpired, quarantined: uses[4].quarantine.size + uses[6].quarantine.size };
    },
  };
}

function use(window: Window): WindowUse {
  return { window, cursor: 0, taken: 0, quarantine: new Map(), highWaterReported: false };
}
