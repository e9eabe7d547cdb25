// The SSRF address table (docs/destinations.md#address-classes): one IP literal -> class, tier, metadata.
// Pure and allocation-light: CIDR tables are precomputed as integers/bytes at load. Never resolves names.

import { type Ip, parseIp } from './ip.js';

/** Closed set, usable as a metric label. `invalid` is anything that is not a canonical IP literal. */
export const ADDRESS_CLASSES = [
  'public',
  'private',
  'loopback',
  'link-local',
  'metadata',
  'unspecified',
  'cgnat',
  'ietf-protocol',
  'documentation',
  'benchmarking',
  'multicast',
  'broadcast',
  'reserved',
  'ula',
  'site-local',
  'teredo',
  'nat64',
  'discard',
  'invalid',
] as const;
export type AddressClass = (typeof ADDRESS_CLASSES)[number];

/** `blocked`: denied on every plan. `internal`: denied on the public-only plan only. Ordered by strictness. */
const ADDRESS_TIERS = ['public', 'internal', 'blocked'] as const;
type AddressTier = (typeof ADDRESS_TIERS)[number];

export interface AddressInfo {
  readonly class: AddressClass;
  readonly tier: AddressTier;
  /** A cloud metadata service address (169.254.169.254, fd00:ec2::254, 100.100.100.200, 192.0.0.192). */
  readonly metadata: boolean;
  /** The IPv4 address carried inside an IPv6 one (mapped, compatible, NAT64, 6to4), dotted quad. */
  readonly embedded?: string;
}

function info(cls: AddressClass, tier: AddressTier, metadata = false): AddressInfo {
  return Object.freeze({ class: cls, tier, metadata });
}

const PUBLIC = info('public', 'public');
const INVALID = info('invalid', 'blocked');

interface V4Row {
  readonly base: number;
  readonly mask: number;
  readonly info: AddressInfo;
}

function v4(cidr: string, result: AddressInfo): V4Row {
  const [text = '', prefixText = '32'] = cidr.split('/');
  const [a = 0, b = 0, c = 0, d = 0] = text.split('.').map(Number);
  const prefix = Number(prefixText);
  const mask = prefix === 0 ? 0 : (0xffff_ffff << (32 - prefix)) >>> 0;
  return { base: (((a << 24) | (b << 16) | (c << 8) | d) & mask) >>> 0, mask, info: result };
}

// First match wins: the most specific rows come first.
const V4_TABLE: readonly V4Row[] = [
  v4('169.254.169.254/32', info('metadata', 'blocked', true)),
  v4('100.100.100.200/32', info('cgnat', 'internal', true)),
  v4('192.0.0.192/32', info('ietf-protocol', 'internal', true)),
  v4('255.255.255.255/32', info('broadcast', 'blocked')),
  v4('0.0.0.0/8', info('unspecified', 'blocked')),
  v4('127.0.0.0/8', info('loopback', 'blocked')),
  v4('169.254.0.0/16', info('link-local', 'blocked')),
  v4('224.0.0.0/4', info('multicast', 'blocked')),
  v4('240.0.0.0/4', info('reserved', 'blocked')),
  // Our synthetic pool: a real upstream there is either a loop back into boundary or a spoof.
  v4('198.18.0.0/15', info('benchmarking', 'blocked')),
  v4('10.0.0.0/8', info('private', 'internal')),
  v4('172.16.0.0/12', info('private', 'internal')),
  v4('192.168.0.0/16', info('private', 'internal')),
  v4('100.64.0.0/10', info('cgnat', 'internal')),
  v4('192.0.0.0/24', info('ietf-protocol', 'internal')),
  v4('192.0.2.0/24', info('documentation', 'internal')),
  v4('198.51.100.0/24', info('documentation', 'internal')),
  v4('203.0.113.0/24', info('documentation', 'internal')),
  // Deprecated 6to4 relay anycast (RFC 7526): nothing legitimate answers there any more.
  v4('192.88.99.0/24', info('reserved', 'internal')),
];

function classifyV4Word(word: number): AddressInfo {
  for (const row of V4_TABLE) if (((word & row.mask) >>> 0) === row.base) return row.info;
  return PUBLIC;
}

/** How an IPv6 row is handled: a fixed answer, or "unwrap the IPv4 at `offset` and classify that". */
type V6Action =
  | { readonly kind: 'fixed'; readonly info: AddressInfo }
  | { readonly kind: 'embedded'; readonly offset: number; readonly floor: AddressTier; readonly wrapper: AddressClass };

interface V6Row {
  readonly bytes: Uint8Array;
  readonly prefix: number;
  readonly action: V6Action;
}

function v6(cidr: string, action: V6Action): V6Row {
  const [text = '', prefixText = '128'] = cidr.split('/');
  const ip = parseIp(text);
  if (ip === undefined || ip.family !== 6) throw new Error(`bad table row ${cidr}`);
  return { bytes: ip.bytes, prefix: Number(prefixText), action };
}

/**
 * IPv6 ranges that carry an IPv4 address at byte `offset`; such an address is classified as the IPv4 it
 * carries, and never below `floor` (then as `wrapper`). policy/endpoint-options.ts derives V10's ranges from it.
 */
export const IPV4_EMBEDDINGS: readonly {
  readonly cidr: string;
  readonly offset: number;
  readonly floor: AddressTier;
  readonly wrapper: AddressClass;
}[] = [
  // ::ffff:10.0.0.5 is 10.0.0.5. Classify the embedded IPv4, or a private address passes as public.
  { cidr: '::ffff:0:0/96', offset: 12, floor: 'public', wrapper: 'public' },
  // Deprecated IPv4-compatible form: never routed publicly, so at least internal.
  { cidr: '::/96', offset: 12, floor: 'internal', wrapper: 'reserved' },
  { cidr: '64:ff9b::/96', offset: 12, floor: 'public', wrapper: 'nat64' },
  { cidr: '2002::/16', offset: 2, floor: 'public', wrapper: 'public' },
];

