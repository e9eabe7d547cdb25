// The synthetic address pool (docs/dns.md#synthetic-pools): policy-DNS names -> per-epoch synthetic IPs, with lifetimes,
// a quarantine before an address goes to another name, and the limits of synthetic-budget.ts.
// Pure state: no sockets, no timers, no file I/O (dns/epoch.ts persists the epoch); time is the injected `now`.

import { createHash, randomUUID as cryptoRandomUUID } from 'node:crypto';
import { BoundaryError } from '../shared/errors.js';
import { type Cidr, formatIp, hasCleanHostBits, parseCidr, parseIp } from './ip.js';
import { MAX_MAPPING_TTL_SECONDS, MIN_MAPPING_TTL_SECONDS, mappingLimits, mostAddressesTaken } from './synthetic-budget.js';
import { createReservations, type KeyRecord } from './synthetic-reuse.js';
import { ipv4Window, ipv6Window, offsetOf, type Window } from './synthetic-window.js';

export const DEFAULT_SYNTHETIC_CIDR = '198.18.0.0/15';
const DEFAULT_SYNTHETIC_V6_CIDR = 'fd23:6f70:656e::/48';

type Family = 4 | 6;

/** Addresses that passed destination validation for one port, and the endpoints that allow that port. */
export interface MappingRoute {
  readonly port: number;
  readonly endpointIds: readonly string[];
  readonly addresses: readonly string[];
}

export interface MappingRequest {
  /** Normalised name (lower case, no trailing dot). */
  readonly name: string;
  readonly family: Family;
  /** contractDigest() of the eligible endpoints. */
  readonly contract: string;
  readonly endpointIds: readonly string[];
  /** Validated real addresses, in answer order (union over routes). */
  readonly addresses: readonly string[];
  readonly routes: readonly MappingRoute[];
  /** Upstream TTL; clamped to [MIN_MAPPING_TTL_SECONDS, MAX_MAPPING_TTL_SECONDS]. */
  readonly ttlSeconds: number;
  readonly policyGeneration: number;
}

