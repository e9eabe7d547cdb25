// A --tls-dir's identity (ca.pem, cert.pem, key.pem): reads the three files and checks that they belong together
// (key matches, chain ends at ca.pem), then as a boundary's client (the SPIFFE URI names our sandbox) or as the
// supervisor's server certificate. Never reads the clock: whether a certificate is valid now is the caller's question.
import { createHash, createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { BoundaryError, type Issue } from '../shared/errors.js';
import { readPemFile } from './files.js';
import { certificateUris, ISSUED_FILES, parseSandboxSpiffeId } from './issue.js';
import { certificateBlocks } from './trust-bundle.js';

/** Intermediates allowed between the client certificate and a ca.pem anchor (cert-manager writes at most one). */
const MAX_CLIENT_CHAIN_DEPTH = 4;
/** id-kp-clientAuth: a certificate that restricts its use must allow TLS client authentication. */
const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';
/** id-kp-serverAuth: the supervisor's serving certificate must allow TLS server authentication. */
const SERVER_AUTH_OID = '1.3.6.1.5.5.7.3.1';

export interface ControlIdentityPems {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

export interface ControlIdentity extends ControlIdentityPems {
  readonly spiffeId: string;
  /** Epoch milliseconds. */
  readonly notBefore: number;
  readonly notAfter: number;
  readonly fingerprint256: string;
  /** hashControlIdentityPems of the three files. */
  readonly hash: string;
  /** Leaves the key out, so logging an identity never prints it. */
  toJSON(): { spiffeId: string; notAfter: string; fingerprint256: string };
}

/** Reads DIR/ca.pem, DIR/cert.pem and DIR/key.pem; PKI_INVALID naming a file that cannot be read. */
export async function readControlIdentityPems(dir: string): Promise<ControlIdentityPems> {
  const [caPem, certPem, keyPem] = await Promise.all([
    readPemFile(join(dir, ISSUED_FILES.ca)),
    readPemFile(join(dir, ISSUED_FILES.cert)),
    readPemFile(join(dir, ISSUED_FILES.key)),
  ]);
  return { caPem, certPem, keyPem };
}

/** What a re-read of a followed --tls-dir found, compared with the material in use. */
type IdentityUpdate =
  | { readonly kind: 'unreadable'; readonly error: unknown; readonly hash: string }
  | { readonly kind: 'unchanged' }
  | { readonly kind: 'changed'; readonly pems: ControlIdentityPems; readonly hash: string };

/**
 * Re-reads DIR for a follower (control/tls-source.ts, supervisor/serving-tls.ts). Never throws: an unreadable
 * folder is a value whose `hash` names the failure, so the caller reports each distinct failure once.
 */
export async function readIdentityUpdate(dir: string, inUseHash: string | undefined): Promise<IdentityUpdate> {
  let pems: ControlIdentityPems;
  try {
    pems = await readControlIdentityPems(dir);
  } catch (error) {
    return { kind: 'unreadable', error, hash: `unreadable: ${error instanceof Error ? error.message : String(error)}` };
  }
  const hash = hashControlIdentityPems(pems);
  return hash === inUseHash ? { kind: 'unchanged' } : { kind: 'changed', pems, hash };
}

/** sha256 over the three texts: equal hashes mean nothing changed, whether or not the material is valid. */
function hashControlIdentityPems(pems: ControlIdentityPems): string {
  return createHash('sha256').update(pems.caPem).update('\0').update(pems.certPem).update('\0').update(pems.keyPem).digest('hex');
}

function parseCertificates(pem: string, file: string, issues: Issue[]): X509Certificate[] {
  const blocks = certificateBlocks(pem);
  if (blocks.length === 0) issues.push({ code: 'PKI_INVALID', path: file, message: 'holds no PEM certificate' });
  const out: X509Certificate[] = [];
  for (const [i, block] of blocks.entries()) {
    try {
      out.push(new X509Certificate(block));
    } catch {
      issues.push({ code: 'PKI_INVALID', path: `${file}[${i}]`, message: 'is not a readable X.509 certificate' });
    }
  }
  return out;
}

function issuedBy(child: X509Certificate, parent: X509Certificate): boolean {
  return parent.ca && child.checkIssued(parent) && child.verify(parent.publicKey);
}

/** Walks from the leaf through cert.pem's intermediates to an anchor in ca.pem. */
function chainsToAnchor(leaf: X509Certificate, intermediates: readonly X509Certificate[], anchors: readonly X509Certificate[]): boolean {
  let current = leaf;
  for (let depth = 0; depth <= MAX_CLIENT_CHAIN_DEPTH; depth++) {
    if (anchors.some((anchor) => issuedBy(current, anchor))) return true;
    const next = intermediates.find((candidate) => candidate !== current && issuedBy(current, candidate));
    if (next === undefined) return false;
    current = next;
  }
  return false;
}

/** The leaf of cert.pem after the checks every identity needs: key matches it, chain ends at ca.pem. */
function checkKeyAndChain(pems: ControlIdentityPems, issues: Issue[]): X509Certificate | undefined {
  const anchors = parseCertificates(pems.caPem, ISSUED_FILES.ca, issues);
  const [leaf, ...intermediates] = parseCertificates(pems.certPem, ISSUED_FILES.cert, issues);
  let key: KeyObject | undefined;
  try {
    key = createPrivateKey(pems.keyPem);
  } catch {
    issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.key, message: 'is not a readable PEM private key' });
  }
  if (leaf === undefined) return undefined;
  if (key !== undefined && !leaf.checkPrivateKey(key)) {
    issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.key, message: `does not match the public key of ${ISSUED_FILES.cert}` });
  }
  if (anchors.length > 0 && !chainsToAnchor(leaf, intermediates, anchors)) {
    issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.cert, message: `is not issued by a CA in ${ISSUED_FILES.ca}` });
  }
  return leaf;
}

