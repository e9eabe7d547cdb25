// /proc/net/tcp and tcp6 as the kernel prints them (docs/identity.md#how-a-connection-maps-to-a-process): the
// hex form of an address, and the ESTABLISHED socket whose (local, remote) pair is exactly the one asked for.
// Pure: the table text comes from the caller. Wanted pairs are encoded once and compared as text, so a table of
// thousands of sockets is read without decoding a line that cannot match.

import { endianness } from 'node:os';
import { formatIp, type Ip, parseIp } from '../net/ip.js';
import type { SocketEnd } from './source.js';

/** `st` of an ESTABLISHED socket. */
const TCP_ESTABLISHED = '01';
/** sl, local, remote, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode: the fields every socket line has. */
const MIN_TCP_FIELDS = 10;
const UID_FIELD = 7;
const INODE_FIELD = 9;
const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/** The kernel prints each 32-bit word of an address in host byte order. */
const LITTLE_ENDIAN = endianness() === 'LE';

export interface TcpSocket {
  readonly inode: number;
  /** The uid that created the socket: owners are looked for among its processes first (proc-owners.ts). */
  readonly uid: number;
}

function wordsHex(bytes: Uint8Array, littleEndian: boolean): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 4) {
    const word = littleEndian ? [bytes[i + 3], bytes[i + 2], bytes[i + 1], bytes[i]] : [bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]];
    for (const byte of word) out += (byte ?? 0).toString(16).padStart(2, '0');
  }
  return out.toUpperCase();
}

function portHex(port: number): string {
  return port.toString(16).toUpperCase().padStart(4, '0');
}

/** The IPv4 inside ::ffff:a.b.c.d, else undefined. */
function embeddedIpv4(ip: Ip): Ip | undefined {
  if (ip.family !== 6 || MAPPED_PREFIX.some((b, i) => ip.bytes[i] !== b)) return undefined;
  return { family: 4, bytes: ip.bytes.slice(12) };
}

/**
 * The forms an end can take in the tables: an IPv4 end appears in tcp as itself and in tcp6 as ::ffff:a.b.c.d
 * (a dual-stack socket), an IPv4-mapped end likewise, any other IPv6 end in tcp6 only.
 */
export function encodeEnd(end: SocketEnd, littleEndian = LITTLE_ENDIAN): { readonly v4?: string; readonly v6?: string } {
  const ip = parseIp(end.ip);
  if (ip === undefined || !Number.isInteger(end.port) || end.port < 0 || end.port > 65_535) return {};
  const v4 = ip.family === 4 ? ip : embeddedIpv4(ip);
  const port = portHex(end.port);
  const v6bytes = v4 === undefined ? ip.bytes : Uint8Array.from([...MAPPED_PREFIX, ...v4.bytes]);
  return {
    ...(v4 === undefined ? {} : { v4: `${wordsHex(v4.bytes, littleEndian)}:${port}` }),
    v6: `${wordsHex(v6bytes, littleEndian)}:${port}`,
  };
}

/** `0100007F:1F90` -> 127.0.0.1:8080; IPv4-mapped IPv6 comes back as IPv4. Undefined when malformed. */
export function decodeEnd(text: string, littleEndian = LITTLE_ENDIAN): SocketEnd | undefined {
  const colon = text.indexOf(':');
  const hex = text.slice(0, colon);
  const port = Number.parseInt(text.slice(colon + 1), 16);
  if (colon < 0 || (hex.length !== 8 && hex.length !== 32) || !/^[0-9A-Fa-f]+$/.test(hex) || !(port >= 0 && port <= 65_535)) return undefined;
  const bytes = new Uint8Array(hex.length / 2);
  for (let word = 0; word < hex.length / 8; word++) {
    for (let i = 0; i < 4; i++) {
      const value = Number.parseInt(hex.slice(word * 8 + i * 2, word * 8 + i * 2 + 2), 16);
      bytes[word * 4 + (littleEndian ? 3 - i : i)] = value;
    }
  }
  const ip: Ip = { family: bytes.length === 4 ? 4 : 6, bytes };
  return { ip: formatIp(embeddedIpv4(ip) ?? ip), port };
}

/** The table key of a (local, remote) pair in one family, or undefined when an end has no form in it. */
export function pairKeys(local: SocketEnd, remote: SocketEnd, littleEndian = LITTLE_ENDIAN): string[] {
  const a = encodeEnd(local, littleEndian);
  const b = encodeEnd(remote, littleEndian);
  const keys: string[] = [];
  if (a.v4 !== undefined && b.v4 !== undefined) keys.push(`${a.v4} ${b.v4}`);
  if (a.v6 !== undefined && b.v6 !== undefined) keys.push(`${a.v6} ${b.v6}`);
  return keys;
}

/**
 * Scans one table's text for the wanted pair keys (pairKeys) and records each ESTABLISHED socket found with a
 * non-zero inode. A line matches only on its whole (local, remote) pair; the header and short lines are skipped.
 */
export function findSockets(table: string, wanted: ReadonlySet<string>, found: Map<string, TcpSocket>): void {
  let start = table.indexOf('\n') + 1;
  while (start > 0 && start < table.length) {
    const end = table.indexOf('\n', start);
    const line = table.slice(start, end < 0 ? table.length : end);
    start = end < 0 ? table.length : end + 1;
    const fields = line.trim().split(/\s+/);
    if (fields.length < MIN_TCP_FIELDS || fields[3] !== TCP_ESTABLISHED) continue;
    const key = `${fields[1]} ${fields[2]}`;
    if (!wanted.has(key) || found.has(key)) continue;
    const inode = Number(fields[INODE_FIELD]);
    const uid = Number(fields[UID_FIELD]);
    if (Number.isSafeInteger(inode) && inode > 0 && Number.isSafeInteger(uid)) found.set(key, { inode, uid });
  }
}
