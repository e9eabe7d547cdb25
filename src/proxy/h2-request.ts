// An HTTP/2 stream's head as the request chain reads it beside the flat form (h2-stream.ts is the record itself): the
// fields by name, built only when a held body's checks ask, and the method of a head that failed its checks.

import type { IncomingHttpHeaders } from 'node:http';

/** The fields by name, repeated ones joined with `, ` as node:http does. */
export function fieldsByName(raw: readonly string[]): IncomingHttpHeaders {
  const byName: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    // Own fields only: a field named like an Object.prototype member (`constructor`) starts fresh.
    const known = Object.hasOwn(byName, name) ? byName[name] : undefined;
    byName[name] = known === undefined ? (raw[i + 1] as string) : `${known}, ${raw[i + 1] as string}`;
  }
  return byName;
}

/** The `:method` of a head that failed its checks, for its event (printable ASCII only, as the event may show it). */
export function methodOf(fields: readonly string[]): string {
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] === ':method') return /^[!-~]{1,32}$/.test(fields[i + 1] ?? '') ? (fields[i + 1] as string) : 'UNKNOWN';
  }
  return 'UNKNOWN';
}
