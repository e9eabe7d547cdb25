// DNS wire work for policy DNS: a strict, bounded query parser and response encoding (dns-packet), plus the
// wire-form answer templates behind the fast path. Pure: no sockets, no clock, no policy, no logging.

// The module's binding, not the global: Node 20's global Buffer is a getter, called on every answer built.
import { Buffer } from 'node:buffer';
import { encodePacket } from './packet.js';

const DNS_HEADER_BYTES = 12;
/** Largest DNS message accepted or produced anywhere (docs/dns.md#limits). */
export const MAX_DNS_MESSAGE_BYTES = 8_192;
/** Without EDNS a UDP response is at most 512 bytes. */
const CLASSIC_UDP_BYTES = 512;
/** Whatever a client advertises in EDNS (even 65535), UDP responses stay within this (DN-09). */
export const MAX_UDP_RESPONSE_BYTES = 1_232;
/** RFC 1035: a name is at most 255 octets on the wire, a label at most 63. */
const MAX_NAME_WIRE_BYTES = 255;
const MAX_LABEL_BYTES = 63;
/**
 * Recent question names kept by a hot-path parser: as many as policy DNS caches answers for (MAX_CACHED_ANSWERS), in
 * sets of NAME_TABLE_WAYS chosen by hash, so names that share a set do not evict each other on every query.
 */
const NAME_TABLE_SLOTS = 4_096;
/** Names per set (a power of two): the set is one run of adjacent slots; a new name evicts the set's oldest. */
const NAME_TABLE_WAYS = 4;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

export const RCODES = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
export type Rcode = keyof typeof RCODES;

export const QTYPE_A = 1;
export const QTYPE_AAAA = 28;
export const QCLASS_IN = 1;
const QTYPE_OPT = 41;

const FLAG_QR = 0x8000;
const FLAG_OPCODE = 0x7800;
const FLAG_TC = 0x0200;
const FLAG_RD = 0x0100;
const FLAG_RA = 0x0080;

/** A question that passed parseQuery: exactly one, a plain query, a well-formed name of LDH/underscore labels. */
export interface DnsQuery {
  readonly wire: Buffer;
  readonly id: number;
  readonly rd: boolean;
  /** Lower case, labels joined by dots, no trailing dot; '' for the root. */
  readonly name: string;
  readonly type: number;
  readonly qclass: number;
  /** Offset just past QTYPE/QCLASS: bytes [12, questionEnd) are the question as the client wrote it. */
  readonly questionEnd: number;
  /** The UDP payload size advertised in an EDNS OPT record, or undefined without EDNS. */
  readonly edns: number | undefined;
}

type QueryParse =
  | { readonly kind: 'query'; readonly query: DnsQuery }
  /** Nothing can be answered: shorter than a header. */
  | { readonly kind: 'drop'; readonly why: string }
  /** A header-only FORMERR response is ready to send. */
  | { readonly kind: 'formerr'; readonly why: string; readonly response: Buffer };

/**
 * parseQuery with a scratch buffer and a table of recent names of its own, for hot paths: a name asked before is
 * the same string again, not a new one decoded from the bytes (and a Map keyed by it need not hash it again).
 */
export function createQueryParser(): (wire: Buffer) => QueryParse {
  const scratch = Buffer.allocUnsafe(MAX_NAME_WIRE_BYTES);
  const names: (string | undefined)[] = new Array(NAME_TABLE_SLOTS).fill(undefined);
  return (wire) => parseInto(wire, scratch, names);
}

export function parseQuery(wire: Buffer): QueryParse {
  return parseInto(wire, Buffer.allocUnsafe(MAX_NAME_WIRE_BYTES), undefined);
}

function formerr(wire: Buffer, flags: number, why: string): QueryParse {
  return { kind: 'formerr', why, response: headerOnly(wire, flags, 'FORMERR') };
}

