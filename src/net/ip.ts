// IP literals and CIDRs as bytes: strict parsing of canonical text forms, formatting, containment.
// Pure. Non-canonical IPv4 spellings (`127.1`, `0x7f.1`) are canonicalised in host.ts, never here.

import { isIPv4, isIPv6 } from 'node:net';

export interface Ip {
  readonly family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  readonly bytes: Uint8Array;
}

export interface Cidr {
  readonly ip: Ip;
  readonly prefix: number;
}

/** Parses dotted-quad IPv4 or IPv6 text (no brackets, no zone). Undefined when not an IP literal. */
export function parseIp(text: string): Ip | undefined {
  if (isIPv4(text)) {
    // Hot path (every resolved answer is classified): split by hand, no intermediate arrays.
    const bytes = new Uint8Array(4);
    let octet = 0;
    let value = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 46) {
        bytes[octet++] = value;
        value = 0;
      } else value = value * 10 + (c - 48);
    }
    bytes[octet] = value;
    return { family: 4, bytes };
  }
  if (isIPv6(text) && !text.includes('%')) return { family: 6, bytes: parseIpv6(text) };
  return undefined;
}

function parseIpv6(text: string): Uint8Array {
  const bytes = new Uint8Array(16);
  let groups = text;
  // A trailing dotted IPv4 fills the last two groups.
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  let tailBytes: number[] = [];
  if (tail.includes('.')) {
    tailBytes = tail.split('.').map(Number);
    groups = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head = '', rest] = groups.split('::');
  const headParts = head === '' ? [] : head.split(':');
  const restParts = rest === undefined || rest === '' ? [] : rest.split(':');
  const fill = rest === undefined ? 0 : 8 - headParts.length - restParts.length;
  const parts = [...headParts, ...new Array<string>(fill).fill('0'), ...restParts];
  parts.forEach((part, i) => {
    const value = Number.parseInt(part, 16);
    bytes[i * 2] = value >> 8;
    bytes[i * 2 + 1] = value & 0xff;
  });
  if (tailBytes.length === 4) bytes.set(tailBytes, 12);
  return bytes;
}

/** Canonical text: dotted quad, or RFC 5952 IPv6 (lower case, longest zero run compressed). */
export function formatIp(ip: Ip): string {
  if (ip.family === 4) return Array.from(ip.bytes).join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((ip.bytes[i] ?? 0) << 8) | (ip.bytes[i + 1] ?? 0));
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  const left = hex.slice(0, bestStart).join(':');
  const right = hex.slice(bestStart + bestLen).join(':');
  return `${left}::${right}`;
}

/** `10.0.0.0/8`, `fd00::/8`, or a bare IP (full-length prefix). Undefined when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (ip === undefined) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  if (slash < 0) return { ip, prefix: max };
  const prefixText = text.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  return prefix <= max ? { ip, prefix } : undefined;
}

/** True when bits past the prefix are zero (`10.0.0.0/8`, not `10.1.0.0/8`). */
export function hasCleanHostBits(cidr: Cidr): boolean {
  return bytesEqualUnderPrefix(cidr.ip.bytes, maskBytes(cidr.ip.bytes, cidr.prefix), cidr.ip.bytes.length * 8);
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIp(cidr.ip)}/${cidr.prefix}`;
}

/** Same family and the first `cidr.prefix` bits equal. */
export function cidrContains(cidr: Cidr, ip: Ip): boolean {
  if (cidr.ip.family !== ip.family) return false;
  return bytesEqualUnderPrefix(cidr.ip.bytes, ip.bytes, cidr.prefix);
}

export function cidrOverlaps(a: Cidr, b: Cidr): boolean {
  if (a.ip.family !== b.ip.family) return false;
  return bytesEqualUnderPrefix(a.ip.bytes, b.ip.bytes, Math.min(a.prefix, b.prefix));
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i] = (bytes[i] ?? 0) & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}

function bytesEqualUnderPrefix(a: Uint8Array, b: Uint8Array, prefix: number): boolean {
  let i = 0;
  for (; (i + 1) * 8 <= prefix; i++) if (a[i] !== b[i]) return false;
  const bits = prefix - i * 8;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return ((a[i] ?? 0) & mask) === ((b[i] ?? 0) & mask);
}
