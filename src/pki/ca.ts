// Certificate authorities: the interception CA that signs TLS leaves, and the control-channel CA that
// `boundary pki` creates. Creates, loads and checks CAs; never mints end-entity certificates.
import { X509Certificate } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { BoundaryError } from '../shared/errors.js';
import {
  basicConstraints,
  encodeName,
  KEY_USAGE,
  keyIdentifier,
  keyUsage,
  readCaFacts,
  signCertificate,
  subjectKeyIdentifier,
} from './certificate-der.js';
import { CERT_FILE_MODE, ensureDir, KEY_FILE_MODE, pathExists, readPemFile, writeFileAtomic } from './files.js';
import {
  CLOCK_SKEW_MS,
  crypto,
  DAY_MS,
  certificatePem,
  endLine,
  exportKeyPem,
  generateP256,
  type Issuer,
  importSigningKey,
  MAX_COMMON_NAME_CHARS,
  p256Signing,
  randomSerial,
  type SigningKey,
} from './mint.js';

const CA_VALIDITY_DAYS = 3650;
export const INTERCEPTION_CA_VALIDITY_DAYS = 365;
const INTERCEPTION_CA_COMMON_NAME = 'boundary interception CA';
/** A stored interception CA this close to expiry is replaced at start: leaves must not outlive their CA. */
export const CA_RENEW_BEFORE_MS = 14 * DAY_MS;
export const CA_CERT_FILE = 'ca.pem';
export const CA_KEY_FILE = 'ca.key';

export interface CertificateAuthority extends Issuer {
  readonly certPem: string;
  /** PKCS#8 PEM. Kept out of toJSON(), so logging a CA never prints its key. */
  readonly keyPem: string;
  readonly subject: string;
  /** Epoch milliseconds. */
  readonly notBefore: number;
  readonly notAfter: number;
  toJSON(): { subject: string; notAfter: string; fingerprint256: string };
}

function assembleCa(certPem: string, keyPem: string, certificate: X509Certificate, key: SigningKey) {
  const facts = readCaFacts(certificate.raw);
  const { fingerprint256 } = certificate;
  // Node prints a multi-RDN subject one RDN per line; one line reads better in logs and errors.
  const subject = certificate.subject.split('\n').join(', ');
  const notAfter = new Date(certificate.validTo);
  const ca: CertificateAuthority = {
    certPem,
    keyPem,
    nameDer: facts.subject,
    keyId: facts.subjectKeyId ?? keyIdentifier(certificate.publicKey.export({ type: 'spki', format: 'der' })),
    privateKey: key.privateKey,
    signingAlgorithm: key.signingAlgorithm,
    subject,
    notBefore: new Date(certificate.validFrom).getTime(),
    notAfter: notAfter.getTime(),
    toJSON: () => ({ subject, notAfter: notAfter.toISOString(), fingerprint256 }),
  };
  return Object.freeze(ca);
}

const isNameAttribute = (text: string): boolean => text.length > 0 && text.length <= MAX_COMMON_NAME_CHARS && !/[\u0000-\u001f\u007f]/.test(text);

/** A fresh self-signed ECDSA P-256 CA (basicConstraints CA, pathLen 0; keyCertSign and cRLSign); subject `[O=organization, ]CN=commonName`. */
export async function createCertificateAuthority(options: {
  commonName: string;
  organization?: string;
  now: () => number;
  validityDays?: number;
}): Promise<CertificateAuthority> {
  const { commonName, organization } = options;
  if (!isNameAttribute(commonName) || (organization !== undefined && !isNameAttribute(organization))) {
    throw new BoundaryError('PKI_NAME_INVALID', `CA common name and organization must be 1-${MAX_COMMON_NAME_CHARS} printable characters`);
  }
  const days = options.validityDays ?? CA_VALIDITY_DAYS;
  if (!Number.isInteger(days) || days < 1) throw new BoundaryError('PKI_NAME_INVALID', 'validityDays must be a positive integer');
  const keys = await generateP256();
  const signing = p256Signing(keys.privateKey);
  const t = options.now();
  const spki = Buffer.from(await crypto.subtle.exportKey('spki', keys.publicKey));
  const name = encodeName(commonName, organization);
  const der = signCertificate(
    {
      serialHex: randomSerial(),
      issuer: name,
      subject: name,
      notBefore: new Date(t - CLOCK_SKEW_MS),
      notAfter: new Date(t + days * DAY_MS),
      spki,
      extensions: [
        basicConstraints(true, 0),
        keyUsage(KEY_USAGE.keyCertSign | KEY_USAGE.cRLSign),
        subjectKeyIdentifier(keyIdentifier(spki)),
      ],
    },
    signing,
  );
  const certPem = certificatePem(der);
  return assembleCa(certPem, await exportKeyPem(keys.privateKey), new X509Certificate(der), signing);
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;

/** Loads a CA from PEM text. Garbage, a non-CA certificate or a key that does not match is PKI_INVALID. */
export async function loadCertificateAuthority(options: { certPem: string; keyPem: string }): Promise<CertificateAuthority> {
  const block = PEM_CERTIFICATE.exec(options.certPem)?.[0];
  if (block === undefined) throw new BoundaryError('PKI_INVALID', 'the CA certificate is not a PEM certificate');
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(block);
  } catch (err) {
    throw new BoundaryError('PKI_INVALID', 'the CA certificate could not be parsed', { cause: err });
  }
  if (!certificate.ca) throw new BoundaryError('PKI_INVALID', `${certificate.subject} is not a CA certificate`);
  const usage = readCaFacts(certificate.raw).keyUsage;
  if (usage !== undefined && (usage & KEY_USAGE.keyCertSign) === 0) {
    throw new BoundaryError('PKI_INVALID', `${certificate.subject} may not sign certificates (keyUsage)`);
  }
  const key = await importSigningKey(options.keyPem);
  const certSpki = certificate.publicKey.export({ type: 'spki', format: 'der' });
  if (!certSpki.equals(key.spki)) {
    throw new BoundaryError('PKI_INVALID', `the private key does not belong to ${certificate.subject}`);
  }
  const keyPem = await exportKeyPem(key.privateKey);
  return assembleCa(endLine(block), keyPem, certificate, key);
}

