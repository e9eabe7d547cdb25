// pki/identity.ts checkControlIdentity: what makes --tls-dir material usable for the control channel. No sockets.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { BoundaryError } from '../../src/shared/errors.js';
import { checkControlIdentity, type ControlIdentityPems } from '../../src/pki/identity.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';

function issuePaths(pems: ControlIdentityPems, sandboxId = 'sb-1'): string[] {
  try {
    checkControlIdentity(pems, { sandboxId });
  } catch (err) {
    assert.ok(err instanceof BoundaryError);
    assert.equal(err.code, 'PKI_INVALID');
    return err.issues.map((issue) => `${issue.path}: ${issue.message}`);
  }
  assert.fail('expected PKI_INVALID');
}

describe('control client identity check', () => {
  let pki: TestPki;
  let good: ControlIdentityPems;
  before(async () => {
    pki = await makeTestPki();
    good = { caPem: pki.ca.certPem, certPem: pki.client.certPem, keyPem: pki.client.keyPem };
  });

  it('accepts a matching key, a chain to ca.pem and our sandbox, with notAfter as the certificate says', () => {
    const identity = checkControlIdentity(good, { sandboxId: pki.sandboxId });
    assert.equal(identity.spiffeId, `spiffe://${pki.trustDomain}/sandbox/${pki.sandboxId}`);
    assert.equal(identity.notAfter, Date.parse(new X509Certificate(pki.client.certPem).validTo));
    assert.equal(JSON.stringify(identity).includes('PRIVATE KEY'), false, 'toJSON leaves the key out');
  });

  it('accepts a client certificate from any CA of a ca.pem bundle', () => {
    const bundle = pki.ca.certPem + pki.otherCa.certPem;
    checkControlIdentity({ ...good, caPem: bundle, certPem: pki.otherCaClient.certPem, keyPem: pki.otherCaClient.keyPem }, { sandboxId: pki.sandboxId });
  });

  it('accepts an expired certificate: expiry is the caller\'s question', () => {
    const identity = checkControlIdentity({ ...good, certPem: pki.expiredClient.certPem, keyPem: pki.expiredClient.keyPem }, { sandboxId: pki.sandboxId });
    assert.ok(identity.notAfter < Date.now());
  });

  it('refuses a key that does not belong to the certificate', () => {
    assert.deepEqual(issuePaths({ ...good, keyPem: pki.otherCaClient.keyPem }), ['key.pem: does not match the public key of cert.pem']);
  });

  it('refuses a certificate from a CA not in ca.pem', () => {
    assert.deepEqual(issuePaths({ ...good, certPem: pki.otherCaClient.certPem, keyPem: pki.otherCaClient.keyPem }), ['cert.pem: is not issued by a CA in ca.pem']);
  });

  it('refuses a certificate for another sandbox, and a server certificate, listing every problem', () => {
    assert.deepEqual(issuePaths(good, 'sb-2'), ['cert.pem: names no spiffe://<trust-domain>/sandbox/sb-2 URI']);
    assert.deepEqual(issuePaths({ ...good, certPem: pki.server.certPem, keyPem: pki.server.keyPem }), [
      'cert.pem: names no spiffe://<trust-domain>/sandbox/sb-1 URI',
      'cert.pem: its extended key usage does not allow TLS client authentication',
    ]);
  });

  it('refuses unreadable PEM text in each file', () => {
    assert.deepEqual(issuePaths({ caPem: 'garbage', certPem: 'garbage', keyPem: 'garbage' }), [
      'ca.pem: holds no PEM certificate',
      'cert.pem: holds no PEM certificate',
      'key.pem: is not a readable PEM private key',
    ]);
  });
});
