// A provider's client_certificate in the credentials file (docs/credentials.md#client-certificates): what parses, what is
// refused with which code, what `policy check --credentials` reports, and that the key never shows in a message.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkCredentialsFile } from '../../src/app/cli/policy-check.js';
import type { CliIo } from '../../src/app/cli/io.js';
import { clientCertificateFor, loadClientCertificate } from '../../src/credentials/client-cert.js';
import { createFileCredentialSource } from '../../src/credentials/file-source.js';
import { createCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { isBoundaryError } from '../../src/shared/errors.js';
import { credentialIssues } from '../harness/credential-parts.js';


describe('client_certificate in the credentials file', () => {
  let dir: string;
  let keyPem: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'client-cert-unit-'));
    const ca = await createCertificateAuthority({ commonName: 'unit CA', now: Date.now });
    const one = await issueCertificate({ ca, kind: 'client', sandboxId: 'one', trustDomain: 'unit.test', now: Date.now });
    const two = await issueCertificate({ ca, kind: 'client', sandboxId: 'two', trustDomain: 'unit.test', now: Date.now });
    keyPem = one.keyPem;
    await writeFile(join(dir, 'one.pem'), one.certPem);
    await writeFile(join(dir, 'one.key'), one.keyPem);
    await writeFile(join(dir, 'two.key'), two.keyPem);
    await writeFile(join(dir, 'chain.pem'), ca.certPem);
    await writeFile(join(dir, 'junk.pem'), 'not a certificate\n');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('parses cert, key and chain paths; refuses a missing key, unknown fields, a path beside it and no endpoints', () => {
    assert.deepEqual(credentialIssues('providers:\n  p:\n    client_certificate: { cert: a.pem, key: a.key, chain: c.pem }\n    endpoints: [{ host: x.test, port: 443 }]\n'), []);
    assert.deepEqual(credentialIssues('providers:\n  p:\n    client_certificate: { cert: a.pem }\n    endpoints: [{ host: x.test, port: 443 }]\n'), [
      'CREDENTIALS_CLIENT_CERT_INVALID providers.p.client_certificate.key',
    ]);
    assert.deepEqual(credentialIssues('providers:\n  p:\n    client_certificate: { cert: a.pem, key: a.key, pass: x }\n    endpoints: [{ host: x.test, port: 443 }]\n'), [
      'CREDENTIALS_UNKNOWN_KEY providers.p.client_certificate.pass',
    ]);
    assert.deepEqual(credentialIssues('providers:\n  p:\n    client_certificate: { cert: a.pem, key: a.key }\n    endpoints: [{ host: x.test, port: 443, path: "/v1/**" }]\n'), [
      'CREDENTIALS_CLIENT_CERT_INVALID providers.p.endpoints[0].path',
    ]);
    assert.deepEqual(credentialIssues('providers:\n  p:\n    client_certificate: { cert: a.pem, key: a.key }\n'), ['CREDENTIALS_CLIENT_CERT_INVALID providers.p.client_certificate']);
    assert.deepEqual(credentialIssues('providers:\n  p:\n    client_certificate: a.pem\n    endpoints: [{ host: x.test, port: 443 }]\n'), ['CREDENTIALS_TYPE providers.p.client_certificate']);
  });

  it('loads a matching pair with its chain; refuses a key of another certificate and a file that is not PEM, never quoting the key', async () => {
    const loaded = await loadClientCertificate({ cert: 'one.pem', key: 'one.key', chain: 'chain.pem' }, dir);
    assert.match(loaded.subject, /CN=one/);
    assert.equal(loaded.certChainPem.match(/BEGIN CERTIFICATE/g)?.length, 2);
    assert.equal(String(loaded.key), '[redacted]');
    for (const [files, what] of [
      [{ cert: 'one.pem', key: 'two.key' }, 'mismatch'],
      [{ cert: 'junk.pem', key: 'one.key' }, 'not PEM'],
      [{ cert: 'one.pem', key: 'junk.pem' }, 'not a key'],
      [{ cert: 'one.pem', key: 'missing.key' }, 'missing'],
    ] as const) {
      await assert.rejects(loadClientCertificate(files, dir), (err: unknown) => {
        assert.ok(isBoundaryError(err) && err.code === 'CREDENTIALS_CLIENT_CERT_INVALID', what);
        assert.ok(!err.message.includes(keyPem.split('\n')[1] ?? 'x'), 'the key never shows');
        return true;
      });
    }
  });

  it('binds by host and port; two different certificates on one authority are ambiguous', async () => {
    const path = join(dir, 'two-providers.yaml');
    await writeFile(
      path,
      'providers:\n  a:\n    client_certificate: { cert: one.pem, key: one.key }\n    endpoints: [{ host: "*.x.test", port: 443 }]\n' +
        '  b:\n    client_certificate: { cert: one.pem, key: one.key, chain: chain.pem }\n    endpoints: [{ host: api.x.test, port: 443 }]\n',
    );
    const source = await createFileCredentialSource({ path, env: {} });
    try {
      const set = source.current();
      assert.equal(clientCertificateFor(set, 'other.x.test', 443).kind, 'one');
      assert.equal(clientCertificateFor(set, 'other.x.test', 8443).kind, 'none');
      assert.equal(clientCertificateFor(set, 'y.test', 443).kind, 'none');
      assert.equal(clientCertificateFor(set, 'api.x.test', 443).kind, 'ambiguous');
    } finally {
      await source.close();
    }
  });

  it('policy check --credentials reads the files: a key that does not match is a located problem', async () => {
    const io = { cwd: dir } as CliIo;
    await writeFile(join(dir, 'good.yaml'), 'providers:\n  p:\n    client_certificate: { cert: one.pem, key: one.key }\n    endpoints: [{ host: x.test, port: 443 }]\n');
    await writeFile(join(dir, 'bad.yaml'), 'providers:\n  p:\n    client_certificate: { cert: one.pem, key: two.key }\n    endpoints: [{ host: x.test, port: 443 }]\n');
    assert.equal((await checkCredentialsFile('good.yaml', io)).ok, true);
    const bad = await checkCredentialsFile('bad.yaml', io);
    assert.equal(bad.ok, false);
    assert.deepEqual(bad.problems.map((p) => [p.code, p.path, p.line]), [['CREDENTIALS_CLIENT_CERT_INVALID', 'providers.p.client_certificate', 3]]);
  });
});
