// Header rewriting in both directions: hop-by-hop and Connection-nominated headers, proxy headers,
// client-sent forwarding headers (pin CR-04: stripped) and boundary's own X-Boundary-* (CR-03) never cross.
// Pure; never decides policy and never sees secrets beyond passing values through.

/** boundary's own response headers; anything with this prefix from either side is dropped (CR-03). */
export const BOUNDARY_HEADER_PREFIX = 'x-boundary-';
export const POLICY_HEADER = 'X-Boundary-Policy';
/** The same policy key under a peer's name, for clients written against OpenShell or Ryno (`--peer-policy-header`). */
export const PEER_POLICY_HEADER_NAMES = ['none', 'openshell', 'ryno'] as const;
export type PeerPolicyHeader = (typeof PEER_POLICY_HEADER_NAMES)[number];
export const PEER_POLICY_HEADERS: Readonly<Record<PeerPolicyHeader, string | undefined>> = { none: undefined, openshell: 'X-OpenShell-Policy', ryno: 'X-Ryno-Policy' };
export const VIA_VALUE = '1.1 boundary';
const VIA_VALUE_H2 = '2 boundary';

// Always dropped on the way upstream. `host` is replaced by the canonical authority; `expect` because the
// 100-continue exchange ends at boundary; `x-forwarded-for`/`forwarded` because the client made them up.
const REQUEST_DROP: readonly string[] = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'expect',
  'x-forwarded-for',
  'forwarded',
  'via',
];

const RESPONSE_DROP: readonly string[] = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];

const DROP_UP = 1;
const DROP_DOWN = 2;
const CONTENT_LENGTH = 4;

// Every header of every request and response is looked up here: the names above, bucketed by length, are
// compared with the name case-folded on the fly, so no lower-cased copy is built and hashed per header.
const BY_LENGTH = buildTable();

function buildTable(): (readonly (readonly [lower: string, flags: number])[] | undefined)[] {
  const table: [string, number][][] = [];
  const add = (lower: string, flag: number): void => {
    const bucket = table[lower.length] ?? [];
    table[lower.length] = bucket;
    const known = bucket.find((entry) => entry[0] === lower);
    if (known === undefined) bucket.push([lower, flag]);
    else known[1] |= flag;
  };
  for (const name of REQUEST_DROP) add(name, DROP_UP);
  for (const name of RESPONSE_DROP) add(name, DROP_DOWN);
  add('content-length', CONTENT_LENGTH);
  return table;
}

/** What `İ` (U+0130) lower-cases to after its `i`: the one lower-case mapping that adds a character. */
const DOTTED_I_TAIL = '\u0307';

/** `name.toLowerCase() === lower` for a `lower` without U+0307, without building the lower-case copy. */
function equalsLower(name: string, lower: string): boolean {
  // Only `İ` lower-cases to more characters (adding U+0307, which `lower` lacks): a length mismatch is a mismatch.
  if (name.length !== lower.length) return false;
  for (let i = 0; i < name.length; i++) {
    let c = name.charCodeAt(i);
    if (c >= 0x80) return name.toLowerCase() === lower;
    if (c >= 0x41 && c <= 0x5a) c += 0x20;
    if (c !== lower.charCodeAt(i)) return false;
  }
  return true;
}

function flagsOf(name: string): number {
  let flags = 0;
  const bucket = BY_LENGTH[name.length];
  if (bucket !== undefined) {
    for (let i = 0; i < bucket.length; i++) {
      const entry = bucket[i] as readonly [lower: string, flags: number];
      if (equalsLower(name, entry[0])) {
        flags = entry[1];
        break;
      }
    }
  }
  return isBoundaryHeader(name) ? flags | DROP_UP | DROP_DOWN : flags;
}

/**
 * Adds the lower-cased names a Connection header nominates to `into` (made when first needed), leaving out
 * names dropped in this direction anyway (`always`): `Connection: keep-alive` then costs no list at all.
 */
function nominated(value: string | undefined, always: number, into: string[] | undefined): string[] | undefined {
  if (value === undefined) return into;
  let list = into;
  for (let start = 0; start <= value.length; ) {
    let end = value.indexOf(',', start);
    if (end < 0) end = value.length;
    const piece = start === 0 && end === value.length ? value : value.slice(start, end);
    const token = mayTrim(piece) ? piece.trim() : piece;
    start = end + 1;
    if (token === '' || (flagsOf(token) & always) !== 0) continue;
    list ??= [];
    list.push(token.toLowerCase());
  }
  return list;
}