function parseInto(wire: Buffer, text: Buffer, names: (string | undefined)[] | undefined): QueryParse {
  if (wire.length < DNS_HEADER_BYTES) return { kind: 'drop', why: `${wire.length} bytes is shorter than a DNS header` };
  const flags = u16(wire, 2);
  if (wire.length > MAX_DNS_MESSAGE_BYTES) return formerr(wire, flags, `message is larger than ${MAX_DNS_MESSAGE_BYTES} bytes`);
  if ((flags & FLAG_QR) !== 0) return formerr(wire, flags, 'QR bit set: not a query');
  if ((flags & FLAG_OPCODE) !== 0) return formerr(wire, flags, `opcode ${(flags & FLAG_OPCODE) >> 11} is not QUERY`);
  const qdcount = u16(wire, 4);
  if (qdcount !== 1) return formerr(wire, flags, `QDCOUNT is ${qdcount}, not 1`);
  // One bounded pass over the name: no compression pointers (nothing precedes the question to point at),
  // at most 255 bytes, labels of letters, digits, '-' and '_'. Lower-cased as we go (closes 0x20 games).
  let used = 0;
  let offset = DNS_HEADER_BYTES;
  // FNV-1a over the lower-cased name: where it sits in the table of recent names.
  let hash = FNV_OFFSET;
  for (;;) {
    if (offset >= wire.length) return formerr(wire, flags, 'name runs past the end of the message');
    const length = wire[offset] ?? 0;
    if (length === 0) {
      offset++;
      break;
    }
    if (length > MAX_LABEL_BYTES) return formerr(wire, flags, 'compression pointer or label longer than 63 bytes in the question');
    if (offset + 1 + length > wire.length) return formerr(wire, flags, 'label runs past the end of the message');
    if (offset + 1 + length - DNS_HEADER_BYTES >= MAX_NAME_WIRE_BYTES) return formerr(wire, flags, 'name longer than 255 bytes');
    if (used > 0) {
      text[used++] = 0x2e;
      hash = Math.imul(hash ^ 0x2e, FNV_PRIME);
    }
    for (let i = offset + 1; i <= offset + length; i++) {
      let c = wire[i] ?? 0;
      if (c >= 0x41 && c <= 0x5a) c += 0x20;
      else if (!((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f)) {
        return formerr(wire, flags, 'name has a byte other than a letter, digit, - or _');
      }
      text[used++] = c;
      hash = Math.imul(hash ^ c, FNV_PRIME);
    }
    offset += 1 + length;
  }
  if (offset + 4 > wire.length) return formerr(wire, flags, 'question is missing QTYPE/QCLASS');
  const type = u16(wire, offset);
  const qclass = u16(wire, offset + 2);
  const questionEnd = offset + 4;
  return {
    kind: 'query',
    query: {
      wire,
      id: u16(wire, 0),
      rd: (flags & FLAG_RD) !== 0,
      name: names === undefined ? text.toString('latin1', 0, used) : knownName(names, text, used, hash),
      type,
      qclass,
      questionEnd,
      edns: ednsPayloadSize(wire, questionEnd),
    },
  };
}

/**
 * A big-endian 16-bit field at `at`, which the caller has checked lies within `wire`: on the per-query path, without
 * readUInt16BE's own bounds check and call.
 */
function u16(wire: Buffer, at: number): number {
  return ((wire[at] ?? 0) << 8) | (wire[at + 1] ?? 0);
}

/**
 * The name in `text[0, used)`: the table's string when `hash`'s set holds the same one, else a new one that goes first
 * in the set, its oldest name dropped.
 */
function knownName(names: (string | undefined)[], text: Buffer, used: number, hash: number): string {
  const first = hash & (names.length - NAME_TABLE_WAYS);
  for (let slot = first; slot < first + NAME_TABLE_WAYS; slot++) {
    const known = names[slot];
    if (known === undefined) break;
    if (known.length === used && sameName(known, text, used)) return known;
  }
  const name = text.toString('latin1', 0, used);
  for (let slot = first + NAME_TABLE_WAYS - 1; slot > first; slot--) names[slot] = names[slot - 1];
  names[first] = name;
  return name;
}

function sameName(known: string, text: Buffer, used: number): boolean {
  for (let i = 0; i < used; i++) if (known.charCodeAt(i) !== text[i]) return false;
  return true;
}

/** The advertised size of an OPT record that directly follows the question (the only place stubs put it). */
function ednsPayloadSize(wire: Buffer, at: number): number | undefined {
  if (u16(wire, 6) !== 0 || u16(wire, 8) !== 0 || u16(wire, 10) === 0) return undefined;
  if (at + 11 > wire.length || wire[at] !== 0 || u16(wire, at + 1) !== QTYPE_OPT) return undefined;
  return u16(wire, at + 3);
}

/** A response with no question: FORMERR for unparsable queries. Copies id, opcode and RD; sets RA. */
function headerOnly(wire: Buffer, flags: number, rcode: Rcode): Buffer {
  return encodePacket({
    type: 'response',
    id: wire.readUInt16BE(0),
    flags: (flags & (FLAG_OPCODE | FLAG_RD)) | FLAG_RA | RCODES[rcode],
    questions: [],
  });
}

/** An encoded response and where its first answer's TTL sits, so a cached copy can carry the remaining TTL. */
export interface WireAnswer {
  readonly wire: Buffer;
  readonly rcode: Rcode;
  /** Offset of the first answer's TTL field, or -1 without answers. */
  readonly ttlOffset: number;
}

interface AnswerSpec {
  readonly rcode: Rcode;
  /** Synthetic addresses to answer with (A for IPv4 text, AAAA for IPv6 text). */
  readonly addresses?: readonly string[];
  readonly ttlSeconds?: number;
  /**
   * Adds a synthetic SOA to the authority section whose TTL and MINIMUM are this many seconds: RFC 2308 makes a
   * negative answer cacheable (and final) only with one (docs/dns.md#why-nxdomain).
   */
  readonly negativeTtlSeconds?: number;
}

// The synthetic SOA's fields. Nothing transfers the zone, so refresh/retry/expire only have to be plausible; the
// names sit under .invalid (RFC 6761) so they can never be resolved or mailed to.
const SOA_MNAME = 'policy-dns.boundary.invalid';
const SOA_RNAME = 'hostmaster.boundary.invalid';
const SOA_SERIAL = 1;
const SOA_REFRESH_SECONDS = 3_600;
const SOA_RETRY_SECONDS = 600;
const SOA_EXPIRE_SECONDS = 86_400;

/** The zone a negative answer speaks for: the parent of `name` (the root for a single label), an ancestor as RFC 2308 wants. */
function soaOwner(name: string): string {
  const dot = name.indexOf('.');
  return dot < 0 ? '.' : name.slice(dot + 1);
}

/**
 * Encodes the response to `query` with dns-packet: the question echoed byte for byte as the client wrote it
 * (0x20-checking stubs compare it), answer owner names lower case, RD copied, RA set, OPT echoed under EDNS.
 */
export function encodeAnswer(query: DnsQuery, spec: AnswerSpec): WireAnswer {
  const addresses = spec.addresses ?? [];
  const ttl = spec.ttlSeconds ?? 0;
  const wire = encodePacket({
    type: 'response',
    id: query.id,
    flags: (query.rd ? FLAG_RD : 0) | FLAG_RA | RCODES[spec.rcode],
    // Placeholder question of the same encoded length; overwritten below with the client's own bytes.
    questions: [{ name: query.name === '' ? '.' : query.name, type: 'A', class: 'IN' }],
    answers: addresses.map((ip) =>
      ip.includes(':')
        ? { type: 'AAAA' as const, name: query.name, class: 'IN' as const, ttl, data: ip }
        : { type: 'A' as const, name: query.name, class: 'IN' as const, ttl, data: ip },
    ),
    authorities:
      spec.negativeTtlSeconds === undefined
        ? []
        : [
            {
              type: 'SOA',
              name: soaOwner(query.name),
              class: 'IN',
              ttl: spec.negativeTtlSeconds,
              data: {
                mname: SOA_MNAME,
                rname: SOA_RNAME,
                serial: SOA_SERIAL,
                refresh: SOA_REFRESH_SECONDS,
                retry: SOA_RETRY_SECONDS,
                expire: SOA_EXPIRE_SECONDS,
                minimum: spec.negativeTtlSeconds,
              },
            },
          ],
    additionals:
      query.edns === undefined
        ? []
        : [{ type: 'OPT', name: '.', udpPayloadSize: MAX_UDP_RESPONSE_BYTES, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] }],
  });
  query.wire.copy(wire, DNS_HEADER_BYTES, DNS_HEADER_BYTES, query.questionEnd);
  // Owner name (same length as the question name) + TYPE + CLASS precede the TTL.
  const ttlOffset = addresses.length === 0 ? -1 : query.questionEnd + (query.questionEnd - 4 - DNS_HEADER_BYTES) + 4;
  return { wire, rcode: spec.rcode, ttlOffset };
}

