// What the supervisor logs about a connection it turned away: who dialled, the certificate it presented
// (subject, SAN, expiry) and why it was refused. Public certificate fields only; never key material.

import type { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { describeError } from '../control/protocol.js';

/** Longest certificate field copied into a log line: a hostile client picks these strings. */
const MAX_CERT_FIELD_CHARS = 512;

interface PresentedCertificate {
  readonly subject: string;
  readonly san: string;
  readonly notAfter: string;
  readonly issuer: string;
}

/** The log fields of one refused connection. */
interface Rejection {
  readonly remote: string;
  /** OpenSSL's verification result (CERT_HAS_EXPIRED, UNABLE_TO_VERIFY_LEAF_SIGNATURE, ...), when there is one. */
  readonly verifyError?: string;
  readonly certificate: PresentedCertificate | 'none presented';
  /** The handshake error, for a connection that failed before or during verification. */
  readonly err?: string;
}

const cut = (text: string | undefined): string => (text ?? '').trim().replace(/\n/g, ', ').slice(0, MAX_CERT_FIELD_CHARS);

/** The presented certificate's public fields; undefined when the peer sent none (or the socket is gone). */
function presentedCertificate(socket: TLSSocket): PresentedCertificate | undefined {
  let cert: X509Certificate | undefined;
  try {
    cert = socket.getPeerX509Certificate();
  } catch {
    return undefined;
  }
  if (cert === undefined) return undefined;
  return { subject: cut(cert.subject), san: cut(cert.subjectAltName), notAfter: cut(cert.validTo), issuer: cut(cert.issuer) };
}

export function remoteOf(socket: { readonly remoteAddress?: string | undefined; readonly remotePort?: number | undefined }): string {
  return `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
}

/** `err` is the handshake error (tlsClientError); a connection refused after the handshake has none. */
export function rejectionOf(socket: TLSSocket, err?: unknown): Rejection {
  const certificate = presentedCertificate(socket) ?? 'none presented';
  const raw = socket.authorizationError;
  // Node verifies an empty chain when no certificate came, and calls that UNABLE_TO_GET_ISSUER_CERT: with no
  // certificate it says nothing the `certificate` field does not. A handshake that failed first has null.
  const noise = raw === null || raw === undefined || (certificate === 'none presented' && String(raw) === 'UNABLE_TO_GET_ISSUER_CERT');
  return {
    remote: remoteOf(socket),
    ...(noise ? {} : { verifyError: String(raw) }),
    certificate,
    ...(err === undefined ? {} : { err: cut(describeError(err)) }),
  };
}
