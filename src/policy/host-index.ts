// The host index behind Policy.endpointsForHost(): exact names and IPs in a Map, wildcard patterns bucketed by
// their fixed suffix, hostless endpoints in a list. A lookup costs O(labels) map probes, never a linear scan.

import { formatIp, parseIp } from '../net/ip.js';
import type { HostMatcher } from './match.js';
import type { Endpoint } from './types.js';

export interface IndexedEndpoint {
  readonly endpoint: Endpoint;
  readonly matcher: HostMatcher;
}

const NONE: readonly Endpoint[] = Object.freeze([]);
const DOTTED_QUAD = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** Returns the lookup; results are in policy order (Endpoint.order). */
export function buildHostIndex(items: readonly IndexedEndpoint[]): (host: string) => readonly Endpoint[] {
  const exact = new Map<string, Endpoint[]>();
  const wildcards = new Map<string, IndexedEndpoint[]>();
  const hostless: Endpoint[] = [];
  for (const item of items) {
    const { endpoint, matcher } = item;
    if (matcher.kind === 'any') hostless.push(endpoint);
    else if (matcher.kind === 'wildcard') push(wildcards, matcher.suffix, item);
    else push(exact, matcher.pattern ?? '', endpoint);
  }
  return function endpointsForHost(rawHost: string): readonly Endpoint[] {
    const host = canonicalHost(rawHost);
    if (host === '') return NONE;
    const found: Endpoint[] = [];
    let sources = 0;
    const direct = exact.get(host);
    if (direct !== undefined) {
      found.push(...direct);
      sources++;
    }
    // An IP literal never matches a name pattern (HA-17).
    if (wildcards.size > 0 && !isIpLiteral(host)) {
      for (let dot = host.indexOf('.'); dot >= 0; dot = host.indexOf('.', dot + 1)) {
        const bucket = wildcards.get(host.slice(dot + 1));
        if (bucket === undefined) continue;
        let hit = false;
        for (const { endpoint, matcher } of bucket) {
          if (matcher.matches(host)) {
            found.push(endpoint);
            hit = true;
          }
        }
        if (hit) sources++;
      }
    }
    if (hostless.length > 0) {
      found.push(...hostless);
      sources++;
    }
    if (found.length === 0) return NONE;
    if (sources > 1) found.sort((a, b) => a.order - b.order);
    return found;
  };
}

/** Lower-case, one trailing dot off, IPv6 canonical and unbracketed. Intents are normalised already. */
function canonicalHost(raw: string): string {
  let host = raw.toLowerCase();
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host.includes(':')) {
    const ip = parseIp(host);
    return ip === undefined ? '' : formatIp(ip);
  }
  return host;
}

function isIpLiteral(host: string): boolean {
  return host.includes(':') || (DOTTED_QUAD.test(host) && parseIp(host) !== undefined);
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}