/**
 * A response for `query` from a template built for an equal question (same lower-case name, type, EDNS use):
 * a copy with the id, RD bit, question bytes (the client's case) and TTL rewritten. Truncated (TC, no records)
 * when it would not fit `maxBytes`.
 */
export function respondFrom(template: WireAnswer, query: DnsQuery, maxBytes: number, ttlSeconds?: number): Buffer {
  const source = template.wire;
  if (source.length > maxBytes) return truncated(source, query);
  const out = Buffer.allocUnsafe(source.length);
  // TypedArray set and a plain loop: Buffer#copy's argument checks cost more than these few dozen bytes.
  out.set(source);
  out[0] = query.id >>> 8;
  out[1] = query.id & 0xff;
  out[2] = ((out[2] ?? 0) & ~0x01) | (query.rd ? 0x01 : 0);
  const wire = query.wire;
  for (let i = DNS_HEADER_BYTES; i < query.questionEnd; i++) out[i] = wire[i] ?? 0;
  const at = template.ttlOffset;
  if (ttlSeconds !== undefined && at >= 0) {
    // A whole number of seconds (both callers floor what remains of the mapping), so its four bytes are exact.
    out[at] = ttlSeconds >>> 24;
    out[at + 1] = (ttlSeconds >>> 16) & 0xff;
    out[at + 2] = (ttlSeconds >>> 8) & 0xff;
    out[at + 3] = ttlSeconds & 0xff;
  }
  return out;
}

