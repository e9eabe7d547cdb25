import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { connect as http2Connect } from 'node:http2';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { issueCertificate } from '../../src/pki/issue.js';
import type { Pem, TestPki } from '../harness/certs.js';
import { makeTestPki } from '../harness/certs.js';
import { startTestSupervisor, type TestSupervisor } from '../harness/control.js';

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly remote?: string;
  readonly verifyError?: string;
  readonly certificate?: { subject: string; san: string; notAfter: string; issuer: string; fingerprint256: string } | string;
  readonly reason?: string;
}

const WARN = 40;

/** Dials the control port over TLS with `identity` (or none) and waits until the supervisor hangs up. */
async function dialAndWaitForClose(pki: TestPki, port: number, identity: Pem | undefined): Promise<string> {
  const socket = tlsConnect({
    host: '127.0.0.1',
    port,
    ca: pki.ca.certPem,
    servername: 'localhost',
    ALPNProtocols: ['h2'],
    minVersion: 'TLSv1.3',
    ...(identity === undefined ? {} : { cert: identity.certPem, key: identity.keyPem }),
  });
  socket.on('error', () => {});
  await once(socket, 'secureConnect');
  const local = `127.0.0.1:${socket.localPort}`;
  await once(socket, 'close');
  return local;
}

/** The supervisor's log lines about `remote` (written before it closed that connection). */
function linesAbout(sup: TestSupervisor, remote: string): LogLine[] {
  return sup.logs.map((line) => JSON.parse(line) as LogLine).filter((line) => line.remote === remote);
}

describe('the supervisor names every connection it refuses', () => {
  let pki: TestPki;
  let sup: TestSupervisor;
  before(async () => {
    pki = await makeTestPki();
    sup = await startTestSupervisor(pki, { policies: { 'sb-1': 'version: 1\nnetwork_policies: {}\n' } });
  });
  after(() => sup.close());

  for (const [label, pick, verifyError] of [
    ['an expired certificate', (p: TestPki) => p.expiredClient, 'CERT_HAS_EXPIRED'],
    ['a certificate from another CA', (p: TestPki) => p.otherCaClient, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
  ] as const) {
    it(`logs ${label} with the remote address, its subject, SAN and expiry, and the verify error`, async () => {
      const identity = pick(pki);
      const remote = await dialAndWaitForClose(pki, sup.port(), identity);
      const [line, ...more] = linesAbout(sup, remote);
      assert.equal(more.length, 0, JSON.stringify(more));
      assert.ok(line !== undefined, sup.logs.join(''));
      assert.equal(line.level, WARN);
      assert.equal(line.verifyError, verifyError);
      const presented = new X509Certificate(identity.certPem);
      assert.deepEqual(line.certificate, {
        subject: 'CN=sb-1',
        san: 'URI:spiffe://boundary.test/sandbox/sb-1',
        notAfter: presented.validTo,
        issuer: presented.issuer,
        fingerprint256: presented.fingerprint256,
      });
    });
  }

  it('logs a connection that presented no certificate as such, never as "rejected: null"', async () => {
    const remote = await dialAndWaitForClose(pki, sup.port(), undefined);
    const [line] = linesAbout(sup, remote);
    assert.ok(line !== undefined, sup.logs.join(''));
    assert.equal(line.level, WARN);
    assert.equal(line.certificate, 'none presented');
    assert.equal(sup.logs.some((text) => text.includes('rejected: null')), false, sup.logs.join(''));
  });

  it('logs a handshake that failed before any certificate (a TLS 1.2 client) with the remote address and the error', async () => {
    const socket = tlsConnect({ host: '127.0.0.1', port: sup.port(), ca: pki.ca.certPem, servername: 'localhost', maxVersion: 'TLSv1.2' });
    let remote = '';
    socket.on('connect', () => {
      remote = `127.0.0.1:${socket.localPort}`;
    });
    // once() would reject on the alert's 'error'; the close that follows is what to wait for.
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.on('error', () => {});
    await closed;
    const [line] = linesAbout(sup, remote);
    assert.ok(line !== undefined, sup.logs.join(''));
    assert.equal(line.msg, 'control TLS handshake failed');
    assert.equal(line.certificate, 'none presented');
    assert.match((line as { err?: string }).err ?? '', /UNSUPPORTED_PROTOCOL/);
  });

  it('logs a verified certificate that names no sandbox (an operator) with its SAN, and refuses its attach', async () => {
    const operator = await issueCertificate({ ca: pki.ca, kind: 'client', operator: 'alice', trustDomain: pki.trustDomain, now: Date.now });
    const session = http2Connect(`https://127.0.0.1:${sup.port()}`, {
      ca: pki.ca.certPem,
      servername: 'localhost',
      cert: operator.certPem,
      key: operator.keyPem,
    });
    session.on('error', () => {});
    await once(session, 'connect');
    const remote = `127.0.0.1:${(session.socket as { localPort?: number }).localPort}`;
    const stream = session.request({ ':method': 'POST', ':path': '/v1/attach' });
    stream.end('{}\n');
    const [headers] = (await once(stream, 'response')) as [Record<string, unknown>];
    stream.resume();
    session.close();
    assert.equal(headers[':status'], 403);
    const [line] = linesAbout(sup, remote);
    assert.ok(line !== undefined, sup.logs.join(''));
    assert.equal(line.level, WARN);
    assert.match(line.reason ?? '', /names no spiffe:\/\/<trust-domain>\/sandbox\/<id>/);
    assert.equal(typeof line.certificate === 'object' ? line.certificate.san : '', 'URI:spiffe://boundary.test/operator/alice');
  });

  it('puts no key material in any of these lines', () => {
    assert.ok(sup.logs.length > 0);
    assert.equal(sup.logs.some((text) => text.includes('PRIVATE KEY') || text.includes('BEGIN CERTIFICATE')), false);
  });
});
