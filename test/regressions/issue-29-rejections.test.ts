// Issue 29: a certificate rejection named on both sides. Whichever side refused, each end logs the remote address and
// the certificate that was presented (subject, SAN, issuer, fingerprint); the supervisor used to log a boundary that
// refused its certificate as `?:?` with nothing about what it had served.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import type { ControlFailure } from '../../src/control/dial.js';
import { makeTestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor } from '../harness/control.js';

interface RejectionLine {
  readonly msg: string;
  readonly remote: string;
  readonly reason?: string;
  readonly certificate: { subject: string; san: string; issuer: string; fingerprint256: string } | string;
  readonly served?: { subject: string; san: string; issuer: string; fingerprint256: string };
  readonly verifyError?: string;
}

const short = (pem: string): string => new X509Certificate(pem).fingerprint256.replace(/:/g, '').slice(0, 16);

describe('issue 29: certificate rejections, on both sides', () => {
  it('a boundary that refuses the supervisor certificate names it, and the supervisor logs who hung up and what it served', async (t) => {
    const pki = await makeTestPki();
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': policyYaml('a.example.test') } });
    t.after(() => sup.close());
    // Its ca.pem is another CA: the supervisor's certificate does not verify.
    const boundary = makeTestClient(pki, { port: sup.port(), caPem: pki.otherCa.certPem });
    await boundary.client.start();
    t.after(() => boundary.client.close());
    const failed = await boundary.waitState((s) => s.lastError !== undefined);
    const failure = failed.lastError as Pick<ControlFailure, 'kind' | 'message'>;
    assert.equal(failure.kind, 'tls');
    assert.match(failure.message, /^TLS handshake with 127\.0\.0\.1:\d+: [A-Z_]+: the supervisor certificate is not issued by the CA in ca\.pem of --tls-dir; the supervisor presented CN=127\.0\.0\.1 \[.*DNS:localhost.*\] issued by CN=boundary test CA, sha256 /);
    assert.ok(failure.message.includes(short(pki.server.certPem)), failure.message);

    const text = await sup.waitForLog((line) => line.includes('control TLS handshake failed'));
    const line = JSON.parse(text) as RejectionLine;
    assert.match(line.remote, /^127\.0\.0\.1:\d+$/);
    assert.notEqual(line.remote, '?:?');
    assert.match(line.reason ?? '', /hung up during the handshake/);
    const served = new X509Certificate(pki.server.certPem);
    assert.deepEqual(line.served, { subject: served.subject, san: served.subjectAltName, issuer: served.issuer, notAfter: served.validTo, fingerprint256: served.fingerprint256 });
  });

  it('a supervisor that refuses the boundary certificate logs its fingerprint, and the boundary says which one it presented', async (t) => {
    const pki = await makeTestPki();
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': policyYaml('a.example.test') } });
    t.after(() => sup.close());
    const boundary = makeTestClient(pki, { port: sup.port(), identity: pki.otherCaClient });
    await boundary.client.start();
    t.after(() => boundary.client.close());
    const failed = await boundary.waitState((s) => s.lastError !== undefined);
    assert.equal(failed.lastError?.kind, 'tls-auth');
    assert.match(failed.lastError?.message ?? '', /; we presented CN=sb-1 \[URI:spiffe:\/\/boundary\.test\/sandbox\/sb-1\] issued by CN=boundary other test CA, sha256 [0-9A-F]{16}…$/);
    assert.ok(failed.lastError?.message.includes(short(pki.otherCaClient.certPem)));

    const text = await sup.waitForLog((l) => l.includes('control connection refused: the client certificate did not verify'));
    const line = JSON.parse(text) as RejectionLine;
    assert.match(line.remote, /^127\.0\.0\.1:\d+$/);
    assert.equal(line.verifyError, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    assert.equal(typeof line.certificate === 'object' ? line.certificate.fingerprint256 : '', new X509Certificate(pki.otherCaClient.certPem).fingerprint256);
  });
});
