// Client certificates boundary holds and presents upstream (docs/credentials.md#client-certificates): loading the
// PEM files a provider names (certificate, key, optional chain) and checking that the key matches, and choosing the
// one certificate bound to a host and port. The key is a Secret; the certificate and its fingerprint are public.

import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { BoundaryError } from '../shared/errors.js';
import { Secret } from './secret.js';
import type { CredentialSet } from './set.js';

/** A certificate, key or chain file larger than this is refused before decoding. */
const MAX_CLIENT_CERT_FILE_BYTES = 262_144;

/** The files a provider's `client_certificate` names, relative to the credentials file. */
export interface ClientCertificateFiles {
  readonly cert: string;
  readonly key: string;
  readonly chain?: string | undefined;
}

export interface ClientCertificate {
  /** SHA-256 of the leaf certificate (colon hex): names the identity in pools and session caches. */
  readonly fingerprint: string;
  /** The leaf's subject, for docs and tests; never the key. */
  readonly subject: string;
  /** Validity (ms since the epoch): boundary presents the certificate only inside it. */
  readonly notBefore: number;
  readonly notAfter: number;
  /** Leaf then chain, PEM: what the TLS handshake presents. */
  readonly certChainPem: string;
  readonly key: Secret;
}

export type ClientCertificateChoice =
  | { readonly kind: 'none' }
  | { readonly kind: 'one'; readonly certificate: ClientCertificate }
  /** Two providers bind different certificates to the same host and port: none is presented. */
  | { readonly kind: 'ambiguous' };

const NONE: ClientCertificateChoice = Object.freeze({ kind: 'none' });
const AMBIGUOUS: ClientCertificateChoice = Object.freeze({ kind: 'ambiguous' });
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

async function readPem(base: string, path: string, what: string): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readFile(resolve(base, path));
  } catch (err) {
    const why = err instanceof Error && 'code' in err ? String(err.code) : 'unreadable';
    throw new BoundaryError('CREDENTIALS_CLIENT_CERT_INVALID', `client_certificate.${what} could not be read (${why})`);
  }
  if (bytes.length > MAX_CLIENT_CERT_FILE_BYTES) {
    throw new BoundaryError('CREDENTIALS_CLIENT_CERT_INVALID', `client_certificate.${what} is larger than ${MAX_CLIENT_CERT_FILE_BYTES} bytes`);
  }
  return bytes.toString('utf8');
}

/** Only whole PEM certificate blocks of `text`, each parsed; anything else in a certificate file is refused. */
function certificatesIn(text: string, what: string): string[] {
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0 || text.replace(PEM_CERTIFICATE, '').trim() !== '') {
    throw new BoundaryError('CREDENTIALS_CLIENT_CERT_INVALID', `client_certificate.${what} must hold only PEM certificates`);
  }
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch {
      throw new BoundaryError('CREDENTIALS_CLIENT_CERT_INVALID', `client_certificate.${what} holds a certificate that does not parse`);
    }
  }
  return blocks;
}

/**
 * Reads and checks one provider's certificate, key and chain: the certificate file's first block is the leaf, the
 * rest (and the chain file) is sent after it. Throws CREDENTIALS_CLIENT_CERT_INVALID; the message never holds the key.
 */
export async function loadClientCertificate(files: ClientCertificateFiles, base: string): Promise<ClientCertificate> {
  const [certText, keyText, chainText] = await Promise.all([
    readPem(base, files.cert, 'cert'),
    readPem(base, files.key, 'key'),
    files.chain === undefined ? Promise.resolve(undefined) : readPem(base, files.chain, 'chain'),
  ]);
  return clientCertificateFromPem(certText, keyText, chainText);
}

/** The same checks on PEM text (attached mode: the supervisor delivers the chain and key). Throws CREDENTIALS_CLIENT_CERT_INVALID. */
export function clientCertificateFromPem(certText: string, keyText: string, chainText?: string): ClientCertificate {
  const certs = [...certificatesIn(certText, 'cert'), ...(chainText === undefined ? [] : certificatesIn(chainText, 'chain'))];
  const leaf = new X509Certificate(certs[0] as string);
  let matches: boolean;
  try {
    matches = leaf.checkPrivateKey(createPrivateKey(keyText));
  } catch {
    // The parser's message could quote the key file: say only what is wrong.
    throw new BoundaryError('CREDENTIALS_CLIENT_CERT_INVALID', 'client_certificate.key is not a PEM private key (encrypted keys are not supported)');
  }
  if (!matches) throw new BoundaryError('CREDENTIALS_CLIENT_CERT_INVALID', 'client_certificate.key does not match client_certificate.cert');
  return Object.freeze({
    fingerprint: leaf.fingerprint256,
    subject: leaf.subject,
    notBefore: Date.parse(leaf.validFrom),
    notAfter: Date.parse(leaf.validTo),
    certChainPem: `${certs.join('\n')}\n`,
    key: new Secret(keyText),
  });
}

/** Same certificate and key: a reload that re-read unchanged files keeps its revision. */
export function sameClientCertificate(a: ClientCertificate | undefined, b: ClientCertificate | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.fingerprint === b.fingerprint && a.certChainPem === b.certChainPem && a.key.equals(b.key);
}

/**
 * The certificate to present to host:port (host normalised, lower case, no trailing dot): that of every provider
 * whose own endpoints match the authority. A handshake has no path yet, so paths are never looked at (a provider
 * with a certificate cannot have endpoint paths: set.ts refuses them).
 */
export function clientCertificateFor(set: CredentialSet, host: string, port: number): ClientCertificateChoice {
  let found: ClientCertificate | undefined;
  for (const provider of set.providers.values()) {
    const certificate = provider.clientCertificate;
    if (certificate === undefined || !provider.endpoints.some((e) => e.matchesAuthority(host, port))) continue;
    if (found !== undefined && !sameClientCertificate(found, certificate)) return AMBIGUOUS;
    found = certificate;
  }
  return found === undefined ? NONE : { kind: 'one', certificate: found };
}
