// Per-host leaf certificates for TLS interception, signed by the interception CA, with a bounded LRU
// cache of ready SecureContexts. The SAN is the CONNECT host given by the caller, never the SNI.
import type { SecureContext } from 'node:tls';
import { createSecureContext } from '../shared/node-tls.js';
import { BoundaryError } from '../shared/errors.js';
import type { CertificateAuthority } from './ca.js';
import { basicConstraints, extendedKeyUsage, KEY_USAGE, keyUsage, subjectAltName } from './certificate-der.js';
import { CLOCK_SKEW_MS, certificatePem, DAY_MS, exportKeyPem, generateP256, mintCertificate, normaliseCertName, subjectName } from './mint.js';

/** docs/destinations.md#limits: 256 leaves, after which the least recently used one is dropped. */
export const MAX_LEAF_CACHE_ENTRIES = 256;
export const LEAF_VALIDITY_MS = 7 * DAY_MS;

export interface LeafCache {
  /** A SecureContext whose certificate names `host` (DNS name or IP literal); minted once per host. */
  secureContextFor(host: string): Promise<SecureContext>;
  /** Entries held, including mints still in flight. */
  size(): number;
}

interface Entry {
  readonly context: Promise<SecureContext>;
  /** Half-way through the leaf's life it is re-minted, so no client ever sees one about to expire. */
  readonly renewAt: number;
}

export function createLeafCache(options: { ca: CertificateAuthority; now: () => number; maxEntries?: number }): LeafCache {
  const { ca, now } = options;
  const maxEntries = options.maxEntries ?? MAX_LEAF_CACHE_ENTRIES;
  if (!Number.isInteger(maxEntries) || maxEntries < 1) {
    throw new BoundaryError('CONFIG_INVALID', 'leaf cache maxEntries must be a positive integer');
  }
  // Map iteration order is insertion order: re-inserting on every hit makes the first key the LRU one.
  const entries = new Map<string, Entry>();

  async function mintLeaf(name: string, type: 'dns' | 'ip', issuedAt: number, notAfter: number): Promise<SecureContext> {
    const keys = await generateP256();
    const subject = subjectName(name);
    const certificate = await mintCertificate({
      issuer: ca,
      publicKey: keys.publicKey,
      subject,
      notBefore: new Date(issuedAt - CLOCK_SKEW_MS),
      notAfter: new Date(notAfter),
      extensions: [
        basicConstraints(false),
        keyUsage(KEY_USAGE.digitalSignature),
        extendedKeyUsage('serverAuth'),
        // RFC 5280: with an empty subject the SAN must be critical.
        subjectAltName([{ type, value: name }], subject.empty),
      ],
    });
    return createSecureContext({ cert: certificatePem(certificate), key: await exportKeyPem(keys.privateKey) });
  }

  return {
    secureContextFor(host: string): Promise<SecureContext> {
      const normal = normaliseCertName(host);
      if (normal === undefined) {
        return Promise.reject(new BoundaryError('ADDRESS_INVALID', 'host cannot be named in a leaf certificate'));
      }
      const key = `${normal.type}:${normal.name}`;
      const t = now();
      const cached = entries.get(key);
      if (cached !== undefined && t < cached.renewAt) {
        entries.delete(key);
        entries.set(key, cached);
        return cached.context;
      }
      entries.delete(key);
      while (entries.size >= maxEntries) {
        const oldest = entries.keys().next();
        if (oldest.done === true) break;
        entries.delete(oldest.value);
      }
      const notAfter = Math.min(t + LEAF_VALIDITY_MS, ca.notAfter);
      const context = mintLeaf(normal.name, normal.type, t, notAfter);
      const entry: Entry = { context, renewAt: t + Math.floor((notAfter - t) / 2) };
      entries.set(key, entry);
      // A failed mint is not cached: the next caller tries again.
      context.catch(() => {
        if (entries.get(key) === entry) entries.delete(key);
      });
      return context;
    },
    size: () => entries.size,
  };
}
