// What both ends of the control channel share besides the messages (messages.ts): the HTTP/2 header names, how an
// error is put into words, which relay hosts count as loopback, and the timing both ends use to follow a TLS
// folder. The supervisor imports these from here, never from the boundary's client files. No I/O.

import { isIP } from 'node:net';

/** Names the session a request belongs to (every request after attach). */
export const SESSION_HEADER = 'boundary-session-id';
/** Set by the boundary on a relay stream it refuses (the refusal code). */
export const RELAY_REFUSED_HEADER = 'boundary-relay-refused';
/** cert-manager writes a Secret's keys in one swap, a hand edit in several writes: read once they settle. */
export const TLS_RELOAD_SETTLE_MS = 100;
/** How long before notAfter /readyz starts warning (ready stays true until the certificate has expired). */
export const CERT_EXPIRY_WARNING_DAYS = 7;

const LOOPBACK_V4 = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** A relay target or admin listener host on loopback: 127.0.0.0/8 or ::1, as a literal. */
export function isLoopbackHost(host: string): boolean {
  return (isIP(host) === 4 && LOOPBACK_V4.test(host)) || host === '::1';
}

/** A readable message for an error: never empty, code first when there is one. */
export function describeError(err: unknown): string {
  if (err === undefined || err === null) return 'unknown error';
  const code = (err as NodeJS.ErrnoException).code;
  const text = err instanceof Error ? err.message : String(err);
  const message = code !== undefined && !text.includes(code) ? `${code}: ${text}` : text;
  return message === '' ? 'unknown error' : message;
}
