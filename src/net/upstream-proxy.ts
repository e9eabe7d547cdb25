// The corporate upstream proxy as values (docs/running.md#corporate-upstream-proxy): its URL, the Basic credentials
// read from its auth file, and the bypass list with its matcher. Pure: never dials, never reads a file or the env.

import { isIP } from 'node:net';
import { type Cidr, cidrContains, parseCidr, parseIp } from './ip.js';
import { normaliseHost, parseAuthority } from './host.js';

/** Entries in `--no-upstream-proxy`; a longer list is refused. */
export const MAX_BYPASS_ENTRIES = 256;
/** Bytes of an auth file (`user:pass`); a longer file is refused. */
export const MAX_PROXY_AUTH_FILE_BYTES = 4_096;

export interface UpstreamProxyEndpoint {
  readonly tls: boolean;
  /** Normalised host (a name or an IP literal): the TCP dial target and, for `https://`, the certificate name. */
  readonly host: string;
  readonly port: number;
}

type BypassEntry =
  | { readonly kind: 'name'; readonly name: string; readonly port: number | undefined }
  | { readonly kind: 'cidr'; readonly cidr: Cidr; readonly port: number | undefined };

export interface BypassList {
  readonly entries: readonly BypassEntry[];
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string };

const URL_SHAPE = /^(https?):\/\/([^/?#]*)\/?$/;
// RFC 7617 user-id and password: no control characters; the user-id has no colon.
const CONTROL = /[\u0000-\u001f\u007f]/;

/** `http://host:port` or `https://host:port` (a trailing `/` allowed); no userinfo, path, query or other scheme. */
export function parseUpstreamProxyUrl(text: string): Parsed<UpstreamProxyEndpoint> {
  if (text.length === 0) return { ok: false, message: 'is empty' };
  const shape = URL_SHAPE.exec(text);
  if (shape === null) {
    return /^[a-z0-9+.-]+:\/\//i.test(text) && !/^https?:/i.test(text)
      ? { ok: false, message: 'only http:// and https:// proxies are supported (no SOCKS)' }
      : { ok: false, message: 'expected http://HOST:PORT or https://HOST:PORT' };
  }
  const [, scheme, authority] = shape as unknown as [string, string, string];
  if (authority.includes('@')) return { ok: false, message: 'credentials in the URL are refused: use --upstream-proxy-auth-file' };
  const parsed = parseAuthority(authority);
  if (!parsed.ok) return { ok: false, message: `expected HOST:PORT: ${parsed.message}` };
  return { ok: true, value: Object.freeze({ tls: scheme === 'https', host: parsed.host, port: parsed.port }) };
}

/** An auth file's text (`user:pass`, one optional trailing newline) as the Proxy-Authorization value. */
export function parseProxyAuth(text: string): Parsed<string> {
  const body = text.endsWith('\r\n') ? text.slice(0, -2) : text.endsWith('\n') ? text.slice(0, -1) : text;
  const colon = body.indexOf(':');
  if (colon <= 0) return { ok: false, message: 'expected user:pass on one line' };
  // The message never quotes the file: it holds a secret.
  if (CONTROL.test(body)) return { ok: false, message: 'contains a control character' };
  return { ok: true, value: `Basic ${Buffer.from(body, 'utf8').toString('base64')}` };
}

/** A comma list of names (suffix match on labels; a leading `.` or `*.` is ignored), IPs and CIDRs, each with an optional `:port`. */
export function parseBypassList(text: string): Parsed<BypassList> {
  const parts = text.split(',').map((p) => p.trim());
  if (parts.length > MAX_BYPASS_ENTRIES) return { ok: false, message: `more than ${MAX_BYPASS_ENTRIES} entries` };
  const entries: BypassEntry[] = [];
  for (const part of parts) {
    const entry = parseBypassEntry(part);
    if (typeof entry === 'string') return { ok: false, message: `${JSON.stringify(part)}: ${entry}` };
    entries.push(entry);
  }
  return { ok: true, value: Object.freeze({ entries: Object.freeze(entries) }) };
}

function parseBypassEntry(part: string): BypassEntry | string {
  if (part.length === 0) return 'empty entry';
  let body = part;
  let port: number | undefined;
  // `host:port`, `1.2.3.4/8:443`, `[::1]:443`, `[fd00::/8]:443`; a bare IPv6 literal or CIDR has no port.
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(part);
  if (bracket !== null) {
    body = bracket[1] as string;
    if (bracket[2] !== undefined) port = portOf(bracket[2]);
  } else if (part.indexOf(':') === part.lastIndexOf(':') && part.includes(':')) {
    const colon = part.indexOf(':');
    body = part.slice(0, colon);
    port = portOf(part.slice(colon + 1));
  }
  if (Number.isNaN(port)) return 'expected a port 1-65535';
  if (body.includes('/') || isIP(body) !== 0) {
    const cidr = parseCidr(body);
    return cidr === undefined ? 'expected an IP or CIDR' : { kind: 'cidr', cidr, port };
  }
  const name = normaliseHost(body.startsWith('*.') ? body.slice(2) : body.startsWith('.') ? body.slice(1) : body);
  if (!name.ok || name.kind !== 'name') return 'expected a DNS name, an IP or a CIDR';
  return { kind: 'name', name: name.host, port };
}

function portOf(text: string): number {
  const port = /^[1-9][0-9]{0,4}$/.test(text) ? Number(text) : Number.NaN;
  return port <= 65_535 ? port : Number.NaN;
}

/**
 * True when a dial of `address:port` for the name `name` goes direct. A name entry covers every address of that name
 * and of names under it; an IP or CIDR entry covers only the addresses inside it, whatever name they came from.
 */
export function bypassesProxy(list: BypassList, name: string | undefined, address: string, port: number): boolean {
  let ip: ReturnType<typeof parseIp>;
  for (const entry of list.entries) {
    if (entry.port !== undefined && entry.port !== port) continue;
    if (entry.kind === 'name') {
      if (name !== undefined && (name === entry.name || name.endsWith(`.${entry.name}`))) return true;
    } else {
      ip ??= parseIp(address);
      if (ip !== undefined && cidrContains(entry.cidr, ip)) return true;
    }
  }
  return false;
}
