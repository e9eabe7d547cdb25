// The few DER (X.690) encodings and the TLV reader that certificate minting needs. Pure byte work: no keys,
// no clock, no I/O. Replaces @peculiar/x509 on the run path, whose ~250 modules cost ~16 MB of RSS (issue 15).

import { BoundaryError } from '../shared/errors.js';

/** A DER length needs at most 4 length bytes here: nothing we read or write comes near 4 GiB. */
const MAX_LENGTH_BYTES = 4;

/** One tag-length-value, as written. */
export function tlv(tag: number, ...content: readonly Buffer[]): Buffer {
  const body = Buffer.concat(content);
  const n = body.length;
  let length: Buffer;
  if (n < 0x80) length = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    length = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), length, body]);
}

export const sequence = (...content: readonly Buffer[]): Buffer => tlv(0x30, ...content);
export const set = (...content: readonly Buffer[]): Buffer => tlv(0x31, ...content);
export const octetString = (content: Buffer): Buffer => tlv(0x04, content);
export const utf8String = (text: string): Buffer => tlv(0x0c, Buffer.from(text, 'utf8'));
export const derNull = (): Buffer => tlv(0x05);
export const boolean = (value: boolean): Buffer => tlv(0x01, Buffer.from([value ? 0xff : 0x00]));
/** [n] EXPLICIT: a constructed context tag around an encoded value. */
export const explicit = (n: number, content: Buffer): Buffer => tlv(0xa0 | n, content);
/** [n] IMPLICIT on a primitive value: the context tag replaces the value's own. */
export const implicit = (n: number, content: Buffer): Buffer => tlv(0x80 | n, content);
/** A BIT STRING of whole bytes (keys, signatures). */
export const bitString = (content: Buffer, unusedBits = 0): Buffer => tlv(0x03, Buffer.from([unusedBits]), content);

/** A non-negative INTEGER from big-endian magnitude bytes (a 0x00 pad keeps it positive). */
export function unsignedInteger(magnitude: Buffer): Buffer {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const bytes = magnitude.subarray(start);
  return tlv(0x02, ((bytes[0] ?? 0) & 0x80) !== 0 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

export const smallInteger = (value: number): Buffer => unsignedInteger(Buffer.from([value & 0xff]));

export function objectIdentifier(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const out: number[] = [(arcs[0] ?? 0) * 40 + (arcs[1] ?? 0)];
  for (const arc of arcs.slice(2)) {
    const chunk: number[] = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

/** RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050; whole seconds, UTC. */
export function time(date: Date): Buffer {
  const iso = date.toISOString();
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  return date.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(digits.slice(2), 'latin1')) : tlv(0x18, Buffer.from(digits, 'latin1'));
}

export interface Tlv {
  readonly tag: number;
  /** The whole encoding, header included. */
  readonly raw: Buffer;
  readonly content: Buffer;
}

/** Reads the TLV at `offset`; a truncated or over-long encoding is PKI_INVALID. */
export function readTlv(buffer: Buffer, offset = 0): Tlv {
  const tag = buffer[offset];
  let lengthByte = buffer[offset + 1];
  if (tag === undefined || lengthByte === undefined) throw invalid();
  let header = 2;
  let length = lengthByte;
  if (lengthByte & 0x80) {
    const count = lengthByte & 0x7f;
    if (count === 0 || count > MAX_LENGTH_BYTES) throw invalid();
    length = 0;
    for (let i = 0; i < count; i++) {
      lengthByte = buffer[offset + 2 + i];
      if (lengthByte === undefined) throw invalid();
      length = length * 256 + lengthByte;
    }
    header += count;
  }
  const end = offset + header + length;
  if (end > buffer.length) throw invalid();
  return { tag, raw: buffer.subarray(offset, end), content: buffer.subarray(offset + header, end) };
}

/** The TLVs inside a constructed value's content. */
export function readChildren(content: Buffer): Tlv[] {
  const out: Tlv[] = [];
  for (let offset = 0; offset < content.length; ) {
    const child = readTlv(content, offset);
    out.push(child);
    offset += child.raw.length;
  }
  return out;
}

/** Object identifier content bytes -> dotted text (for matching extension ids). */
export function readObjectIdentifier(content: Buffer): string {
  const first = content[0] ?? 0;
  const arcs = [Math.min(2, Math.floor(first / 40)), first - Math.min(2, Math.floor(first / 40)) * 40];
  let value = 0;
  for (const byte of content.subarray(1)) {
    value = value * 128 + (byte & 0x7f);
    if ((byte & 0x80) === 0) {
      arcs.push(value);
      value = 0;
    }
  }
  return arcs.join('.');
}

function invalid(): BoundaryError {
  return new BoundaryError('PKI_INVALID', 'malformed DER in a certificate');
}
