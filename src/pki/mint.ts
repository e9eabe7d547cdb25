// Shared certificate plumbing for ca.ts, leaf.ts and issue.ts: key pairs, PEM export, serials, names.
// Never touches the filesystem or reads a clock: callers pass dates.
import 'reflect-metadata';
import { createPrivateKey, createPublicKey, randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';
import { BoundaryError } from '../errors.js';

// @peculiar/x509 keeps its provider in a library-level registry; every mint below also passes the
// provider explicitly, so the order in which modules load never matters.
export const crypto = webcrypto as unknown as Crypto;
x509.cryptoProvider.set(crypto);

/** Backdating of notBefore, so a peer whose clock runs a little behind still accepts a fresh certificate. */
export const CLOCK_SKEW_MS = 60 * 60 * 1000;
export const DAY_MS = 24 * 60 * 60 * 1000;
/** RFC 5280 ub-common-name: longer names go only into the SAN. */
export const MAX_COMMON_NAME_CHARS = 64;
const SERIAL_BYTES = 16;
const MAX_DNS_NAME_CHARS = 253;

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;

/** What a signing key needs besides the CryptoKey: the algorithm to put into signatures. */
export interface SigningKey {
  readonly privateKey: CryptoKey;
  readonly signingAlgorithm: Algorithm | EcdsaParams;
}

export async function generateP256(): Promise<CryptoKeyPair> {
  return (await crypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as CryptoKeyPair;
}

export function p256Signing(privateKey: CryptoKey): SigningKey {
  return { privateKey, signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' } as EcdsaParams };
}

/** PEM text always ends in exactly one newline, so files and in-memory copies compare equal. */
export function endLine(pem: string): string {
  return `${pem.trimEnd()}\n`;
}

export async function exportKeyPem(key: CryptoKey): Promise<string> {
  const der = await crypto.subtle.exportKey('pkcs8', key);
  return endLine(x509.PemConverter.encode(der, 'PRIVATE KEY'));
}

export function certificatePem(certificate: x509.X509Certificate): string {
  return endLine(certificate.toString('pem'));
}

/**
 * Imports a PEM private key (PKCS#8, SEC1 or PKCS#1) for signing. EC P-256/P-384 and RSA are accepted,
 * so an operator can bring an existing CA; anything else is PKI_INVALID.
 */
export async function importSigningKey(keyPem: string): Promise<SigningKey & { readonly spki: Buffer }> {
  let keyObject: ReturnType<typeof createPrivateKey>;
  try {
    keyObject = createPrivateKey(keyPem);
  } catch (err) {
    throw new BoundaryError('PKI_INVALID', 'the private key is not a readable PEM key', { cause: err });
  }
  const der = keyObject.export({ type: 'pkcs8', format: 'der' });
  const spki = createPublicKey(keyObject).export({ type: 'spki', format: 'der' });
  const details = keyObject.asymmetricKeyDetails ?? {};
  if (keyObject.asymmetricKeyType === 'ec' && (details.namedCurve === 'prime256v1' || details.namedCurve === 'secp384r1')) {
    const namedCurve = details.namedCurve === 'prime256v1' ? 'P-256' : 'P-384';
    const hash = namedCurve === 'P-256' ? 'SHA-256' : 'SHA-384';
    const privateKey = await crypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve }, true, ['sign']);
    return { privateKey, signingAlgorithm: { name: 'ECDSA', hash } as EcdsaParams, spki };
  }
  if (keyObject.asymmetricKeyType === 'rsa') {
    const algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
    const privateKey = await crypto.subtle.importKey('pkcs8', der, algorithm, true, ['sign']);
    return { privateKey, signingAlgorithm: algorithm, spki };
  }
  throw new BoundaryError(
    'PKI_INVALID',
    `unsupported CA key type ${keyObject.asymmetricKeyType ?? 'unknown'} (want EC P-256/P-384 or RSA)`,
  );
}

/** 16 random bytes, first byte 0x01-0x7f: positive, never zero, never re-encoded with a pad byte. */
export function randomSerial(): string {
  const bytes = randomBytes(SERIAL_BYTES);
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) || 0x01;
  return bytes.toString('hex');
}

const DNS_LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/** A DNS name we are willing to certify: lower-case LDH labels (underscore allowed), no wildcard. */
function isCertifiableDnsName(name: string): boolean {
  if (name.length === 0 || name.length > MAX_DNS_NAME_CHARS || name !== name.toLowerCase()) return false;
  return name.split('.').every((label) => DNS_LABEL.test(label));
}

/** Lower-cases, strips one trailing dot and IPv6 brackets; undefined when the name cannot be certified. */
export function normaliseCertName(raw: string): { name: string; type: 'dns' | 'ip' } | undefined {
  let name = raw.trim().toLowerCase();
  if (name.startsWith('[') && name.endsWith(']')) name = name.slice(1, -1);
  if (isIP(name) !== 0) return { name, type: 'ip' };
  if (name.endsWith('.')) name = name.slice(0, -1);
  return isCertifiableDnsName(name) ? { name, type: 'dns' } : undefined;
}

/** Subject DN with the CN when it fits; the SAN carries the identity either way. */
export function subjectName(commonName: string): x509.JsonName {
  return commonName.length <= MAX_COMMON_NAME_CHARS ? [{ CN: [commonName] }] : [];
}

interface MintOptions {
  readonly issuer: { readonly certificate: x509.X509Certificate } & SigningKey;
  readonly publicKey: CryptoKey;
  readonly subject: x509.JsonName;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly extensions: readonly x509.Extension[];
}

/** Signs an end-entity certificate with the issuer's key; adds SKI and AKI. */
export async function mintCertificate(options: MintOptions): Promise<x509.X509Certificate> {
  const { issuer } = options;
  const ski = await x509.SubjectKeyIdentifierExtension.create(options.publicKey, false, crypto);
  const issuerSki = issuer.certificate.getExtension(x509.SubjectKeyIdentifierExtension);
  const aki = issuerSki
    ? new x509.AuthorityKeyIdentifierExtension(issuerSki.keyId)
    : await x509.AuthorityKeyIdentifierExtension.create(issuer.certificate.publicKey, false, crypto);
  return x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerial(),
      subject: options.subject,
      issuer: issuer.certificate.subjectName,
      notBefore: options.notBefore,
      notAfter: options.notAfter,
      publicKey: options.publicKey,
      signingKey: issuer.privateKey,
      signingAlgorithm: issuer.signingAlgorithm,
      extensions: [...options.extensions, ski, aki],
    },
    crypto,
  );
}
