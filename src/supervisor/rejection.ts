// What the supervisor logs about a connection it turned away, or that turned it away: who dialled, the certificate
// each side presented (subject, SAN, issuer, expiry, fingerprint) and why. Public certificate fields only; never key
// material.

import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { describeError } from '../control/protocol.js';
import { type CertificateSummary, summarisePeerCertificate } from '../pki/certificate-summary.js';

/** The log fields of one refused connection. */
interface Rejection {
  readonly remote: string;
  /** OpenSSL's verification result (CERT_HAS_EXPIRED, UNABLE_TO_VERIFY_LEAF_SIGNATURE, ...), when there is one. */
  readonly verifyError?: string;
  /** What the peer presented. */
  readonly certificate: CertificateSummary | 'none presented';
  /** The handshake error, for a connection that failed before or during verification. */
  readonly err?: string;
}

/** A handshake the peer ended: the certificate this supervisor served, and what that most likely means. */
interface PeerRefusal {
  readonly served: CertificateSummary | undefined;
  readonly reason: string;
}

// Alerts a TLS client sends when it does not accept the server's certificate, and what Node's client does instead
// (it verifies after its last handshake message and hangs up without an alert): both end the handshake at the peer.
const PEER_REFUSED_CERTIFICATE = /ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED|UNSUPPORTED_CERTIFICATE|DECRYPT_ERROR)/;
const PEER_HUNG_UP = new Set(['ECONNRESET', 'EPIPE']);

/**
 * Keeps each connection's remote address from the moment it is accepted: by the time a handshake fails, Node has
 * destroyed the TLS socket and can no longer say who it was (it printed `?:?`).
 */
export function createRemoteBook(): { accepted(raw: Socket): void; remoteOf(socket: TLSSocket | Socket): string } {
  const remotes = new WeakMap<Socket, string>();
  const text = (socket: { readonly remoteAddress?: string | undefined; readonly remotePort?: number | undefined }): string | undefined =>
    socket.remoteAddress === undefined ? undefined : `${socket.remoteAddress}:${socket.remotePort ?? '?'}`;
  return {
    accepted(raw) {
      const remote = text(raw);
      if (remote !== undefined) remotes.set(raw, remote);
    },
    remoteOf(socket) {
      // A server-side TLS socket wraps the accepted one; Node keeps it as `_parent`, its only link to it.
      const raw = (socket as { _parent?: Socket | null })._parent ?? undefined;
      return text(socket) ?? (raw === undefined ? undefined : remotes.get(raw)) ?? '?:?';
    },
  };
}

/** `remote` as createRemoteBook found it; `err` is the handshake error (tlsClientError), absent after the handshake. */
export function rejectionOf(socket: TLSSocket, remote: string, err?: unknown): Rejection {
  const certificate = summarisePeerCertificate(socket) ?? 'none presented';
  const raw = socket.authorizationError;
  // Node verifies an empty chain when no certificate came, and calls that UNABLE_TO_GET_ISSUER_CERT: with no
  // certificate it says nothing the `certificate` field does not. A handshake that failed first has null.
  const noise = raw === null || raw === undefined || (certificate === 'none presented' && String(raw) === 'UNABLE_TO_GET_ISSUER_CERT');
  return {
    remote,
    ...(noise ? {} : { verifyError: String(raw) }),
    certificate,
    ...(err === undefined ? {} : { err: describeError(err).slice(0, 512) }),
  };
}

/** For a failed handshake: whether the peer ended it, most likely over the certificate served (`served`). */
export function peerRefusalOf(err: unknown, served: CertificateSummary | undefined): PeerRefusal | undefined {
  const code = String((err as { code?: unknown } | undefined)?.code ?? '');
  if (PEER_REFUSED_CERTIFICATE.test(code)) {
    return { served, reason: 'the client refused the certificate this supervisor served (its TLS alert says why)' };
  }
  if (PEER_HUNG_UP.has(code)) {
    return {
      served,
      reason: 'the client hung up during the handshake: a boundary does this when it does not accept the certificate served (not from the CA in its ca.pem, expired, or not naming the host it dialled)',
    };
  }
  return undefined;
}
