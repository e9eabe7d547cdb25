// X.509 v3 certificates as DER (RFC 5280): the extensions we issue, TBSCertificate assembly and signing, and
// the three facts read back from a CA certificate (subject, key identifier, keyUsage). Never touches files.

import { createHash, KeyObject, sign } from 'node:crypto';
import { BoundaryError } from '../shared/errors.js';
import { parseIp } from '../net/ip.js';
import {
  bitString,
  boolean,
  derNull,
  explicit,
  implicit,
  objectIdentifier,
  octetString,
  readChildren,
  readObjectIdentifier,
  readTlv,
  sequence,
  set,
  smallInteger,
  time,
  unsignedInteger,
  utf8String,
} from './der.js';

const OID = {
  commonName: '2.5.4.3',
  organizationName: '2.5.4.10',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  ecdsaWithSha384: '1.2.840.10045.4.3.3',
  sha256WithRsa: '1.2.840.113549.1.1.11',
} as const;

/** keyUsage bits (RFC 5280 4.2.1.3), as masks on the first content byte of the BIT STRING. */
export const KEY_USAGE = { digitalSignature: 0x80, keyCertSign: 0x04, cRLSign: 0x02 } as const;

/** What signs: a WebCrypto key plus the algorithm its signatures use (ECDSA P-256/P-384 or RSA PKCS#1 v1.5). */
export interface Signer {
  readonly privateKey: CryptoKey;
  readonly signingAlgorithm: Algorithm | EcdsaParams;
}

export type SanEntry = { readonly type: 'dns' | 'ip' | 'url'; readonly value: string };

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return sequence(objectIdentifier(oid), ...(critical ? [boolean(true)] : []), octetString(value));
}

/**
 * Distinguished name with one CN (after an O when `organization` is given), or the empty name (then the SAN carries
 * the identity and is critical).
 */
export function encodeName(commonName: string | undefined, organization?: string): Buffer {
  if (commonName === undefined) return sequence();
  const cn = set(sequence(objectIdentifier(OID.commonName), utf8String(commonName)));
  if (organization === undefined) return sequence(cn);
  return sequence(set(sequence(objectIdentifier(OID.organizationName), utf8String(organization))), cn);
}

export function basicConstraints(ca: boolean, pathLength?: number): Buffer {
  const value = sequence(...(ca ? [boolean(true)] : []), ...(pathLength === undefined ? [] : [smallInteger(pathLength)]));
  return extension(OID.basicConstraints, true, value);
}

export function keyUsage(mask: number): Buffer {
  // DER: trailing zero bits are dropped and counted as unused.
  let unused = 0;
  while (unused < 7 && (mask & (1 << unused)) === 0) unused++;
  return extension(OID.keyUsage, true, bitString(Buffer.from([mask]), unused));
}

export function extendedKeyUsage(purpose: 'serverAuth' | 'clientAuth'): Buffer {
  return extension(OID.extKeyUsage, false, sequence(objectIdentifier(OID[purpose])));
}

export function subjectAltName(entries: readonly SanEntry[], critical: boolean): Buffer {
  const names = entries.map((e) => {
    if (e.type === 'dns') return implicit(2, Buffer.from(e.value, 'latin1'));
    if (e.type === 'url') return implicit(6, Buffer.from(e.value, 'latin1'));
    return implicit(7, ipBytes(e.value));
  });
  return extension(OID.subjectAltName, critical, sequence(...names));
}

export const subjectKeyIdentifier = (keyId: Buffer): Buffer => extension(OID.subjectKeyIdentifier, false, octetString(keyId));
export const authorityKeyIdentifier = (keyId: Buffer): Buffer => extension(OID.authorityKeyIdentifier, false, sequence(implicit(0, keyId)));

/** RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits of a DER SubjectPublicKeyInfo. */
export function keyIdentifier(spki: Buffer): Buffer {
  const [, key] = readChildren(readTlv(spki).content);
  if (key === undefined) throw new BoundaryError('PKI_INVALID', 'malformed public key');
  return createHash('sha1').update(key.content.subarray(1)).digest();
}

function ipBytes(ip: string): Buffer {
  const parsed = parseIp(ip);
  if (parsed === undefined) throw new BoundaryError('PKI_NAME_INVALID', 'not an IP address');
  return Buffer.from(parsed.bytes);
}

function signature(signer: Signer): { algorithm: Buffer; hash: string } {
  const hash = String((signer.signingAlgorithm as EcdsaParams).hash ?? 'SHA-256').replace('-', '').toLowerCase();
  if (signer.signingAlgorithm.name === 'ECDSA') {
    return { algorithm: sequence(objectIdentifier(hash === 'sha384' ? OID.ecdsaWithSha384 : OID.ecdsaWithSha256)), hash };
  }
  return { algorithm: sequence(objectIdentifier(OID.sha256WithRsa), derNull()), hash: 'sha256' };
}

export interface CertificateFields {
  readonly serialHex: string;
  readonly issuer: Buffer;
  readonly subject: Buffer;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly spki: Buffer;
  readonly extensions: readonly Buffer[];
}

/** Assembles and signs the certificate; returns its DER. */
export function signCertificate(fields: CertificateFields, signer: Signer): Buffer {
  const { algorithm, hash } = signature(signer);
  const tbs = sequence(
    explicit(0, smallInteger(2)),
    unsignedInteger(Buffer.from(fields.serialHex, 'hex')),
    algorithm,
    fields.issuer,
    sequence(time(fields.notBefore), time(fields.notAfter)),
    fields.subject,
    fields.spki,
    explicit(3, sequence(...fields.extensions)),
  );
  const key = KeyObject.from(signer.privateKey);
  const value = sign(hash, tbs, key.asymmetricKeyType === 'ec' ? { key, dsaEncoding: 'der' } : key);
  return sequence(tbs, algorithm, bitString(value));
}

export interface CaFacts {
  /** The subject Name, byte for byte: leaves name it as their issuer. */
  readonly subject: Buffer;
  readonly subjectKeyId: Buffer | undefined;
  /** First byte of keyUsage, or undefined when the extension is absent. */
  readonly keyUsage: number | undefined;
}

/** Reads subject, subjectKeyIdentifier and keyUsage from a DER certificate; malformed input is PKI_INVALID. */
export function readCaFacts(der: Buffer): CaFacts {
  const [tbs] = readChildren(readTlv(der).content);
  if (tbs === undefined) throw new BoundaryError('PKI_INVALID', 'malformed certificate');
  const fields = readChildren(tbs.content);
  const start = fields[0]?.tag === 0xa0 ? 1 : 0;
  const subject = fields[start + 4];
  if (subject === undefined) throw new BoundaryError('PKI_INVALID', 'malformed certificate');
  let subjectKeyId: Buffer | undefined;
  let usage: number | undefined;
  const exts = fields.find((f) => f.tag === 0xa3);
  for (const ext of exts === undefined ? [] : readChildren(readTlv(exts.content).content)) {
    const parts = readChildren(ext.content);
    const id = readObjectIdentifier(parts[0]?.content ?? Buffer.alloc(0));
    const value = parts[parts.length - 1];
    if (value === undefined) continue;
    if (id === OID.subjectKeyIdentifier) subjectKeyId = Buffer.from(readTlv(value.content).content);
    if (id === OID.keyUsage) usage = readTlv(value.content).content[1] ?? 0;
  }
  return { subject: Buffer.from(subject.raw), subjectKeyId, keyUsage: usage };
}

/** PEM armour with 64-character lines and exactly one trailing newline. */
export function pem(der: Buffer, label: 'CERTIFICATE' | 'PRIVATE KEY'): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}