const fixed = (result: AddressInfo): V6Action => ({ kind: 'fixed', info: result });

const V6_TABLE: readonly V6Row[] = [
  v6('::/128', fixed(info('unspecified', 'blocked'))),
  v6('::1/128', fixed(info('loopback', 'blocked'))),
  v6('fd00:ec2::254/128', fixed(info('metadata', 'blocked', true))),
  // Disjoint from every row below except ::/8, so they can sit together here, before it.
  ...IPV4_EMBEDDINGS.map(({ cidr, offset, floor, wrapper }) => v6(cidr, { kind: 'embedded', offset, floor, wrapper })),
  v6('64:ff9b:1::/48', fixed(info('nat64', 'internal'))),
  v6('2001::/32', fixed(info('teredo', 'internal'))),
  v6('2001:2::/48', fixed(info('benchmarking', 'internal'))),
  v6('2001:db8::/32', fixed(info('documentation', 'internal'))),
  v6('3fff::/20', fixed(info('documentation', 'internal'))),
  v6('100::/64', fixed(info('discard', 'internal'))),
  v6('fe80::/10', fixed(info('link-local', 'blocked'))),
  v6('fec0::/10', fixed(info('site-local', 'internal'))),
  v6('fc00::/7', fixed(info('ula', 'internal'))),
  v6('ff00::/8', fixed(info('multicast', 'blocked'))),
  v6('::/8', fixed(info('reserved', 'internal'))),
];
// Only 2000::/3 is allocated as global unicast; anything else left over is unassigned space.
const GLOBAL_UNICAST = v6('2000::/3', fixed(PUBLIC));
const UNASSIGNED_V6 = info('reserved', 'internal');

function matchesV6(row: V6Row, bytes: Uint8Array): boolean {
  const whole = row.prefix >>> 3;
  for (let i = 0; i < whole; i++) if (bytes[i] !== row.bytes[i]) return false;
  const bits = row.prefix & 7;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return ((bytes[whole] ?? 0) & mask) === ((row.bytes[whole] ?? 0) & mask);
}

const TIER_RANK: Readonly<Record<AddressTier, number>> = { public: 0, internal: 1, blocked: 2 };

function classifyEmbedded(bytes: Uint8Array, action: V6Action & { kind: 'embedded' }): AddressInfo {
  const o = action.offset;
  const a = bytes[o] ?? 0;
  const b = bytes[o + 1] ?? 0;
  const c = bytes[o + 2] ?? 0;
  const d = bytes[o + 3] ?? 0;
  const inner = classifyV4Word(((a << 24) | (b << 16) | (c << 8) | d) >>> 0);
  const raised = TIER_RANK[action.floor] > TIER_RANK[inner.tier];
  return {
    class: raised ? action.wrapper : inner.class,
    tier: raised ? action.floor : inner.tier,
    metadata: inner.metadata,
    embedded: `${a}.${b}.${c}.${d}`,
  };
}

/** Classifies parsed bytes. IPv6 forms that carry an IPv4 address are classified by that address. */
export function classifyIp(ip: Ip): AddressInfo {
  const bytes = ip.bytes;
  if (ip.family === 4) {
    const word = (((bytes[0] ?? 0) << 24) | ((bytes[1] ?? 0) << 16) | ((bytes[2] ?? 0) << 8) | (bytes[3] ?? 0)) >>> 0;
    return classifyV4Word(word);
  }
  for (const row of V6_TABLE) {
    if (!matchesV6(row, bytes)) continue;
    return row.action.kind === 'fixed' ? row.action.info : classifyEmbedded(bytes, row.action);
  }
  return matchesV6(GLOBAL_UNICAST, bytes) ? PUBLIC : UNASSIGNED_V6;
}

/** Classifies an IP literal in canonical text form (no brackets, no zone). Anything else is `invalid`/blocked. */
export function classifyAddress(ip: string): AddressInfo {
  // Hot path: a dotted quad is read straight into a 32-bit word, with no arrays or regular expressions.
  const word = parseDottedQuad(ip);
  if (word !== undefined) return classifyV4Word(word);
  if (!ip.includes(':')) return INVALID;
  const parsed = parseIp(ip);
  return parsed === undefined ? INVALID : classifyIp(parsed);
}

/**
 * Strict dotted quad (exactly what `net.isIPv4` accepts: four decimal octets 0-255, no leading zeros) as an
 * unsigned 32-bit word; undefined for anything else.
 */
export function parseDottedQuad(text: string): number | undefined {
  const length = text.length;
  if (length < 7 || length > 15) return undefined;
  let word = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i <= length; i++) {
    const code = i < length ? text.charCodeAt(i) : 0x2e;
    if (code === 0x2e) {
      if (digits === 0 || octet > 255) return undefined;
      word = word * 256 + octet;
      dots += 1;
      octet = 0;
      digits = 0;
      continue;
    }
    if (code < 0x30 || code > 0x39) return undefined;
    // A leading zero is only valid as the whole octet ("0"), never as "01".
    if (digits === 1 && octet === 0) return undefined;
    octet = octet * 10 + (code - 0x30);
    digits += 1;
    if (digits > 3) return undefined;
  }
  return dots === 4 ? word : undefined;
}

