import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import {
  CA_RENEW_BEFORE_MS,
  createCertificateAuthority,
  INTERCEPTION_CA_VALIDITY_DAYS,
  loadCertificateAuthority,
  loadOrCreateInterceptionCa,
} from '../../src/pki/ca.js';
import {
  initPki,
  issueCertificate,
  issueToDir,
  loadPkiDir,
  operatorSpiffeId,
  parseOperatorSpiffeId,
  parseSandboxSpiffeId,
  sandboxSpiffeId,
} from '../../src/pki/issue.js';
import { createLeafCache, LEAF_VALIDITY_MS, MAX_LEAF_CACHE_ENTRIES } from '../../src/pki/leaf.js';
import { DAY_MS } from '../../src/pki/mint.js';
import { makeTestPki, TEST_SANDBOX_ID, TEST_TRUST_DOMAIN } from '../harness/certs.js';
import { testClock } from '../harness/clock.js';
import { cpuMs } from '../harness/cpu-growth.js';

const FIXTURES = new URL('../../fixtures/certs/', import.meta.url);
const LEAF_MINT_SAMPLES = 60;
const RSA_BASELINE_SAMPLES = 7;
/**
 * A P-256 leaf (key, certificate, secure context) costs under a tenth of one RSA-2048 key generation (measured 1/30
 * to 1/80): a leaf minted with an RSA key, or ten times the work per leaf, fails.
 */
const MIN_RSA_TO_MINT_RATIO = 10;

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-pki-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function modeOf(path: string): Promise<number> {
  return (await stat(path)).mode & 0o777;
}

function opensslText(pem: string): string {
  return execFileSync('openssl', ['x509', '-noout', '-text'], { input: pem, encoding: 'utf8' });
}