export interface Mapping extends MappingRequest {
  /** UUID, new for every publication (refreshes included). */
  readonly id: string;
  readonly key: string;
  readonly syntheticIp: string;
  readonly ports: readonly number[];
  /** 1 for the first publication of this key while it holds its address, +1 per refresh. */
  readonly mappingGeneration: number;
  readonly epoch: number;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/** `rate-limited` and `live-limit` come from the budget (synthetic-budget.ts); `exhausted` only when no address is free. */
export const ALLOCATE_FAILURES = ['exhausted', 'rate-limited', 'live-limit', 'stale-generation'] as const;
export type AllocateFailure = (typeof ALLOCATE_FAILURES)[number];

type AllocateResult =
  | { readonly ok: true; readonly mapping: Mapping; readonly refreshed: boolean; readonly highWater: boolean }
  | { readonly ok: false; readonly failure: AllocateFailure; readonly message: string };

/** `expired`: the address still belongs to this mapping (live connection or quarantine); it admits nothing until refreshed. */
export type SyntheticLookup =
  | { readonly state: 'live'; readonly mapping: Mapping }
  | { readonly state: 'expired'; readonly mapping: Mapping }
  | { readonly state: 'missing' };

export type PoolEvent = { readonly kind: 'published' | 'expired'; readonly mapping: Mapping };

interface PoolStats {
  /** Addresses that belong to a mapping now: live, held by a connection or in quarantine. */
  readonly reserved: Readonly<Record<Family, number>>;
  readonly capacity: Readonly<Record<Family, number>>;
  /** Mappings not yet expired. */
  readonly live: number;
  readonly quarantined: number;
}

export interface SyntheticPool {
  readonly epoch: number;
  /** The current windows as CIDR text: only these addresses are ever handed out or captured. */
  readonly windows: Readonly<Record<Family, string>>;
  allocate(request: MappingRequest): AllocateResult;
  lookup(ip: string): SyntheticLookup;
  lookupKey(name: string, family: Family, contract: string): SyntheticLookup;
  /** True when `ip` lies inside the current window of its family. */
  contains(ip: string): boolean;
  /**
   * One connection accepted on `ip` (capture): the address goes to no other name until the returned release has
   * been called (once per connection; later calls do nothing). An address with no mapping holds nothing.
   */
  hold(ip: string): () => void;
  /** Reports mappings whose expiry has passed (their addresses stay theirs) and moves those past the refresh grace
   *  that no connection holds into quarantine. The pool owns no timer: the DNS server calls this every
   *  SECOND_TICK_MS (1 s, docs/dns.md#synthetic-pools). */
  sweep(): readonly Mapping[];
  stats(): PoolStats;
  subscribe(listener: (event: PoolEvent) => void): () => void;
}

interface SyntheticPoolOptions {
  readonly epoch: number;
  readonly now: () => number;
  /** IPv4 range, prefix 8-24 with clean host bits; default 198.18.0.0/15. */
  readonly cidr?: string;
  readonly v6Cidr?: string;
  readonly randomUUID?: () => string;
}

export function createSyntheticPool(options: SyntheticPoolOptions): SyntheticPool {
  if (!Number.isSafeInteger(options.epoch) || options.epoch < 0) {
    throw new BoundaryError('DNS_EPOCH_INVALID', `epoch ${options.epoch} is not a non-negative integer`);
  }
  const { epoch, now } = options;
  const uuid = options.randomUUID ?? cryptoRandomUUID;
  const windows: Record<Family, Window> = {
    4: ipv4Window(validV4(options.cidr ?? DEFAULT_SYNTHETIC_CIDR), epoch),
    6: ipv6Window(validV6(options.v6Cidr ?? DEFAULT_SYNTHETIC_V6_CIDR), epoch),
  };
  const limits = mappingLimits(Math.min(windows[4].capacity, windows[6].capacity));
  // The limits are what makes exhaustion impossible; a window they do not fit is a configuration error.
  for (const window of [windows[4], windows[6]]) {
    if (mostAddressesTaken(limits) > window.capacity) {
      throw new BoundaryError('ADDRESS_INVALID', `synthetic window ${window.cidr} is smaller than the ${mostAddressesTaken(limits)} addresses its limits may take`);
    }
  }
  const reservations = createReservations(windows, limits, now);
  const listeners = new Set<(event: PoolEvent) => void>();

  function publish(event: PoolEvent): void {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure must not corrupt the pool or stop other listeners.
      }
    }
  }

  function state(record: KeyRecord | undefined): SyntheticLookup {
    if (record?.last === undefined) return { state: 'missing' };
    return record.last.expiresAt > now() ? { state: 'live', mapping: record.last } : { state: 'expired', mapping: record.last };
  }

  const canonical = (ip: string): string | undefined => {
    const parsed = parseIp(ip);
    return parsed === undefined ? undefined : formatIp(parsed);
  };

  return {
    epoch,
    windows: { 4: windows[4].cidr, 6: windows[6].cidr },
    allocate(request) {
      const key = mappingKey(request.name, request.family, request.contract);
      const at = now();
      const current = reservations.byKey(key)?.last;
      if (current !== undefined && current.expiresAt > at && current.policyGeneration > request.policyGeneration) {
        return {
          ok: false,
          failure: 'stale-generation',
          message: `${request.name}: generation ${request.policyGeneration} is older than the live mapping's ${current.policyGeneration}`,
        };
      }
      const claim = reservations.claim(key, request.family, request.contract);
      if (!claim.ok) return { ok: false, failure: claim.failure, message: `${request.name}: ${claim.message}` };
      const { record } = claim;
      record.generation++;
      const ttlSeconds = clampTtl(request.ttlSeconds);
      const mapping: Mapping = Object.freeze({
        name: request.name,
        family: request.family,
        contract: request.contract,
        endpointIds: Object.freeze([...request.endpointIds]),
        addresses: Object.freeze([...request.addresses]),
        routes: Object.freeze(request.routes.map((r) => Object.freeze({ ...r }))),
        ports: Object.freeze([...new Set(request.routes.map((r) => r.port))].sort((a, b) => a - b)),
        ttlSeconds,
        policyGeneration: request.policyGeneration,
        id: uuid(),
        key,
        syntheticIp: record.ip,
        mappingGeneration: record.generation,
        epoch,
        createdAt: at,
        expiresAt: at + ttlSeconds * 1000,
      });
      record.last = mapping;
      record.expiryReported = false;
      publish({ kind: 'published', mapping });
      return { ok: true, mapping, refreshed: claim.refreshed, highWater: claim.highWater };
    },
    lookup(ip) {
      const text = canonical(ip);
      return text === undefined ? { state: 'missing' } : state(reservations.byIp(text));
    },
    lookupKey(name, family, contract) {
      return state(reservations.byKey(mappingKey(name, family, contract)));
    },
    contains(ip) {
      const parsed = parseIp(ip);
      if (parsed === undefined) return false;
      const window = windows[parsed.family];
      const offset = offsetOf(window.base, parsed);
      return offset !== undefined && offset < window.capacity;
    },
    hold(ip) {
      // Capture passes the listener's own address, already in canonical form: parse only when it is not.
      if (reservations.byIp(ip) !== undefined) return reservations.hold(ip);
      const text = canonical(ip);
      return text === undefined ? () => undefined : reservations.hold(text);
    },
    sweep() {
      const expired = reservations.sweep();
      for (const mapping of expired) publish({ kind: 'expired', mapping });
      return expired;
    },
    stats() {
      const use = reservations.stats();
      return { reserved: use.taken, capacity: { 4: windows[4].capacity, 6: windows[6].capacity }, live: use.live, quarantined: use.quarantined };
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** The allocation key (docs/dns.md#synthetic-pools): normalised name, family and the digest of the eligible endpoint contracts. */
function mappingKey(name: string, family: Family, contract: string): string {
  return `${family}|${contract}|${name}`;
}

/** What contractDigest reads of an endpoint; declared here so net/ needs nothing from policy/ (its Endpoint fits). */
export interface EndpointContract {
  readonly id: string;
  readonly host: string | undefined;
  readonly hostKind: string;
  readonly ports: readonly number[];
  readonly protocol: string;
  readonly tls: string;
  readonly enforcement: string;
  readonly allowedIps: readonly string[];
}

/**
 * Digest of what an endpoint promises a capture connection: a port added, a protocol or allowed_ips changed
 * gives a different digest and so a different synthetic address. Order-independent.
 */
export function contractDigest(endpoints: readonly EndpointContract[]): string {
  const contracts = endpoints
    .map((e) => ({
      id: e.id,
      host: e.host ?? null,
      hostKind: e.hostKind,
      ports: [...e.ports].sort((a, b) => a - b),
      protocol: e.protocol,
      tls: e.tls,
      enforcement: e.enforcement,
      allowedIps: [...e.allowedIps].sort(),
    }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return createHash('sha256').update(JSON.stringify(contracts)).digest('hex').slice(0, 32);
}

function clampTtl(ttlSeconds: number): number {
  if (!Number.isFinite(ttlSeconds)) return MIN_MAPPING_TTL_SECONDS;
  return Math.min(MAX_MAPPING_TTL_SECONDS, Math.max(MIN_MAPPING_TTL_SECONDS, Math.floor(ttlSeconds)));
}

/** Why `text` cannot be the IPv4 synthetic range, or undefined when it can (config validation uses this). */
export function syntheticCidrProblem(text: string): string | undefined {
  const cidr = parseCidr(text);
  if (cidr === undefined || cidr.ip.family !== 4 || !hasCleanHostBits(cidr) || cidr.prefix < 8 || cidr.prefix > 24) {
    return `synthetic CIDR ${JSON.stringify(text)} must be an IPv4 network /8 to /24 with clean host bits`;
  }
  return undefined;
}

function validV4(text: string): Cidr {
  const cidr = parseCidr(text);
  const problem = syntheticCidrProblem(text);
  if (cidr === undefined || problem !== undefined) throw new BoundaryError('ADDRESS_INVALID', problem ?? text);
  return cidr;
}

function validV6(text: string): Cidr {
  const cidr = parseCidr(text);
  if (cidr === undefined || cidr.ip.family !== 6 || !hasCleanHostBits(cidr) || cidr.prefix > 96) {
    throw new BoundaryError('ADDRESS_INVALID', `synthetic IPv6 CIDR ${JSON.stringify(text)} must be an IPv6 network of /96 or wider with clean host bits`);
  }
  return cidr;
}
