// Control-channel certificates: client certificates naming a sandbox or an operator by SPIFFE URI, server
// certificates for the supervisor, and the on-disk layout `boundary pki` manages. Never reads the clock or env.
import { randomBytes, type X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { BoundaryError } from '../shared/errors.js';
import { CA_CERT_FILE, CA_KEY_FILE, type CertificateAuthority, createCertificateAuthority, loadCertificateAuthority } from './ca.js';
import { basicConstraints, extendedKeyUsage, KEY_USAGE, keyUsage, subjectAltName } from './certificate-der.js';
import { CERT_FILE_MODE, ensureDir, KEY_FILE_MODE, pathExists, readPemFile, writeFileAtomic } from './files.js';
import {
  CLOCK_SKEW_MS,
  certificatePem,
  DAY_MS,
  exportKeyPem,
  generateP256,
  MAX_COMMON_NAME_CHARS,
  mintCertificate,
  normaliseCertName,
  subjectName,
} from './mint.js';

export const ISSUED_VALIDITY_DAYS = 365;
export const DEFAULT_TRUST_DOMAIN = 'boundary.internal';
/** Followed by a random id (CONTROL_CA_ID_BYTES, hex), so no two CAs `pki init` makes share a subject. */
const CONTROL_CA_COMMON_NAME = 'boundary control CA';
const CONTROL_CA_ID_BYTES = 6;
const TRUST_DOMAIN_FILE = 'trust-domain';
/** The three files `issueToDir` writes, and nothing else. */
export const ISSUED_FILES = { ca: 'ca.pem', cert: 'cert.pem', key: 'key.pem' } as const;
const MAX_SANDBOX_ID_CHARS = 128;
const MAX_TRUST_DOMAIN_CHARS = 255;
const MAX_SERVER_NAMES = 32;

// SPIFFE: trust domain is lower-case [a-z0-9.-_]; a path segment is [A-Za-z0-9.-_] and never `.` or `..`.
const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
const SANDBOX_ID = /^[A-Za-z0-9._-]+$/;

function isValidTrustDomain(value: string): boolean {
  return value.length > 0 && value.length <= MAX_TRUST_DOMAIN_CHARS && TRUST_DOMAIN.test(value);
}

export function isValidSandboxId(value: string): boolean {
  return value.length <= MAX_SANDBOX_ID_CHARS && SANDBOX_ID.test(value) && value !== '.' && value !== '..';
}

/** Who a client certificate speaks for: a sandbox's boundary (control listener) or an operator (admin listener). */
const SPIFFE_KINDS = ['sandbox', 'operator'] as const;
type SpiffeKind = (typeof SPIFFE_KINDS)[number];

/** `spiffe://<trustDomain>/<kind>/<name>`; a sandbox id and an operator name follow the same grammar. */
function spiffeId(kind: SpiffeKind, trustDomain: string, name: string): string {
  if (!isValidTrustDomain(trustDomain)) throw new BoundaryError('PKI_NAME_INVALID', 'trust domain must be [a-z0-9._-], 1-255 characters');
  if (!isValidSandboxId(name)) {
    throw new BoundaryError('PKI_NAME_INVALID', `${kind === 'sandbox' ? 'sandbox id' : 'operator name'} must be [A-Za-z0-9._-], 1-${MAX_SANDBOX_ID_CHARS} characters`);
  }
  return `spiffe://${trustDomain}/${kind}/${name}`;
}

// The kind is matched literally, so a URI of one kind never parses as the other.
function parseSpiffeId(kind: SpiffeKind, uri: string): { trustDomain: string; name: string } | undefined {
  const match = /^spiffe:\/\/([^/]+)\/([a-z]+)\/([^/]+)$/.exec(uri);
  if (match === null || match[2] !== kind) return undefined;
  const [, trustDomain = '', , name = ''] = match;
  return isValidTrustDomain(trustDomain) && isValidSandboxId(name) ? { trustDomain, name } : undefined;
}

/** `spiffe://<trustDomain>/sandbox/<sandboxId>`, the identity a boundary's client certificate carries. */
export function sandboxSpiffeId(trustDomain: string, sandboxId: string): string {
  return spiffeId('sandbox', trustDomain, sandboxId);
}

/** The inverse of sandboxSpiffeId; undefined for any other URI, operators' included (the control listener refuses those). */
export function parseSandboxSpiffeId(uri: string): { trustDomain: string; sandboxId: string } | undefined {
  const parsed = parseSpiffeId('sandbox', uri);
  return parsed === undefined ? undefined : { trustDomain: parsed.trustDomain, sandboxId: parsed.name };
}

/** `spiffe://<trustDomain>/operator/<name>`, the identity an operator's admin client certificate carries. */
export function operatorSpiffeId(trustDomain: string, operator: string): string {
  return spiffeId('operator', trustDomain, operator);
}

/** The inverse of operatorSpiffeId; undefined for any other URI, sandboxes' included (the admin listener refuses those). */
export function parseOperatorSpiffeId(uri: string): { trustDomain: string; operator: string } | undefined {
  const parsed = parseSpiffeId('operator', uri);
  return parsed === undefined ? undefined : { trustDomain: parsed.trustDomain, operator: parsed.name };
}

/** Every URI SAN of a peer certificate, unquoted (Node quotes a URI holding a comma or a quote). */
export function certificateUris(cert: X509Certificate | undefined): string[] {
  const san = cert?.subjectAltName ?? '';
  return [...san.matchAll(/URI:(?:"((?:[^"\\]|\\.)*)"|([^,\s]+))/g)].map((match) => match[1] ?? match[2] ?? '');
}

interface IssueOptions {
  readonly ca: CertificateAuthority;
  readonly kind: 'client' | 'server';
  /** client: exactly one of sandboxId and operator, with trustDomain. */
  readonly sandboxId?: string;
  readonly operator?: string;
  readonly trustDomain?: string;
  /** server: DNS names and IP literals, at least one. */
  readonly names?: readonly string[];
  readonly now: () => number;
  readonly validityDays?: number;
}

export interface IssuedCertificate {
  readonly certPem: string;
  readonly keyPem: string;
  /** client certificates only. */
  readonly spiffeId?: string;
  /** Epoch milliseconds. */
  readonly notAfter: number;
}

function serverNames(names: readonly string[] | undefined): { type: 'dns' | 'ip'; value: string }[] {
  if (names === undefined || names.length === 0 || names.length > MAX_SERVER_NAMES) {
    throw new BoundaryError('PKI_NAME_INVALID', `a server certificate needs 1-${MAX_SERVER_NAMES} names`);
  }
  return names.map((raw) => {
    const normal = normaliseCertName(raw);
    if (normal === undefined) throw new BoundaryError('PKI_NAME_INVALID', `'${raw}' is not a DNS name or IP address`);
    return { type: normal.type, value: normal.name };
  });
}

/** Mints an ECDSA P-256 client (EKU clientAuth, SPIFFE URI SAN) or server (EKU serverAuth) certificate. */
export async function issueCertificate(options: IssueOptions): Promise<IssuedCertificate> {
  const days = options.validityDays ?? ISSUED_VALIDITY_DAYS;
  if (!Number.isInteger(days) || days < 1) throw new BoundaryError('PKI_NAME_INVALID', 'validityDays must be a positive integer');
  let san: { type: 'dns' | 'ip' | 'url'; value: string }[];
  let commonName: string;
  let spiffeId: string | undefined;
  if (options.kind === 'client') {
    const { sandboxId, operator, trustDomain } = options;
    if ((sandboxId === undefined) === (operator === undefined) || trustDomain === undefined) {
      throw new BoundaryError('PKI_NAME_INVALID', 'a client certificate needs trustDomain and exactly one of sandboxId and operator');
    }
    spiffeId = sandboxId === undefined ? operatorSpiffeId(trustDomain, operator ?? '') : sandboxSpiffeId(trustDomain, sandboxId);
    san = [{ type: 'url', value: spiffeId }];
    commonName = sandboxId ?? operator ?? '';
  } else {
    san = serverNames(options.names);
    commonName = san[0]?.value ?? '';
  }
  const t = options.now();
  const notAfter = Math.min(t + days * DAY_MS, options.ca.notAfter);
  const keys = await generateP256();
  const subject = subjectName(commonName);
  const certificate = await mintCertificate({
    issuer: options.ca,
    publicKey: keys.publicKey,
    subject,
    notBefore: new Date(t - CLOCK_SKEW_MS),
    notAfter: new Date(notAfter),
    extensions: [
      basicConstraints(false),
      keyUsage(KEY_USAGE.digitalSignature),
      extendedKeyUsage(options.kind === 'client' ? 'clientAuth' : 'serverAuth'),
      subjectAltName(san, subject.empty),
    ],
  });
  const issued = { certPem: certificatePem(certificate), keyPem: await exportKeyPem(keys.privateKey), notAfter };
  return spiffeId === undefined ? issued : { ...issued, spiffeId };
}

/**
 * `O=<trust domain>, CN=boundary control CA <random id>`: two CAs (two clusters, a CA recreated) never look alike in
 * a log or a verify error. A trust domain longer than an O may be (64 characters) is left out; the id still differs.
 */
function controlCaName(trustDomain: string): { commonName: string; organization?: string } {
  const commonName = `${CONTROL_CA_COMMON_NAME} ${randomBytes(CONTROL_CA_ID_BYTES).toString('hex')}`;
  return trustDomain.length <= MAX_COMMON_NAME_CHARS ? { commonName, organization: trustDomain } : { commonName };
}

/** Creates DIR/ca.pem, DIR/ca.key (0600) and DIR/trust-domain. An existing CA is never overwritten. */
export async function initPki(options: { dir: string; trustDomain?: string; now: () => number; validityDays?: number }) {
  const dir = resolve(options.dir);
  const trustDomain = options.trustDomain ?? DEFAULT_TRUST_DOMAIN;
  if (!isValidTrustDomain(trustDomain)) throw new BoundaryError('PKI_NAME_INVALID', 'trust domain must be [a-z0-9._-], 1-255 characters');
  const caPath = join(dir, CA_CERT_FILE);
  const keyPath = join(dir, CA_KEY_FILE);
  if ((await pathExists(caPath)) || (await pathExists(keyPath))) {
    throw new BoundaryError('PKI_EXISTS', `${dir} already holds a CA; remove it first to start over`);
  }
  await ensureDir(dir);
  const ca = await createCertificateAuthority({
    ...controlCaName(trustDomain),
    now: options.now,
    ...(options.validityDays === undefined ? {} : { validityDays: options.validityDays }),
  });
  const trustDomainPath = join(dir, TRUST_DOMAIN_FILE);
  await writeFileAtomic(keyPath, ca.keyPem, KEY_FILE_MODE);
  await writeFileAtomic(caPath, ca.certPem, CERT_FILE_MODE);
  await writeFileAtomic(trustDomainPath, `${trustDomain}\n`, CERT_FILE_MODE);
  return { caPath, keyPath, trustDomainPath, trustDomain, ca };
}

/** Loads the CA and trust domain that initPki wrote. */
export async function loadPkiDir(dir: string): Promise<{ ca: CertificateAuthority; trustDomain: string }> {
  const ca = await loadCertificateAuthority({
    certPem: await readPemFile(join(dir, CA_CERT_FILE)),
    keyPem: await readPemFile(join(dir, CA_KEY_FILE)),
  });
  let trustDomain = DEFAULT_TRUST_DOMAIN;
  try {
    trustDomain = (await readFile(join(dir, TRUST_DOMAIN_FILE), 'utf8')).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (!isValidTrustDomain(trustDomain)) throw new BoundaryError('PKI_INVALID', `${join(dir, TRUST_DOMAIN_FILE)} is not a valid trust domain`);
  return { ca, trustDomain };
}

/**
 * Issues a sandbox client (sandboxId), operator client (operator) or server (names) certificate from the CA
 * in `dir` and writes exactly OUT/ca.pem, OUT/cert.pem and OUT/key.pem (0600).
 */
export async function issueToDir(options: {
  dir: string;
  out: string;
  sandboxId?: string;
  operator?: string;
  names?: readonly string[];
  now: () => number;
  validityDays?: number;
}) {
  const kinds = [options.sandboxId, options.operator, options.names].filter((v) => v !== undefined).length;
  if (kinds !== 1) {
    throw new BoundaryError('USAGE', 'issue exactly one of a sandbox certificate (sandboxId), an operator certificate (operator) or a server certificate (names)');
  }
  const { ca, trustDomain } = await loadPkiDir(resolve(options.dir));
  const common = {
    ca,
    now: options.now,
    ...(options.validityDays === undefined ? {} : { validityDays: options.validityDays }),
  };
  const issued =
    options.names === undefined
      ? await issueCertificate({
          ...common,
          kind: 'client',
          trustDomain,
          ...(options.sandboxId === undefined ? {} : { sandboxId: options.sandboxId }),
          ...(options.operator === undefined ? {} : { operator: options.operator }),
        })
      : await issueCertificate({ ...common, kind: 'server', names: options.names });
  const out = resolve(options.out);
  await ensureDir(out);
  const files = {
    ca: join(out, ISSUED_FILES.ca),
    cert: join(out, ISSUED_FILES.cert),
    key: join(out, ISSUED_FILES.key),
  };
  await writeFileAtomic(files.key, issued.keyPem, KEY_FILE_MODE);
  await writeFileAtomic(files.cert, issued.certPem, CERT_FILE_MODE);
  await writeFileAtomic(files.ca, ca.certPem, CERT_FILE_MODE);
  return { files, trustDomain, notAfter: issued.notAfter, ...(issued.spiffeId === undefined ? {} : { spiffeId: issued.spiffeId }) };
}