describe('certificate authority', () => {
  it('creates an ECDSA P-256 CA with CA basic constraints, keyCertSign and a subject key id', async () => {
    const clock = testClock();
    const ca = await createCertificateAuthority({ commonName: 'unit CA', now: clock.now, validityDays: 10 });
    const cert = new X509Certificate(ca.certPem);
    assert.equal(cert.ca, true);
    assert.equal(cert.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
    assert.equal(ca.notAfter, clock.now() + 10 * DAY_MS);
    const text = opensslText(ca.certPem);
    assert.match(text, /CA:TRUE, pathlen:0/);
    assert.match(text, /Certificate Sign, CRL Sign/);
    assert.match(text, /Subject Key Identifier/);
    assert.equal(JSON.stringify(ca).includes('PRIVATE KEY'), false);
  });

  it('loads a CA from its PEMs and refuses garbage, a non-CA certificate and a key that does not match', async () => {
    const pki = await makeTestPki();
    const loaded = await loadCertificateAuthority({ certPem: pki.ca.certPem, keyPem: pki.ca.keyPem });
    assert.equal(loaded.subject, pki.ca.subject);
    await assert.rejects(loadCertificateAuthority({ certPem: 'garbage', keyPem: pki.ca.keyPem }), { code: 'PKI_INVALID' });
    await assert.rejects(loadCertificateAuthority({ certPem: pki.ca.certPem, keyPem: 'garbage' }), { code: 'PKI_INVALID' });
    await assert.rejects(loadCertificateAuthority({ certPem: pki.ca.certPem, keyPem: pki.otherCa.keyPem }), { code: 'PKI_INVALID' });
    await assert.rejects(loadCertificateAuthority({ certPem: pki.server.certPem, keyPem: pki.server.keyPem }), { code: 'PKI_INVALID' });
  });

  it('loads a CA whose key is a SEC1 EC key written by openssl', async (t) => {
    const dir = await tempDir(t);
    const key = join(dir, 'k.pem');
    const cert = join(dir, 'c.pem');
    execFileSync('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
    execFileSync('openssl', ['req', '-x509', '-new', '-key', key, '-subj', '/CN=ops CA', '-days', '2', '-out', cert,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign']);
    const ca = await loadCertificateAuthority({ certPem: await readFile(cert, 'utf8'), keyPem: await readFile(key, 'utf8') });
    const issued = await issueCertificate({ ca, kind: 'server', names: ['localhost'], now: Date.now });
    assert.equal(new X509Certificate(issued.certPem).checkIssued(new X509Certificate(ca.certPem)), true);
  });

  it('creates the interception CA on first start with a 0600 key and reuses it afterwards', async (t) => {
    const dir = await tempDir(t);
    const stateDir = join(dir, 'state');
    const clock = testClock();
    const first = await loadOrCreateInterceptionCa({ stateDir, now: clock.now });
    assert.equal(await modeOf(join(stateDir, 'ca.key')), 0o600);
    assert.equal(await readFile(join(stateDir, 'ca.pem'), 'utf8'), first.certPem);
    assert.equal(first.notAfter, clock.now() + INTERCEPTION_CA_VALIDITY_DAYS * DAY_MS);
    const out = join(dir, 'trust', 'ca.pem');
    const second = await loadOrCreateInterceptionCa({ stateDir, outPath: out, now: clock.now });
    assert.equal(second.certPem, first.certPem);
    assert.equal(await readFile(out, 'utf8'), first.certPem);
  });

  it('replaces a stored interception CA that is about to expire', async (t) => {
    const stateDir = await tempDir(t);
    const clock = testClock();
    const first = await loadOrCreateInterceptionCa({ stateDir, now: clock.now });
    clock.set(first.notAfter - CA_RENEW_BEFORE_MS + 1);
    const renewed = await loadOrCreateInterceptionCa({ stateDir, now: clock.now });
    assert.notEqual(renewed.certPem, first.certPem);
    assert.equal(await readFile(join(stateDir, 'ca.pem'), 'utf8'), renewed.certPem);
  });

  it('refuses a state directory that holds only half a CA', async (t) => {
    const stateDir = await tempDir(t);
    await writeFile(join(stateDir, 'ca.pem'), 'x');
    await assert.rejects(loadOrCreateInterceptionCa({ stateDir, now: Date.now }), { code: 'PKI_INVALID' });
  });

  it("loads the operator's CA from certPath and keyPath and writes its certificate to outPath", async (t) => {
    const dir = await tempDir(t);
    const pki = await makeTestPki();
    await writeFile(join(dir, 'op.pem'), pki.ca.certPem);
    await writeFile(join(dir, 'op.key'), pki.ca.keyPem);
    const ca = await loadOrCreateInterceptionCa({
      stateDir: join(dir, 'state'),
      certPath: join(dir, 'op.pem'),
      keyPath: join(dir, 'op.key'),
      now: Date.now,
    });
    assert.equal(ca.subject, pki.ca.subject);
    assert.equal(await readFile(join(dir, 'state', 'ca.pem'), 'utf8'), ca.certPem);
    await assert.rejects(
      loadOrCreateInterceptionCa({ stateDir: dir, certPath: join(dir, 'op.pem'), now: Date.now }),
      { code: 'PKI_INVALID' },
    );
  });
});

describe('issued certificates', () => {
  it('issues a client certificate whose URI SAN names the sandbox, with EKU clientAuth', async () => {
    const pki = await makeTestPki();
    const cert = new X509Certificate(pki.client.certPem);
    assert.equal(cert.subjectAltName, `URI:spiffe://${TEST_TRUST_DOMAIN}/sandbox/${TEST_SANDBOX_ID}`);
    assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.2']);
    assert.equal(cert.checkIssued(new X509Certificate(pki.ca.certPem)), true);
    assert.equal(cert.verify(new X509Certificate(pki.ca.certPem).publicKey), true);
    const text = opensslText(pki.client.certPem);
    assert.match(text, /URI:spiffe:\/\/boundary\.test\/sandbox\/sb-1/);
    assert.match(text, /TLS Web Client Authentication/);
    assert.match(text, /ASN1 OID: prime256v1/);
  });

  it('issues a server certificate for DNS names and IP addresses with EKU serverAuth', async () => {
    const pki = await makeTestPki();
    const cert = new X509Certificate(pki.server.certPem);
    assert.equal(cert.subjectAltName, 'IP Address:127.0.0.1, DNS:localhost, IP Address:0:0:0:0:0:0:0:1');
    assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.1']);
    assert.equal(cert.checkHost('localhost'), 'localhost');
    assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
  });

  it('issues the expired client with a notAfter in the past', async () => {
    const pki = await makeTestPki();
    assert.ok(new Date(new X509Certificate(pki.expiredClient.certPem).validTo).getTime() < Date.now());
  });

  it('never issues past the CA expiry, and gives every certificate its own serial', async () => {
    const clock = testClock();
    const ca = await createCertificateAuthority({ commonName: 'short CA', now: clock.now, validityDays: 2 });
    const a = await issueCertificate({ ca, kind: 'server', names: ['a.test'], now: clock.now, validityDays: 30 });
    const b = await issueCertificate({ ca, kind: 'server', names: ['a.test'], now: clock.now });
    assert.equal(a.notAfter, ca.notAfter);
    assert.notEqual(new X509Certificate(a.certPem).serialNumber, new X509Certificate(b.certPem).serialNumber);
  });

  it('refuses names that cannot be certified', async () => {
    const { ca } = await makeTestPki();
    const now = Date.now;
    const bad = [
      issueCertificate({ ca, kind: 'client', sandboxId: '../x', trustDomain: 'd', now }),
      issueCertificate({ ca, kind: 'client', sandboxId: 'sb', trustDomain: 'Upper.Case', now }),
      issueCertificate({ ca, kind: 'client', sandboxId: 'sb', now }),
      issueCertificate({ ca, kind: 'server', names: [], now }),
      issueCertificate({ ca, kind: 'server', names: ['*.wild.test'], now }),
      issueCertificate({ ca, kind: 'server', names: ['a b'], now }),
    ];
    for (const attempt of bad) await assert.rejects(attempt, { code: 'PKI_NAME_INVALID' });
  });

  it('round-trips a sandbox SPIFFE id and rejects other URIs', () => {
    const uri = sandboxSpiffeId('boundary.test', 'sb-1');
    assert.deepEqual(parseSandboxSpiffeId(uri), { trustDomain: 'boundary.test', sandboxId: 'sb-1' });
    assert.equal(parseSandboxSpiffeId('spiffe://boundary.test/sandbox/sb-1/extra'), undefined);
    assert.equal(parseSandboxSpiffeId('spiffe://boundary.test/sandbox/..'), undefined);
    assert.equal(parseSandboxSpiffeId('https://boundary.test/sandbox/sb-1'), undefined);
  });

  it('round-trips an operator SPIFFE id, and never reads one kind as the other', () => {
    const uri = operatorSpiffeId('boundary.test', 'alice');
    assert.equal(uri, 'spiffe://boundary.test/operator/alice');
    assert.deepEqual(parseOperatorSpiffeId(uri), { trustDomain: 'boundary.test', operator: 'alice' });
    assert.equal(parseSandboxSpiffeId(uri), undefined);
    assert.equal(parseOperatorSpiffeId(sandboxSpiffeId('boundary.test', 'alice')), undefined);
    assert.equal(parseOperatorSpiffeId('spiffe://boundary.test/operator/..'), undefined);
    assert.throws(() => operatorSpiffeId('boundary.test', 'a/b'), { code: 'PKI_NAME_INVALID' });
  });

  it('issues an operator client certificate and refuses one that names both a sandbox and an operator', async () => {
    const pki = await makeTestPki();
    const now = Date.now;
    const issued = await issueCertificate({ ca: pki.ca, kind: 'client', operator: 'alice', trustDomain: TEST_TRUST_DOMAIN, now });
    assert.equal(issued.spiffeId, `spiffe://${TEST_TRUST_DOMAIN}/operator/alice`);
    const cert = new X509Certificate(issued.certPem);
    assert.equal(cert.subjectAltName, `URI:spiffe://${TEST_TRUST_DOMAIN}/operator/alice`);
    assert.ok(cert.checkIssued(new X509Certificate(pki.ca.certPem)));
    const both = issueCertificate({ ca: pki.ca, kind: 'client', operator: 'alice', sandboxId: 'sb-1', trustDomain: TEST_TRUST_DOMAIN, now });
    await assert.rejects(both, { code: 'PKI_NAME_INVALID' });
  });
});

describe('pki directories', () => {
  it('writes the CA, a 0600 key and the trust domain, and never overwrites an existing CA', async (t) => {
    const dir = join(await tempDir(t), 'pki');
    const result = await initPki({ dir, trustDomain: 'corp.test', now: Date.now });
    assert.deepEqual((await readdir(dir)).sort(), ['ca.key', 'ca.pem', 'trust-domain']);
    assert.equal(await modeOf(result.keyPath), 0o600);
    assert.equal((await loadPkiDir(dir)).trustDomain, 'corp.test');
    await assert.rejects(initPki({ dir, now: Date.now }), { code: 'PKI_EXISTS' });
  });

  it('issues into a directory exactly ca.pem, cert.pem and key.pem with the key at 0600', async (t) => {
    const root = await tempDir(t);
    await initPki({ dir: join(root, 'pki'), trustDomain: 'corp.test', now: Date.now });
    const result = await issueToDir({ dir: join(root, 'pki'), out: join(root, 'sb'), sandboxId: 'sb-9', now: Date.now });
    assert.deepEqual((await readdir(join(root, 'sb'))).sort(), ['ca.pem', 'cert.pem', 'key.pem']);
    assert.equal(await modeOf(result.files.key), 0o600);
    assert.equal(result.spiffeId, 'spiffe://corp.test/sandbox/sb-9');
    const server = await issueToDir({ dir: join(root, 'pki'), out: join(root, 'sup'), names: ['sup.corp.test'], now: Date.now });
    assert.equal(new X509Certificate(await readFile(server.files.cert, 'utf8')).subjectAltName, 'DNS:sup.corp.test');
    await assert.rejects(issueToDir({ dir: join(root, 'pki'), out: root, now: Date.now }), { code: 'USAGE' });
  });
});

describe('leaf cache', () => {
  it('mints each host once, even when asked concurrently', async () => {
    const { ca } = await makeTestPki();
    const cache = createLeafCache({ ca, now: Date.now });
    const contexts = await Promise.all(Array.from({ length: 20 }, () => cache.secureContextFor('api.example.test')));
    assert.equal(new Set(contexts).size, 1);
    assert.equal(cache.size(), 1);
    assert.equal(await cache.secureContextFor('API.example.test.'), contexts[0]);
  });

  it(`holds at most ${MAX_LEAF_CACHE_ENTRIES} leaves and drops the least recently used`, async () => {
    const { ca } = await makeTestPki();
    const cache = createLeafCache({ ca, now: Date.now });
    const first = await cache.secureContextFor('host-0.example.test');
    for (let i = 1; i < 300; i += 1) {
      if (i % 10 === 0) assert.equal(await cache.secureContextFor('host-0.example.test'), first);
      await cache.secureContextFor(`host-${i}.example.test`);
    }
    assert.equal(cache.size(), MAX_LEAF_CACHE_ENTRIES);
    assert.equal(await cache.secureContextFor('host-0.example.test'), first);
    const small = createLeafCache({ ca, now: Date.now, maxEntries: 2 });
    const a = await small.secureContextFor('a.test');
    await small.secureContextFor('b.test');
    await small.secureContextFor('a.test');
    await small.secureContextFor('c.test');
    assert.equal(await small.secureContextFor('a.test'), a);
    assert.equal(small.size(), 2);
  });

  it('re-mints a leaf half-way through its validity', async () => {
    const clock = testClock(Date.now());
    const { ca } = await makeTestPki();
    const cache = createLeafCache({ ca, now: clock.now });
    const first = await cache.secureContextFor('10.1.2.3');
    clock.advance(LEAF_VALIDITY_MS / 2 - 1);
    assert.equal(await cache.secureContextFor('10.1.2.3'), first);
    clock.advance(2);
    assert.notEqual(await cache.secureContextFor('10.1.2.3'), first);
  });

  it('refuses a host that cannot be named in a certificate', async () => {
    const { ca } = await makeTestPki();
    const cache = createLeafCache({ ca, now: Date.now });
    await assert.rejects(cache.secureContextFor('*.example.test'), { code: 'ADDRESS_INVALID' });
    await assert.rejects(cache.secureContextFor('bad host'), { code: 'ADDRESS_INVALID' });
    assert.equal(cache.size(), 0);
  });

  it('mints a leaf for a small part of the CPU an RSA-2048 key generation takes (median reported)', async (t) => {
    // The baseline is measured here and now, in CPU time: what minting would cost with a fresh RSA key per leaf,
    // the slow path a P-256 leaf avoids. A loaded machine stretches neither.
    const { ca } = await makeTestPki();
    const cache = createLeafCache({ ca, now: Date.now });
    const mints: number[] = [];
    const rsa: number[] = [];
    for (let i = 0; i < LEAF_MINT_SAMPLES; i += 1) {
      const before = process.cpuUsage();
      await cache.secureContextFor(`mint-${i}.example.test`);
      const used = process.cpuUsage(before);
      mints.push((used.user + used.system) / 1_000);
      if (i < RSA_BASELINE_SAMPLES) rsa.push(cpuMs(() => generateKeyPairSync('rsa', { modulusLength: 2048 })));
    }
    const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
    t.diagnostic(`leaf mint median ${median(mints).toFixed(2)} ms CPU; RSA-2048 key generation median ${median(rsa).toFixed(1)} ms CPU`);
    assert.ok(median(mints) * MIN_RSA_TO_MINT_RATIO < median(rsa), `leaf mint ${median(mints).toFixed(2)} ms CPU, RSA-2048 ${median(rsa).toFixed(1)} ms CPU`);
  });
});

describe('fixture certificates', () => {
  it('chain to the fixture CA, and the other-CA client does not', async () => {
    const read = async (name: string) => new X509Certificate(await readFile(new URL(name, FIXTURES), 'utf8'));
    const ca = await read('ca.pem');
    for (const name of ['server.pem', 'client.pem', 'expired-client.pem']) {
      assert.equal((await read(name)).verify(ca.publicKey), true, name);
    }
    assert.equal((await read('other-ca-client.pem')).verify(ca.publicKey), false);
    assert.ok(new Date((await read('expired-client.pem')).validTo).getTime() < Date.now());
    assert.equal((await read('client.pem')).subjectAltName, `URI:spiffe://${TEST_TRUST_DOMAIN}/sandbox/${TEST_SANDBOX_ID}`);
    assert.equal((await loadPkiDir(FIXTURES.pathname)).trustDomain, TEST_TRUST_DOMAIN);
  });
});
