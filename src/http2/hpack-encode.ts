// HPACK's stateless encoder for the HTTP/2 blocks boundary sends (RFC 7541): static table only, never inserts, no
// Huffman. Pure codec: no frames, no sockets, and no checks on field names or values (the caller applies RFC 9113 §8.2).

import { BoundaryError } from '../shared/errors.js';
import { type Latin1Buffer, STATIC_COUNT, STATIC_NAMES, STATIC_VALUES } from './hpack-table.js';

// Encoder lookup: a name's lowest index. Entries sharing a name are adjacent, so its full matches follow it.
const STATIC_INDEX_BY_NAME = new Map<string, number>();
for (let i = STATIC_COUNT; i >= 1; i--) STATIC_INDEX_BY_NAME.set(STATIC_NAMES[i]!, i);
/** RFC 7541 §7.1.3: credentials boundary injects must never enter any intermediary's table (all static names). */
const NEVER_INDEXED = new Uint8Array(STATIC_COUNT + 1);
for (const name of ['authorization', 'proxy-authorization', 'cookie']) NEVER_INDEXED[STATIC_INDEX_BY_NAME.get(name)!] = 1;
/** Worst case per field beside the name and value octets: 1 + 1 index octets, two length prefixes of 1 + 5. */
const FIELD_OVERHEAD_BOUND_BYTES = 14;
/** Up to this length a string is copied in JavaScript, past it through latin1Write (measured crossover ~16). */
const SHORT_WRITE_CHARS = 16;

/** §5.1 with `first` carrying the representation's pattern bits above the prefix; returns the next offset. */
function writeInteger(out: Buffer, pos: number, first: number, prefixBits: number, value: number): number {
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    out[pos] = first | value;
    return pos + 1;
  }
  out[pos++] = first | max;
  let rest = value - max;
  while (rest >= 0x80) {
    out[pos++] = (rest & 0x7f) | 0x80;
    rest >>>= 7;
  }
  out[pos] = rest;
  return pos + 1;
}

/**
 * §5.2 without Huffman: H = 0, the length, the latin1 octets. A character above 0xff would lose its high byte (U+010A
 * would go out as LF), so callers pass names and values already checked against http1/grammar.ts's BAD_VALUE.
 */
function writeString(out: Latin1Buffer, pos: number, text: string): number {
  const length = text.length;
  let at = writeInteger(out, pos, 0x00, 7, length);
  // Crossing into C++ costs more than copying a short string here.
  if (length > SHORT_WRITE_CHARS) return at + out.latin1Write(text, at, length);
  for (let i = 0; i < length; i++) out[at++] = text.charCodeAt(i);
  return at;
}

/** `:status` as a field: a literal with the static name, never indexed here, takes at most this many octets. */
const STATUS_FIELD_BYTES = 5;
const STATUS_NAME_INDEX = STATIC_INDEX_BY_NAME.get(':status')!;
/** The statuses with a static entry of their own (200, 304, ...), by number. */
const STATUS_INDEX = new Map<number, number>();
for (let index = STATUS_NAME_INDEX; STATIC_NAMES[index] === ':status'; index++) STATUS_INDEX.set(Number(STATIC_VALUES[index]), index);

/** `:status` (100-999) as the first field, octet for octet as the encoder writes `[':status', String(status)]`. */
function writeStatus(out: Buffer, pos: number, status: number): number {
  const index = STATUS_INDEX.get(status);
  if (index !== undefined) {
    out[pos] = 0x80 | index;
    return pos + 1;
  }
  out[pos++] = STATUS_NAME_INDEX;
  out[pos++] = 3;
  out[pos++] = 0x30 + Math.floor(status / 100);
  out[pos++] = 0x30 + (Math.floor(status / 10) % 10);
  out[pos++] = 0x30 + (status % 10);
  return pos;
}

/**
 * Encodes a request header list (flat [name, value, ...], names already lower-case, pseudo-headers first) without
 * touching any dynamic table: a full static-table match is an indexed field; a static name match is a literal with
 * indexed name; anything else a literal with a literal name. "Without indexing" (0000xxxx) for ordinary fields, "never
 * indexed" (0001xxxx, RFC 7541 §7.1.3) for authorization, proxy-authorization and cookie (boundary injects
 * credentials). No Huffman coding (it is optional and costs CPU). Because nothing is ever inserted, the peer's
 * SETTINGS_HEADER_TABLE_SIZE never matters.
 */
export function encodeHeaderBlock(flat: readonly string[]): Buffer {
  return encodeHeaderBlockAfter(flat, 0, false);
}

/** The most octets `flat` can take encoded, with a table size update and a `:status` ahead of it. */
export function headerBlockBound(flat: readonly string[]): number {
  if (flat.length % 2 !== 0) throw new BoundaryError('UPSTREAM_REQUEST_INVALID', 'header list has a name without a value');
  let bound = 1 + STATUS_FIELD_BYTES + (flat.length / 2) * FIELD_OVERHEAD_BOUND_BYTES;
  for (let i = 0; i < flat.length; i++) bound += flat[i]!.length;
  return bound;
}

/**
 * encodeHeaderBlock's block after `reserve` octets left unwritten for the caller (a frame header, so the block needs
 * no copy into its frame), led by a dynamic table size update to 0 (RFC 7541 §6.3) when `tableSizeZero`, then by
 * `:status` when `status` (100-999) is given, as if `flat` began with it.
 */
export function encodeHeaderBlockAfter(flat: readonly string[], reserve: number, tableSizeZero: boolean, status = 0): Buffer {
  const out = Buffer.allocUnsafe(reserve + headerBlockBound(flat));
  return out.subarray(0, encodeHeaderBlockInto(out, reserve, flat, tableSizeZero, status));
}

/**
 * Encodes the block into `buf` from `pos`, which has headerBlockBound(flat) octets of room, and returns where it ends:
 * a frame writer's batch takes it in place (frame-writer.ts).
 */
export function encodeHeaderBlockInto(buf: Buffer, pos: number, flat: readonly string[], tableSizeZero: boolean, status = 0): number {
  const out = buf as Latin1Buffer;
  // 001 prefix, 5-bit integer 0.
  if (tableSizeZero) out[pos++] = 0x20;
  if (status !== 0) pos = writeStatus(out, pos, status);
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    const value = flat[i + 1]!;
    const nameIndex = STATIC_INDEX_BY_NAME.get(name) ?? 0;
    const sensitive = NEVER_INDEXED[nameIndex] === 1;
    if (nameIndex !== 0 && !sensitive) {
      let index = nameIndex;
      while (index <= STATIC_COUNT && STATIC_NAMES[index] === name && STATIC_VALUES[index] !== value) index++;
      if (index <= STATIC_COUNT && STATIC_NAMES[index] === name) {
        out[pos++] = 0x80 | index;
        continue;
      }
    }
    pos = writeInteger(out, pos, sensitive ? 0x10 : 0x00, 4, nameIndex);
    if (nameIndex === 0) pos = writeString(out, pos, name);
    pos = writeString(out, pos, value);
  }
  return pos;
}
