// makeTestPki(): an in-memory PKI for tests, minted by src/pki itself: a CA, a loopback server
// certificate, a good sandbox client, an expired client and a client from another CA.
import { type CertificateAuthority, createCertificateAuthority } from '../../src/pki/ca.js';
import { DAY_MS } from '../../src/pki/mint.js';
import { issueCertificate } from '../../src/pki/issue.js';

export const TEST_TRUST_DOMAIN = 'boundary.test';
export const TEST_SANDBOX_ID = 'sb-1';
export const TEST_SERVER_NAMES = ['127.0.0.1', 'localhost', '::1'] as const;

export interface Pem {
  readonly certPem: string;
  readonly keyPem: string;
}

export interface TestPki {
  readonly trustDomain: string;
  readonly sandboxId: string;
  readonly ca: CertificateAuthority;
  readonly server: Pem;
  /** spiffe://boundary.test/sandbox/sb-1, valid now. */
  readonly client: Pem;
  /** Same identity, expired ten days before `now`. */
  readonly expiredClient: Pem;
  readonly otherCa: CertificateAuthority;
  /** Same identity, signed by otherCa. */
  readonly otherCaClient: Pem;
}

export async function makeTestPki(options: { now?: () => number; validityDays?: number } = {}): Promise<TestPki> {
  const now = options.now ?? Date.now;
  const validity = options.validityDays === undefined ? {} : { validityDays: options.validityDays };
  const [ca, otherCa] = await Promise.all([
    createCertificateAuthority({ commonName: 'boundary test CA', now, ...validity }),
    createCertificateAuthority({ commonName: 'boundary other test CA', now, ...validity }),
  ]);
  const identity = { kind: 'client', sandboxId: TEST_SANDBOX_ID, trustDomain: TEST_TRUST_DOMAIN } as const;
  const past = now() - 30 * DAY_MS;
  const [server, client, expiredClient, otherCaClient] = await Promise.all([
    issueCertificate({ ca, kind: 'server', names: TEST_SERVER_NAMES, now, ...validity }),
    issueCertificate({ ca, ...identity, now, ...validity }),
    issueCertificate({ ca, ...identity, now: () => past, validityDays: 20 }),
    issueCertificate({ ca: otherCa, ...identity, now, ...validity }),
  ]);
  return { trustDomain: TEST_TRUST_DOMAIN, sandboxId: TEST_SANDBOX_ID, ca, server, client, expiredClient, otherCa, otherCaClient };
}
