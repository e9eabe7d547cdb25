// The control channel's client identity in a --tls-dir (ca.pem, cert.pem, key.pem): reads the three files and
// checks that they belong together (key matches, chain ends at ca.pem, the SPIFFE URI names our sandbox).
// Never reads the clock: whether a certificate is still valid is the caller's question (control/tls-source.ts).
import { createHash, createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { BoundaryError, type Issue } from '../errors.js';
import { readPemFile } from './files.js';
import { certificateUris, ISSUED_FILES, parseSandboxSpiffeId } from './issue.js';
import { certificateBlocks } from './trust-bundle.js';

/** Intermediates allowed between the client certificate and a ca.pem anchor (cert-manager writes at most one). */
export const MAX_CLIENT_CHAIN_DEPTH = 4;
/** id-kp-clientAuth: a certificate that restricts its use must allow TLS client authentication. */
const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';

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

/** sha256 over the three texts: equal hashes mean nothing changed, whether or not the material is valid. */
export function hashControlIdentityPems(pems: ControlIdentityPems): string {
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

/**
 * Checks that the PEMs form one usable client identity for `sandboxId`, and returns it with its validity
 * window. PKI_INVALID listing every problem (paths are the file names) otherwise. Expiry is not checked here.
 */
export function checkControlIdentity(pems: ControlIdentityPems, expect: { readonly sandboxId: string }): ControlIdentity {
  const issues: Issue[] = [];
  const anchors = parseCertificates(pems.caPem, ISSUED_FILES.ca, issues);
  const [leaf, ...intermediates] = parseCertificates(pems.certPem, ISSUED_FILES.cert, issues);
  let key: KeyObject | undefined;
  try {
    key = createPrivateKey(pems.keyPem);
  } catch {
    issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.key, message: 'is not a readable PEM private key' });
  }
  let spiffeId = '';
  if (leaf !== undefined) {
    if (key !== undefined && !leaf.checkPrivateKey(key)) {
      issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.key, message: `does not match the public key of ${ISSUED_FILES.cert}` });
    }
    if (anchors.length > 0 && !chainsToAnchor(leaf, intermediates, anchors)) {
      issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.cert, message: `is not issued by a CA in ${ISSUED_FILES.ca}` });
    }
    const ours = certificateUris(leaf).find((uri) => parseSandboxSpiffeId(uri)?.sandboxId === expect.sandboxId);
    if (ours === undefined) {
      issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.cert, message: `names no spiffe://<trust-domain>/sandbox/${expect.sandboxId} URI` });
    } else {
      spiffeId = ours;
    }
    // Node names the extended key usages `keyUsage`; undefined means the certificate does not restrict them.
    if (leaf.keyUsage !== undefined && !leaf.keyUsage.includes(CLIENT_AUTH_OID)) {
      issues.push({ code: 'PKI_INVALID', path: ISSUED_FILES.cert, message: 'its extended key usage does not allow TLS client authentication' });
    }
  }
  if (leaf === undefined || issues.length > 0) {
    throw new BoundaryError('PKI_INVALID', `control TLS material is not usable: ${issues.map((i) => `${i.path} ${i.message}`).join('; ')}`, { issues });
  }
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
