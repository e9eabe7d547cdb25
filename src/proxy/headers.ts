// Header rewriting in both directions: hop-by-hop and Connection-nominated headers, proxy headers,
// client-sent forwarding headers (pin CR-04: stripped) and boundary's own X-Boundary-* (CR-03) never cross.
// Pure; never decides policy and never sees secrets beyond passing values through.

/** boundary's own response headers; anything with this prefix from either side is dropped (CR-03). */
export const BOUNDARY_HEADER_PREFIX = 'x-boundary-';
export const POLICY_HEADER = 'X-Boundary-Policy';
export const VIA_VALUE = '1.1 boundary';

// Always dropped on the way upstream. `host` is replaced by the canonical authority; `expect` because the
// 100-continue exchange ends at boundary; `x-forwarded-for`/`forwarded` because the client made them up.
const REQUEST_DROP: ReadonlySet<string> = new Set([
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
]);

const RESPONSE_DROP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function nominated(value: string | undefined, into: Set<string>): void {
  if (value === undefined) return;
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '') into.add(name);
  }
}

function isBoundaryHeader(lower: string): boolean {
  return lower.length > BOUNDARY_HEADER_PREFIX.length && lower.startsWith(BOUNDARY_HEADER_PREFIX);
}

/**
 * Upstream request headers as a flat `[name, value, ...]` list (order and duplicates kept), as h1-client.ts
 * writes them. `upgrade` keeps `Connection: upgrade` + `Upgrade` for a WebSocket handshake.
 */
export function upstreamRequestHeaders(
  rawHeaders: readonly string[],
  options: { readonly host: string; readonly upgrade?: string },
): string[] {
  let drop: Set<string> | undefined;
  let via: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if (name.length === 10 && name.toLowerCase() === 'connection') {
      drop ??= new Set();
      nominated(rawHeaders[i + 1], drop);
    } else if (name.length === 3 && name.toLowerCase() === 'via') {
      via = via === undefined ? rawHeaders[i + 1] : `${via}, ${rawHeaders[i + 1]}`;
    }
  }
  const out: string[] = ['host', options.host];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    const lower = name.toLowerCase();
    if (REQUEST_DROP.has(lower) || drop?.has(lower) || isBoundaryHeader(lower)) continue;
    out.push(name, rawHeaders[i + 1] ?? '');
  }
  out.push('via', via === undefined ? VIA_VALUE : `${via}, ${VIA_VALUE}`);
  if (options.upgrade !== undefined) out.push('connection', 'upgrade', 'upgrade', options.upgrade);
  return out;
}

/**
 * Upstream response headers filtered for the client, as a flat raw `[name, value, ...]` list in and out:
 * case and order kept, and duplicates (Set-Cookie) stay separate entries for res.writeHead(status, list).
 */
export function clientResponseHeaders(raw: readonly string[]): string[] {
  let drop: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    if (name.length === 10 && name.toLowerCase() === 'connection') {
      drop ??= new Set();
      nominated(raw[i + 1], drop);
    }
  }
  const out: string[] = [];
  let length = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const lower = name.toLowerCase();
    if (RESPONSE_DROP.has(lower) || drop?.has(lower) || isBoundaryHeader(lower)) continue;
    if (lower === 'content-length') {
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
