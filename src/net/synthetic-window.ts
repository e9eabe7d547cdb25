// The per-epoch windows of the synthetic ranges (docs/dns.md#synthetic-pools) and the address arithmetic inside them.
// Pure: which addresses a window holds, never which of them are in use (synthetic.ts owns that).

import { type Cidr, formatIp, type Ip } from './ip.js';

/**
 * The IPv4 range is split into this many windows; the window in use is `epoch mod SYNTHETIC_WINDOWS`. Sixteen, so
 * the default /15 gives /19 windows of 8,192 addresses: room for the live mappings plus every address that may sit
 * in quarantine at the new-mapping rate limit (synthetic-budget.ts, arithmetic in docs/dns.md#synthetic-pools). A
 * window comes back after 16 restarts, far longer than any answer or quarantine at any restart backoff.
 */
export const SYNTHETIC_WINDOWS = 16;
/** IPv6 windows are /115: as many addresses as the default IPv4 window, so the same limits hold for both. */
const SYNTHETIC_V6_WINDOW_ADDRESSES = 8_192;

export interface Window {
  readonly base: Ip;
  readonly capacity: number;
  readonly cidr: string;
}

/** The window of `cidr` (already validated by syntheticCidrProblem) for `epoch`. */
export function ipv4Window(cidr: Cidr, epoch: number): Window {
  const capacity = 2 ** (32 - cidr.prefix) / SYNTHETIC_WINDOWS;
  const base = offsetIp(cidr.ip, (epoch % SYNTHETIC_WINDOWS) * capacity);
  return { base, capacity, cidr: `${formatIp(base)}/${cidr.prefix + Math.log2(SYNTHETIC_WINDOWS)}` };
}

/** The IPv6 window of `cidr` (an IPv6 network of /96 or wider with clean host bits) for `epoch`. */
export function ipv6Window(cidr: Cidr, epoch: number): Window {
  const capacity = SYNTHETIC_V6_WINDOW_ADDRESSES;
  const base = offsetIp(cidr.ip, (epoch % SYNTHETIC_WINDOWS) * capacity);
  return { base, capacity, cidr: `${formatIp(base)}/${128 - Math.log2(capacity)}` };
}

/** `base + offset` for an offset below 2^32; the callers' windows never carry past the low 32 bits. */
export function offsetIp(base: Ip, offset: number): Ip {
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
export function offsetOf(base: Ip, ip: Ip): number | undefined {
  if (base.family !== ip.family) return undefined;
  const n = base.bytes.length;
  for (let i = 0; i < n - 4; i++) if (base.bytes[i] !== ip.bytes[i]) return undefined;
  const read = (b: Uint8Array) => (b[n - 4] ?? 0) * 2 ** 24 + ((b[n - 3] ?? 0) << 16) + ((b[n - 2] ?? 0) << 8) + (b[n - 1] ?? 0);
  const delta = read(ip.bytes) - read(base.bytes);
  return delta >= 0 ? delta : undefined;
}