/**
 * The interception CA. With certPath and keyPath, the operator's CA is loaded (and must be valid now).
 * Otherwise `<stateDir>/ca.pem` + `ca.key` are reused, or created on first start (key 0600); a stored
 * CA within CA_RENEW_BEFORE_MS of expiry is replaced. The certificate is always written to outPath
 * (default `<stateDir>/ca.pem`) for the workload's trust store.
 */
export async function loadOrCreateInterceptionCa(options: {
  stateDir: string;
  certPath?: string;
  keyPath?: string;
  outPath?: string;
  now: () => number;
}): Promise<CertificateAuthority> {
  const { stateDir, now } = options;
  const outPath = resolve(options.outPath ?? join(stateDir, CA_CERT_FILE));
  if (options.certPath !== undefined || options.keyPath !== undefined) {
    if (options.certPath === undefined || options.keyPath === undefined) {
      throw new BoundaryError('PKI_INVALID', 'an interception CA needs both a certificate and a key path');
    }
    const ca = await loadCertificateAuthority({
      certPem: await readPemFile(options.certPath),
      keyPem: await readPemFile(options.keyPath),
    });
    if (ca.notAfter <= now() || ca.notBefore > now()) {
      throw new BoundaryError('PKI_INVALID', `interception CA ${ca.subject} is not valid now`);
    }
    if (resolve(options.certPath) !== outPath) await writeTrustBundle(outPath, ca.certPem);
    return ca;
  }
  await ensureDir(stateDir);
  const certPath = join(stateDir, CA_CERT_FILE);
  const keyPath = join(stateDir, CA_KEY_FILE);
  const [hasCert, hasKey] = await Promise.all([pathExists(certPath), pathExists(keyPath)]);
  if (hasCert !== hasKey) {
    // Half a CA is a damaged state directory; replacing it silently would hide tampering.
    throw new BoundaryError('PKI_INVALID', `${stateDir} holds only one of ${CA_CERT_FILE} and ${CA_KEY_FILE}`);
  }
  let ca: CertificateAuthority | undefined;
  if (hasCert) {
    const stored = await loadCertificateAuthority({ certPem: await readPemFile(certPath), keyPem: await readPemFile(keyPath) });
    if (stored.notAfter - now() > CA_RENEW_BEFORE_MS) ca = stored;
  }
  if (ca === undefined) {
    ca = await createCertificateAuthority({
      commonName: INTERCEPTION_CA_COMMON_NAME,
      now,
      validityDays: INTERCEPTION_CA_VALIDITY_DAYS,
    });
    // Key first: a certificate on disk always has its key beside it.
    await writeFileAtomic(keyPath, ca.keyPem, KEY_FILE_MODE);
    await writeFileAtomic(certPath, ca.certPem, CERT_FILE_MODE);
  }
  if (resolve(certPath) !== outPath) await writeTrustBundle(outPath, ca.certPem);
  return ca;
}

async function writeTrustBundle(outPath: string, certPem: string): Promise<void> {
  await ensureDir(dirname(outPath));
  await writeFileAtomic(outPath, certPem, CERT_FILE_MODE);
}
