// The message and URL strings of a request's decision event, handed back as the very strings made for an earlier
// request with the same parts: the audit line's memo (telemetry/audit-memo.ts) then finds its template by a
// string already flat and hashed, and compares the URL by identity. Pure: the same parts always give the same text.

/** Slots of the table (a power of two); a slot holds the texts of the last request whose parts chose it. */
export const EVENT_TEXT_SLOTS = 64;
/** Requests whose path is longer are not kept: their texts are made afresh. */
export const MAX_EVENT_TEXT_PATH_CHARS = 512;

interface Texts {
  readonly statusDetail: string;
  readonly method: string;
  readonly host: string;
  readonly port: number | undefined;
  readonly path: string;
  readonly scheme: 'http' | 'https';
  readonly message: string;
  readonly url: string;
}

export interface EventTexts {
  readonly message: string;
  readonly url: string;
}

const DEFAULT_PORTS = { http: 80, https: 443 } as const;

/** `host:port` as an event shows it (an IPv6 literal bracketed); `-` without a host. */
export function target(host: string | undefined, port: number | undefined): string {
  if (host === undefined) return '-';
  const shown = host.includes(':') ? `[${host}]` : host;
  return port === undefined ? shown : `${shown}:${port}`;
}

function makeTexts(statusDetail: string, method: string, host: string, port: number | undefined, path: string, scheme: 'http' | 'https'): Texts {
  const where = target(host, port);
  // docs/events.md#shorthand-line: https after TLS termination; the port is printed unless the scheme's default.
  const shown = port === undefined || port === DEFAULT_PORTS[scheme] ? target(host, undefined) : where;
  return { statusDetail, method, host, port, path, scheme, message: `${statusDetail} ${method} ${where}${path}`, url: `${scheme}://${shown}${path}` };
}

/** A slot from the lengths and the last characters of path and host: requests that differ, differ there mostly. */
function slotOf(host: string, port: number | undefined, path: string): number {
  const last = path.length === 0 ? 0 : path.charCodeAt(path.length - 1);
  return (path.length * 31 + host.length * 7 + last + (port ?? 0)) & (EVENT_TEXT_SLOTS - 1);
}

/** An HTTP request event's message (`<status detail> <method> <host:port><path>`) and URL. */
export function createEventTexts(): (
  statusDetail: string,
  method: string,
  host: string,
  port: number | undefined,
  path: string,
  scheme: 'http' | 'https',
) => EventTexts {
  const slots: (Texts | undefined)[] = new Array<Texts | undefined>(EVENT_TEXT_SLOTS).fill(undefined);
  return function eventTexts(statusDetail, method, host, port, path, scheme) {
    if (path.length > MAX_EVENT_TEXT_PATH_CHARS) return makeTexts(statusDetail, method, host, port, path, scheme);
    const slot = slotOf(host, port, path);
    const known = slots[slot];
    if (
      known !== undefined &&
      known.path === path &&
      known.host === host &&
      known.port === port &&
      known.method === method &&
      known.statusDetail === statusDetail &&
      known.scheme === scheme
    ) {
      return known;
    }
    const made = makeTexts(statusDetail, method, host, port, path, scheme);
    slots[slot] = made;
    return made;
  };
}