function truncated(source: Buffer, query: DnsQuery): Buffer {
  const out = Buffer.allocUnsafe(query.questionEnd);
  source.copy(out, 0, 0, DNS_HEADER_BYTES);
  query.wire.copy(out, DNS_HEADER_BYTES, DNS_HEADER_BYTES, query.questionEnd);
  out.writeUInt16BE(query.id, 0);
  out.writeUInt16BE((out.readUInt16BE(2) & ~FLAG_RD) | FLAG_TC | (query.rd ? FLAG_RD : 0), 2);
  out.writeUInt32BE(0, 6);
  out.writeUInt16BE(0, 10);
  return out;
}

/** The most a response to `query` may occupy on the given transport. */
export function responseLimit(query: DnsQuery, transport: 'udp' | 'tcp'): number {
  if (transport === 'tcp') return MAX_DNS_MESSAGE_BYTES;
  if (query.edns === undefined) return CLASSIC_UDP_BYTES;
  return Math.min(Math.max(query.edns, CLASSIC_UDP_BYTES), MAX_UDP_RESPONSE_BYTES);
}

const TYPE_NAMES: Readonly<Record<number, string>> = {
  1: 'A', 2: 'NS', 5: 'CNAME', 6: 'SOA', 12: 'PTR', 15: 'MX', 16: 'TXT', 28: 'AAAA', 33: 'SRV', 41: 'OPT',
  64: 'SVCB', 65: 'HTTPS', 252: 'AXFR', 251: 'IXFR', 255: 'ANY',
};

/** Mnemonic for events (`TYPE123` for the rest, RFC 3597 style). */
export function typeName(type: number): string {
  return TYPE_NAMES[type] ?? `TYPE${type}`;
}

export function className(qclass: number): string {
  return qclass === 1 ? 'IN' : qclass === 3 ? 'CH' : qclass === 4 ? 'HS' : qclass === 255 ? 'ANY' : `CLASS${qclass}`;
}
