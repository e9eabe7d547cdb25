// Parses an operator-supplied hosts file (`/etc/hosts` format) into a lookup table, consulted before DNS.
// Pure: never reads the file itself, never resolves. Bad lines are skipped and reported as issues.

import type { Issue } from '../shared/errors.js';
import { formatIp, parseIp } from './ip.js';

/** A hosts file larger than this many entries is cut here; the rest are reported, not loaded. */
export const MAX_HOSTS_ENTRIES = 10_000;
/** Addresses kept per name and family (the resolver keeps at most 16 anyway). */
const MAX_HOSTS_ADDRESSES_PER_NAME = 16;
/** Hosts answers carry no TTL; the synthetic pool clamps whatever we say to [1 s, 30 s]. */
export const HOSTS_TTL_SECONDS = 30;

export interface HostsTable {
  /** Addresses for a normalised name (lower case, no trailing dot) in file order; empty when unknown. */
  lookup(name: string, family: 4 | 6): readonly string[];
  readonly size: number;
  /** Lines that were skipped, with the reason (code ADDRESS_INVALID, path `line N`). */
  readonly issues: readonly Issue[];
}

const NAME = /^[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?$/;

export function parseHostsFile(text: string): HostsTable {
  const v4 = new Map<string, string[]>();
  const v6 = new Map<string, string[]>();
  const issues: Issue[] = [];
  let entries = 0;
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const path = `line ${i + 1}`;
    const line = (lines[i] ?? '').replace(/#.*/, '').trim();
    if (line === '') continue;
    const [address = '', ...names] = line.split(/\s+/);
    // Zone ids (fe80::1%eth0) name an interface, not a destination boundary may dial.
    const ip = address.includes('%') ? undefined : parseIp(address);
    if (ip === undefined) {
      issues.push({ code: 'ADDRESS_INVALID', path, message: `${JSON.stringify(address)} is not an IP address`, line: i + 1 });
      continue;
    }
    if (names.length === 0) {
      issues.push({ code: 'ADDRESS_INVALID', path, message: `${address} has no host names`, line: i + 1 });
      continue;
    }
    const canonical = formatIp(ip);
    const table = ip.family === 4 ? v4 : v6;
    for (const raw of names) {
      const name = raw.toLowerCase().replace(/\.$/, '');
      if (!NAME.test(name) || name.length > 253) {
        issues.push({ code: 'ADDRESS_INVALID', path, message: `${JSON.stringify(raw)} is not a host name`, line: i + 1 });
        continue;
      }
      if (entries >= MAX_HOSTS_ENTRIES) {
        issues.push({ code: 'ADDRESS_INVALID', path, message: `more than ${MAX_HOSTS_ENTRIES} entries; the rest are ignored`, line: i + 1 });
        return freeze(v4, v6, issues, entries);
      }
      const list = table.get(name) ?? [];
      if (!list.includes(canonical) && list.length < MAX_HOSTS_ADDRESSES_PER_NAME) list.push(canonical);
      table.set(name, list);
      entries++;
    }
  }
  return freeze(v4, v6, issues, entries);
}

function freeze(v4: Map<string, string[]>, v6: Map<string, string[]>, issues: Issue[], size: number): HostsTable {
  const none: readonly string[] = Object.freeze([]);
  return Object.freeze({
    lookup: (name: string, family: 4 | 6) => (family === 4 ? v4 : v6).get(name) ?? none,
    size,
    issues: Object.freeze(issues),
  });
}