/**
 * Whether String.prototype.trim() could change `s`: everything it trims is at or below U+0020 or at or above U+0080,
 * so a text whose ends are visible ASCII is left as it is (`Connection: keep-alive` asks no trim of its one token).
 */
function mayTrim(s: string): boolean {
  if (s.length === 0) return false;
  const first = s.charCodeAt(0);
  const last = s.charCodeAt(s.length - 1);
  return first <= 0x20 || first >= 0x80 || last <= 0x20 || last >= 0x80;
}

/** Whether `name.toLowerCase()` is one of the nominated tokens. */
function isNominated(name: string, tokens: readonly string[]): boolean {
  for (const token of tokens) {
    if (name.length === token.length) {
      if (equalsLower(name, token)) return true;
    } else if (token.includes(DOTTED_I_TAIL) && name.toLowerCase() === token) {
      // Lower-casing lengthens only `İ` (to `i` + U+0307): any other length mismatch is a mismatch.
      return true;
    }
  }
  return false;
}

function isBoundaryHeader(name: string): boolean {
  const prefix = BOUNDARY_HEADER_PREFIX;
  if (name.length <= prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) {
    let c = name.charCodeAt(i);
    if (c >= 0x80) return name.toLowerCase().startsWith(prefix);
    if (c >= 0x41 && c <= 0x5a) c += 0x20;
    if (c !== prefix.charCodeAt(i)) return false;
  }
  return true;
}

/** RFC 9110 section 7.6.3: Via names the version the request was received in; HTTP/2 is "2" (node says "2.0"). */
function viaValue(httpVersion: string): string {
  if (httpVersion === '1.1') return VIA_VALUE;
  return httpVersion === '2.0' ? VIA_VALUE_H2 : `${httpVersion} boundary`;
}

/**
 * Upstream request headers as a flat `[name, value, ...]` list (order and duplicates kept), as h1-client.ts
 * writes them. `upgrade` keeps `Connection: upgrade` + `Upgrade` for a WebSocket handshake.
 */
export function upstreamRequestHeaders(
  rawHeaders: readonly string[],
  options: { readonly host: string; readonly upgrade?: string; readonly httpVersion?: string },
): string[] {
  let drop: string[] | undefined;
  let via: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if (equalsLower(name, 'connection')) drop = nominated(rawHeaders[i + 1], DROP_UP, drop);
    else if (equalsLower(name, 'via')) via = via === undefined ? rawHeaders[i + 1] : `${via}, ${rawHeaders[i + 1]}`;
  }
  const out: string[] = ['host', options.host];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if ((flagsOf(name) & DROP_UP) !== 0 || (drop !== undefined && isNominated(name, drop))) continue;
    out.push(name, rawHeaders[i + 1] ?? '');
  }
  const own = viaValue(options.httpVersion ?? '1.1');
  out.push('via', via === undefined ? own : `${via}, ${own}`);
  if (options.upgrade !== undefined) out.push('connection', 'upgrade', 'upgrade', options.upgrade);
  return out;
}

/**
 * Upstream response headers filtered for the client, as a flat raw `[name, value, ...]` list in and out:
 * case and order kept, and duplicates (Set-Cookie) stay separate entries for res.writeHead(status, list).
 */
export function clientResponseHeaders(raw: readonly string[]): string[] {
  let drop: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (equalsLower(raw[i] ?? '', 'connection')) drop = nominated(raw[i + 1], DROP_DOWN, drop);
  }
  const out: string[] = [];
  let length = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const f = flagsOf(name);
    if ((f & DROP_DOWN) !== 0 || (drop !== undefined && isNominated(name, drop))) continue;
    if ((f & CONTENT_LENGTH) !== 0) {
      // h1-response.ts accepted repeated or listed lengths only when every value is the same (RFC 9112
      // §6.3): pass one plain value on, so no client downstream has to choose between copies.
      if (length) continue;
      length = true;
      const value = raw[i + 1] ?? '';
      const comma = value.indexOf(',');
      out.push(name, comma < 0 ? value : value.slice(0, comma).trim());
      continue;
    }
    out.push(name, raw[i + 1] ?? '');
  }
  return out;
}

/** Host header value: the port is omitted when it is the scheme's default. */
export function hostHeader(host: string, port: number, tls: boolean): string {
  const name = host.includes(':') ? `[${host}]` : host;
  return port === (tls ? 443 : 80) ? name : `${name}:${port}`;
}
