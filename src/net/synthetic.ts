// The synthetic address pool (docs/dns.md#synthetic-pools): policy-DNS names -> per-epoch synthetic IPs, with lifetimes.
// Pure state: no sockets, no timers, no file I/O (dns/epoch.ts persists the epoch); time is the injected `now`.

import { createHash, randomUUID as cryptoRandomUUID } from 'node:crypto';
import { BoundaryError } from '../errors.js';
import { formatIp, hasCleanHostBits, type Ip, parseCidr, parseIp } from './ip.js';

export const DEFAULT_SYNTHETIC_CIDR = '198.18.0.0/15';
const DEFAULT_SYNTHETIC_V6_CIDR = 'fd23:6f70:656e::/48';
/** The IPv4 range is split into this many windows; the window in use is `epoch mod SYNTHETIC_WINDOWS`. */
const SYNTHETIC_WINDOWS = 256;
/** IPv6 windows are /119: 512 addresses each. */
const SYNTHETIC_V6_WINDOW_ADDRESSES = 512;
const MIN_MAPPING_TTL_SECONDS = 1;
const MAX_MAPPING_TTL_SECONDS = 30;
/** One high-water event per family and epoch when this share of the window is reserved. */
const HIGH_WATER_RATIO = 0.8;

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
  /** 1 for the first publication of this key in this epoch, +1 per refresh. */
  readonly mappingGeneration: number;
  readonly epoch: number;
  readonly createdAt: number;
  readonly expiresAt: number;
}

const ALLOCATE_FAILURES = ['exhausted', 'stale-generation'] as const;
type AllocateFailure = (typeof ALLOCATE_FAILURES)[number];

type AllocateResult =
  | { readonly ok: true; readonly mapping: Mapping; readonly refreshed: boolean; readonly highWater: boolean }
  | { readonly ok: false; readonly failure: AllocateFailure; readonly message: string };

/** `expired`: the address was handed out in this epoch and stays reserved; it admits nothing until refreshed. */
export type SyntheticLookup =
  | { readonly state: 'live'; readonly mapping: Mapping }
  | { readonly state: 'expired'; readonly mapping: Mapping }
  | { readonly state: 'missing' };

export type PoolEvent = { readonly kind: 'published' | 'expired'; readonly mapping: Mapping };

