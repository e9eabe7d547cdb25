// The replay fields a denial event carries under `unmapped.replay` (docs/events.md#replaying-a-denial): enough to
// ask explain the same question again. Pure; query values, placeholders and secrets are never part of them.

/** Query keys kept per event; a request with more says `query_keys_truncated`. */
export const MAX_REPLAY_QUERY_KEYS = 32;
/** Longest query key kept; a longer one is cut (explain then sees a different key, which the event says). */
export const MAX_REPLAY_QUERY_KEY_CHARS = 128;
const MAX_REPLAY_PATH_CHARS = 4_096;
const MAX_REPLAY_HOST_CHARS = 253;

export interface ReplayFields {
  /** `http` or `https` for a request (`https` after TLS termination); absent for a connection-level decision. */
  readonly scheme?: 'http' | 'https';
  /** The request method; absent for a connection-level decision (CONNECT, a captured connection). */
  readonly method?: string;
  readonly host: string;
  readonly port: number;
  /** Canonical path (placeholders shown as `[CREDENTIAL]`), without the query. */
  readonly path?: string;
  /** Names of the query parameters present, percent-decoded, in order of appearance, each once; never a value. */
  readonly query_keys?: readonly string[];
  readonly query_keys_truncated?: true;
  /** The executable the denial was decided for, when a process was identified (docs/identity.md#explain). */
  readonly binary?: string;
}

/** Distinct keys of a raw query, bounded; `decode` percent-decodes, `redact` hides placeholders. */
export function replayQueryKeys(rawQuery: string, decode: (text: string) => string, redact: (text: string) => string): { keys: string[]; truncated: boolean } {
  const keys: string[] = [];
  let truncated = false;
  for (const piece of rawQuery.split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    const key = redact(decode(eq < 0 ? piece : piece.slice(0, eq))).slice(0, MAX_REPLAY_QUERY_KEY_CHARS);
    if (keys.includes(key)) continue;
    if (keys.length >= MAX_REPLAY_QUERY_KEYS) {
      truncated = true;
      break;
    }
    keys.push(key);
  }
  return { keys, truncated };
}

/** Reads `unmapped.replay` back from an event (a logged line, a forwarded OCSF object); undefined when unusable. */
export function replayFromUnmapped(unmapped: unknown): ReplayFields | undefined {
  if (typeof unmapped !== 'object' || unmapped === null) return undefined;
  const raw = (unmapped as { replay?: unknown }).replay;
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  const { host, port, scheme, method, path } = r;
  if (typeof host !== 'string' || host === '' || host.length > MAX_REPLAY_HOST_CHARS) return undefined;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65_535) return undefined;
  const out: { -readonly [K in keyof ReplayFields]: ReplayFields[K] } = { host, port };
  if (scheme === 'http' || scheme === 'https') out.scheme = scheme;
  if (typeof method === 'string' && method !== '') out.method = method;
  if (typeof path === 'string' && path.startsWith('/') && path.length <= MAX_REPLAY_PATH_CHARS) out.path = path;
  if (Array.isArray(r.query_keys)) {
    out.query_keys = r.query_keys.filter((k): k is string => typeof k === 'string').slice(0, MAX_REPLAY_QUERY_KEYS).map((k) => k.slice(0, MAX_REPLAY_QUERY_KEY_CHARS));
  }
  if (r.query_keys_truncated === true) out.query_keys_truncated = true;
  if (typeof r.binary === 'string' && r.binary.startsWith('/') && r.binary.length <= MAX_REPLAY_PATH_CHARS) out.binary = r.binary;
  return out;
}

/**
 * The explain TARGET (and method) that asks the same question: `scheme://host:port/path?k1=&k2=` for a request,
 * `host:port` for a connection. Query values were never recorded, so each key is replayed with an empty value.
 */
export function replayTarget(fields: ReplayFields): { readonly target: string; readonly method?: string } {
  const authority = fields.host.includes(':') ? `[${fields.host}]:${fields.port}` : `${fields.host}:${fields.port}`;
  if (fields.method === undefined) return { target: authority };
  const keys = fields.query_keys ?? [];
  const query = keys.length === 0 ? '' : `?${keys.map((k) => `${encodeURIComponent(k)}=`).join('&')}`;
  return { target: `${fields.scheme ?? 'http'}://${authority}${fields.path ?? '/'}${query}`, method: fields.method };
}
