// Shared certificate plumbing for ca.ts, leaf.ts and issue.ts: key pairs, PEM export, serials, names.
// Never touches the filesystem or reads a clock: callers pass dates.
import { createPrivateKey, createPublicKey, randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { authorityKeyIdentifier, encodeName, keyIdentifier, pem, type Signer, signCertificate, subjectKeyIdentifier } from './certificate-der.js';

export const crypto = webcrypto as unknown as Crypto;

/** Backdating of notBefore, so a peer whose clock runs a little behind still accepts a fresh certificate. */
export const CLOCK_SKEW_MS = 60 * 60 * 1000;
export const DAY_MS = 24 * 60 * 60 * 1000;
/** RFC 5280 ub-common-name: longer names go only into the SAN. */
export const MAX_COMMON_NAME_CHARS = 64;
const SERIAL_BYTES = 16;
const MAX_DNS_NAME_CHARS = 253;

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;

/** What a signing key needs besides the CryptoKey: the algorithm to put into signatures. */
export type SigningKey = Signer;

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
  return pem(Buffer.from(await crypto.subtle.exportKey('pkcs8', key)), 'PRIVATE KEY');
}

export function certificatePem(der: Buffer): string {
  return pem(der, 'CERTIFICATE');
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

/** A subject Name: its DER, and whether it is empty (then the SAN must be critical, RFC 5280 4.2.1.6). */
export interface SubjectName {
  readonly der: Buffer;
  readonly empty: boolean;
}

/** Subject DN with the CN when it fits; the SAN carries the identity either way. */
export function subjectName(commonName: string): SubjectName {
  const fits = commonName.length <= MAX_COMMON_NAME_CHARS;
  return { der: encodeName(fits ? commonName : undefined), empty: !fits };
}

/** What a certificate needs from its issuer: its subject Name byte for byte, its key identifier, its key. */
export interface Issuer extends SigningKey {
  readonly nameDer: Buffer;
  readonly keyId: Buffer;
}

interface MintOptions {
  readonly issuer: Issuer;
  readonly publicKey: CryptoKey;
  readonly subject: SubjectName;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** DER Extension values (certificate-der.ts builders). */
  readonly extensions: readonly Buffer[];
}

/** Signs an end-entity certificate with the issuer's key; adds SKI and AKI. Returns the DER. */
export async function mintCertificate(options: MintOptions): Promise<Buffer> {
  const { issuer } = options;
  const spki = Buffer.from(await crypto.subtle.exportKey('spki', options.publicKey));
  return signCertificate(
    {
      serialHex: randomSerial(),
      issuer: issuer.nameDer,
      subject: options.subject.der,
      notBefore: options.notBefore,
      notAfter: options.notAfter,
      spki,
      extensions: [...options.extensions, subjectKeyIdentifier(keyIdentifier(spki)), authorityKeyIdentifier(issuer.keyId)],
    },
    issuer,
  );
}