interface PoolStats {
  readonly reserved: Readonly<Record<Family, number>>;
  readonly capacity: Readonly<Record<Family, number>>;
  readonly live: number;
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
  /** Drops live records whose expiry has passed (their addresses stay reserved); returns them. The pool owns no
   *  timer: the DNS server calls this every TICK_INTERVAL_MS (1 s, docs/dns.md#synthetic-pools). */
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

interface KeyRecord {
  readonly key: string;
  readonly ip: string;
  generation: number;
  last: Mapping | undefined;
}

interface Window {
  readonly base: Ip;
  readonly capacity: number;
  readonly cidr: string;
  cursor: number;
  highWaterReported: boolean;
}

export function createSyntheticPool(options: SyntheticPoolOptions): SyntheticPool {
  if (!Number.isSafeInteger(options.epoch) || options.epoch < 0) {
    throw new BoundaryError('DNS_EPOCH_INVALID', `epoch ${options.epoch} is not a non-negative integer`);
  }
  const { epoch, now } = options;
  const uuid = options.randomUUID ?? cryptoRandomUUID;
  const windows: Record<Family, Window> = {
    4: ipv4Window(options.cidr ?? DEFAULT_SYNTHETIC_CIDR, epoch),
    6: ipv6Window(options.v6Cidr ?? DEFAULT_SYNTHETIC_V6_CIDR, epoch),
  };
  const byKey = new Map<string, KeyRecord>();
  const byIp = new Map<string, KeyRecord>();
  const live = new Set<KeyRecord>();
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

  return {
    epoch,
    windows: { 4: windows[4].cidr, 6: windows[6].cidr },
    allocate(request) {
      const key = mappingKey(request.name, request.family, request.contract);
      const at = now();
      let record = byKey.get(key);
      const current = record?.last;
      if (current !== undefined && current.expiresAt > at && current.policyGeneration > request.policyGeneration) {
        return {
          ok: false,
          failure: 'stale-generation',
          message: `${request.name}: generation ${request.policyGeneration} is older than the live mapping's ${current.policyGeneration}`,
        };
      }
      let highWater = false;
      const refreshed = record !== undefined;
      if (record === undefined) {
        const window = windows[request.family];
        // Sequential and never rewound within an epoch: an address once handed out is never given to another key.
        if (window.cursor >= window.capacity) {
          return { ok: false, failure: 'exhausted', message: `synthetic window ${window.cidr} is exhausted (${window.capacity} addresses)` };
        }
        const ip = formatIp(offsetIp(window.base, window.cursor));
        window.cursor++;
        if (!window.highWaterReported && window.cursor >= Math.ceil(window.capacity * HIGH_WATER_RATIO)) {
          window.highWaterReported = true;
          highWater = true;
        }
        record = { key, ip, generation: 0, last: undefined };
        byKey.set(key, record);
        byIp.set(ip, record);
      }
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
      live.add(record);
      publish({ kind: 'published', mapping });
      return { ok: true, mapping, refreshed, highWater };
    },
    lookup(ip) {
      const parsed = parseIp(ip);
      return parsed === undefined ? { state: 'missing' } : state(byIp.get(formatIp(parsed)));
    },
    lookupKey(name, family, contract) {
      return state(byKey.get(mappingKey(name, family, contract)));
    },
    contains(ip) {
      const parsed = parseIp(ip);
      if (parsed === undefined) return false;
      const window = windows[parsed.family];
      const offset = offsetOf(window.base, parsed);
      return offset !== undefined && offset < window.capacity;
    },
    sweep() {
      const at = now();
      const expired: Mapping[] = [];
      for (const record of live) {
        if (record.last === undefined || record.last.expiresAt > at) continue;
        live.delete(record);
        expired.push(record.last);
      }
      for (const mapping of expired) publish({ kind: 'expired', mapping });
      return expired;
    },
    stats() {
      return {
        reserved: { 4: windows[4].cursor, 6: windows[6].cursor },
        capacity: { 4: windows[4].capacity, 6: windows[6].capacity },
        live: live.size,
      };
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

function ipv4Window(text: string, epoch: number): Window {
  const cidr = parseCidr(text);
  const problem = syntheticCidrProblem(text);
  if (cidr === undefined || problem !== undefined) throw new BoundaryError('ADDRESS_INVALID', problem ?? text);
  const capacity = 2 ** (32 - cidr.prefix) / SYNTHETIC_WINDOWS;
  const base = offsetIp(cidr.ip, (epoch % SYNTHETIC_WINDOWS) * capacity);
  return { base, capacity, cidr: `${formatIp(base)}/${cidr.prefix + 8}`, cursor: 0, highWaterReported: false };
}

function ipv6Window(text: string, epoch: number): Window {
  const cidr = parseCidr(text);
  if (cidr === undefined || cidr.ip.family !== 6 || !hasCleanHostBits(cidr) || cidr.prefix > 96) {
    throw new BoundaryError('ADDRESS_INVALID', `synthetic IPv6 CIDR ${JSON.stringify(text)} must be an IPv6 network of /96 or wider with clean host bits`);
  }
  const capacity = SYNTHETIC_V6_WINDOW_ADDRESSES;
  const base = offsetIp(cidr.ip, (epoch % SYNTHETIC_WINDOWS) * capacity);
  return { base, capacity, cidr: `${formatIp(base)}/119`, cursor: 0, highWaterReported: false };
}

/** `base + offset` for an offset below 2^32; the callers' windows never carry past the low 32 bits. */
function offsetIp(base: Ip, offset: number): Ip {
  const bytes = Uint8Array.from(base.bytes);
  const n = bytes.length;
  let carry = offset;
  for (let i = n - 1; i >= 0 && carry > 0; i--) {
    const sum = (bytes[i] ?? 0) + (carry & 0xff);
    bytes[i] = sum & 0xff;
    carry = Math.floor(carry / 256) + (sum > 0xff ? 1 : 0);
  }
  return { family: base.family, bytes };
}

/** `ip - base` when ip shares every byte of base above the low 32 bits; otherwise undefined. */
function offsetOf(base: Ip, ip: Ip): number | undefined {
  if (base.family !== ip.family) return undefined;
  const n = base.bytes.length;
  for (let i = 0; i < n - 4; i++) if (base.bytes[i] !== ip.bytes[i]) return undefined;
  const read = (b: Uint8Array) => ((b[n - 4] ?? 0) * 2 ** 24 + ((b[n - 3] ?? 0) << 16) + ((b[n - 2] ?? 0) << 8) + (b[n - 1] ?? 0));
  const delta = read(ip.bytes) - read(base.bytes);
  return delta >= 0 ? delta : undefined;
}
