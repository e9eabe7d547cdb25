// What a log line says about a certificate one end of the control channel presented: subject, SAN, issuer,
// notAfter and SHA-256 fingerprint, bounded and on one line each. Public fields only; never key material.

import { X509Certificate } from 'node:crypto';
import type { PeerCertificate, TLSSocket } from 'node:tls';

/** Longest certificate field copied into a log line: a hostile peer picks these strings. */
const MAX_CERT_FIELD_CHARS = 512;
/** Hex digits of the fingerprint in the one-line form (the JSON field has all of it). */
const SHORT_FINGERPRINT_HEX = 16;

export interface CertificateSummary {
  readonly subject: string;
  readonly san: string;
  readonly issuer: string;
  readonly notAfter: string;
  /** Colon-separated upper-case hex, as openssl and node print it. */
  readonly fingerprint256: string;
}

const cut = (text: string | undefined): string => (text ?? '').trim().replace(/\n/g, ', ').slice(0, MAX_CERT_FIELD_CHARS);

export function summariseCertificate(cert: X509Certificate): CertificateSummary {
  return {
    subject: cut(cert.subject),
    san: cut(cert.subjectAltName),
    issuer: cut(cert.issuer),
    notAfter: cut(cert.validTo),
    fingerprint256: cert.fingerprint256,
  };
}

/** Node's rendering of a DN (`{ O: 'td', CN: 'x' }`, a repeated attribute as an array) as X509Certificate prints it. */
function renderedName(name: Record<string, string | string[]> | undefined): string {
  if (name === undefined) return '';
  const parts: string[] = [];
  for (const [key, value] of Object.entries(name)) for (const one of Array.isArray(value) ? value : [value]) parts.push(`${key}=${one}`);
  return parts.join(', ');
}

/**
 * The same summary from the leaf a TLS handshake already rendered for its name check (getPeerCertificate(false)):
 * no second parse of the certificate on a path every re-attach takes.
 */
export function summariseRendered(cert: PeerCertificate): CertificateSummary {
  return {
    subject: cut(renderedName(cert.subject as unknown as Record<string, string | string[]> | undefined)),
    san: cut(cert.subjectaltname),
    issuer: cut(renderedName(cert.issuer as unknown as Record<string, string | string[]> | undefined)),
    notAfter: cut(cert.valid_to),
    fingerprint256: cert.fingerprint256,
  };
}

/** The first certificate of `pem`, summarised; undefined when it holds none that parses. */
export function summarisePem(pem: string): CertificateSummary | undefined {
  try {
    return summariseCertificate(new X509Certificate(pem));
  } catch {
    return undefined;
  }
}

/** What the peer of `socket` presented; undefined when it sent nothing (or the socket is gone). */
export function summarisePeerCertificate(socket: TLSSocket): CertificateSummary | undefined {
  try {
    const cert = socket.getPeerX509Certificate();
    return cert === undefined ? undefined : summariseCertificate(cert);
  } catch {
    return undefined;
  }
}

/** `CN=x [DNS:x, IP Address:10.0.0.7] issued by O=td, CN=ca, sha256 AB12CD34EF56A7B8…`, for a message. */
export function certificateText(summary: CertificateSummary): string {
  const san = summary.san === '' ? '' : ` [${summary.san}]`;
  const short = summary.fingerprint256.replace(/:/g, '').slice(0, SHORT_FINGERPRINT_HEX);
  return `${summary.subject || '(empty subject)'}${san} issued by ${summary.issuer || '(empty issuer)'}, sha256 ${short}…`;
}