function checkExtendedKeyUsage(leaf: X509Certificate, oid: string, use: string, issues: Issue[]): void {
  // Node names the extended key usages `keyUsage`; undefined means the certificate does not restrict them.
  if (leaf.keyUsage !== undefined && !leaf.keyUsage.includes(oid)) {
    issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.cert, message: `its extended key usage does not allow ${use}` });
  }
}

function throwIfInvalid(what: string, leaf: X509Certificate | undefined, issues: readonly Issue[]): asserts leaf is X509Certificate {
  if (leaf === undefined || issues.length > 0) {
    throw new BoundaryError('PKI_INVALID', `${what} is not usable: ${issues.map((i) => `${i.path} ${i.message}`).join('; ')}`, { issues });
  }
}

/** True while `at` (epoch ms) lies inside the identity's validity window. */
export function isWithinValidity(identity: { readonly notBefore: number; readonly notAfter: number }, at: number): boolean {
  return at >= identity.notBefore && at < identity.notAfter;
}

/**
 * Checks that the PEMs form one usable client identity for `sandboxId`, and returns it with its validity
 * window. PKI_INVALID listing every problem (paths are the file names) otherwise. Expiry is not checked here.
 */
export function checkControlIdentity(pems: ControlIdentityPems, expect: { readonly sandboxId: string }): ControlIdentity {
  const issues: Issue[] = [];
  const leaf = checkKeyAndChain(pems, issues);
  let spiffeId = '';
  if (leaf !== undefined) {
    const ours = certificateUris(leaf).find((uri) => parseSandboxSpiffeId(uri)?.sandboxId === expect.sandboxId);
    if (ours === undefined) {
      issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.cert, message: `names no spiffe://<trust-domain>/sandbox/${expect.sandboxId} URI` });
    } else {
      spiffeId = ours;
    }
    checkExtendedKeyUsage(leaf, CLIENT_AUTH_OID, 'TLS client authentication', issues);
  }
  throwIfInvalid('control TLS material', leaf, issues);
  const hash = hashControlIdentityPems(pems);
  const notAfter = Date.parse(leaf.validTo);
  const { fingerprint256 } = leaf;
  return Object.freeze({
    ...pems,
    spiffeId,
    notBefore: Date.parse(leaf.validFrom),
    notAfter,
    fingerprint256,
    hash,
    toJSON: () => ({ spiffeId, notAfter: new Date(notAfter).toISOString(), fingerprint256 }),
  });
}

/** The supervisor's serving identity in its --tls-dir: what the listeners present, and the CA they trust. */
export interface ServingIdentity extends ControlIdentityPems {
  readonly subject: string;
  readonly serialNumber: string;
  /** Epoch milliseconds. */
  readonly notBefore: number;
  readonly notAfter: number;
  readonly fingerprint256: string;
  /** hashControlIdentityPems of the three files. */
  readonly hash: string;
  /** Leaves the key out, so logging an identity never prints it. */
  toJSON(): { subject: string; serialNumber: string; notAfter: string; fingerprint256: string };
}

/**
 * Checks that the PEMs form one usable server identity: key matches cert.pem, cert.pem chains to ca.pem and may
 * authenticate a TLS server. PKI_INVALID listing every problem otherwise. Expiry is not checked here.
 */
export function checkServingIdentity(pems: ControlIdentityPems): ServingIdentity {
  const issues: Issue[] = [];
  const leaf = checkKeyAndChain(pems, issues);
  if (leaf !== undefined) {
    if (leaf.ca) issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.cert, message: 'is a CA certificate, not a server certificate' });
    checkExtendedKeyUsage(leaf, SERVER_AUTH_OID, 'TLS server authentication', issues);
  }
  throwIfInvalid('supervisor TLS material', leaf, issues);
  const { subject, serialNumber, fingerprint256 } = leaf;
  const notAfter = Date.parse(leaf.validTo);
  return Object.freeze({
    ...pems,
    subject,
    serialNumber,
    notBefore: Date.parse(leaf.validFrom),
    notAfter,
    fingerprint256,
    hash: hashControlIdentityPems(pems),
    toJSON: () => ({ subject, serialNumber, notAfter: new Date(notAfter).toISOString(), fingerprint256 }),
  });
}
