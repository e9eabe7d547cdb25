// The supervisor follows its --tls-dir, a kubelet-style projected Secret: a renewed serving certificate (or a new CA)
// reaches new TLS connections of the control and admin listeners without a restart, live control sessions stay
// attached, and a broken update keeps the certificate in use. Loopback only.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { connect, type PeerCertificate } from 'node:tls';
import { before, describe, it } from 'node:test';
import { type IssuedCertificate, issueCertificate } from '../../src/pki/issue.js';
import { makeTestPki, type Pem, TEST_SERVER_NAMES, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor, type TestSupervisor } from '../harness/control.js';
import { type ProjectedDir, projectedDir, RELOAD_DEADLINE_MS } from '../harness/projected-dir.js';
import { withinDeadline } from '../harness/waiters.js';

const POLICIES = { 'sb-1': policyYaml('api.example.test') };

function tlsFiles(caPem: string, identity: Pem): Record<string, string> {
  return { 'ca.pem': caPem, 'cert.pem': identity.certPem, 'key.pem': identity.keyPem };
}

function serialOf(pem: Pem): string {
  return new X509Certificate(pem.certPem).serialNumber;
}

/** The serial of the certificate a fresh TLS connection to `port` is served, trusting `caPem`. */
function servedSerial(port: number, caPem: string, client?: Pem): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      ca: caPem,
      ALPNProtocols: ['h2', 'http/1.1'],
      ...(client === undefined ? {} : { cert: client.certPem, key: client.keyPem }),
    });
    socket.once('secureConnect', () => {
      const cert: PeerCertificate = socket.getPeerCertificate();
      socket.destroy();
      resolve(cert.serialNumber);
    });
    socket.once('error', reject);
  });
}

/** Opens connection after connection until one is served `serial` (each handshake is the wait), for RELOAD_DEADLINE_MS. */
async function untilServed(what: string, port: number, caPem: string, serial: string, client?: Pem): Promise<void> {
  const end = Date.now() + RELOAD_DEADLINE_MS;
  let last = '';
  while (Date.now() < end) {
    last = await servedSerial(port, caPem, client).catch((err: Error) => err.message);
    if (last === serial) return;
  }
  throw new Error(`${what}: not seen within ${RELOAD_DEADLINE_MS} ms (last: ${last})`);
}

function isoNotAfter(pem: Pem): string {
  return new Date(new X509Certificate(pem.certPem).validTo).toISOString();
}

describe('supervisor serving certificate renewal', () => {
  let pki: TestPki;
  let renewed: IssuedCertificate;
  let otherCaServer: IssuedCertificate;

  before(async () => {
    pki = await makeTestPki();
    [renewed, otherCaServer] = await Promise.all([
      issueCertificate({ ca: pki.ca, kind: 'server', names: TEST_SERVER_NAMES, now: Date.now }),
      issueCertificate({ ca: pki.otherCa, kind: 'server', names: TEST_SERVER_NAMES, now: Date.now }),
    ]);
  });

  async function start(t: { after(fn: () => Promise<unknown>): void }): Promise<{ sup: TestSupervisor; tls: ProjectedDir }> {
    const tls = await projectedDir(tlsFiles(pki.ca.certPem, pki.server));
    const sup = await startTestSupervisor(pki, { policies: POLICIES, config: { tls: { dir: tls.dir }, adminTls: true } });
    t.after(async () => {
      await sup.close();
      await tls.remove();
    });
    return { sup, tls };
  }

  it('serves a renewed certificate to new connections while a live control session stays attached', async (t) => {
    const { sup, tls } = await start(t);
    const port = sup.port();
    const adminPort = sup.supervisor.adminAddress()?.port ?? 0;
    assert.equal(await servedSerial(port, pki.ca.certPem, pki.client), serialOf(pki.server));
    assert.equal(await servedSerial(adminPort, pki.ca.certPem), serialOf(pki.server));

    const c = makeTestClient(pki, { port });
    t.after(() => c.client.close());
    await c.client.start();
    const attached = await c.waitState((s) => s.policy.effective && s.phase === 'attached');

    await tls.update(tlsFiles(pki.ca.certPem, renewed));
    await untilServed('control listener serves the renewed certificate', port, pki.ca.certPem, serialOf(renewed), pki.client);
    await untilServed('admin listener serves the renewed certificate', adminPort, pki.ca.certPem, serialOf(renewed));
    assert.ok(sup.logs.some((line) => line.includes('supervisor serving certificate loaded (renewed)') && line.includes(`valid until ${isoNotAfter(renewed)}`)));

    // The session from before the swap still carries pushes.
    const generation = c.client.state().policy.generation ?? 0;
    await sup.writePolicy('sb-1', policyYaml('api2.example.test'));
    await c.waitState((s) => (s.policy.generation ?? 0) > generation);
    assert.equal(c.client.state().sessionId, attached.sessionId);
    assert.equal(c.client.state().phase, 'attached');

    // A boundary dialling now completes mTLS HTTP/2 against the renewed certificate.
    const fresh = makeTestClient(pki, { port, instanceId: 'pod-2' });
    t.after(() => fresh.client.close());
    await fresh.client.start();
    await fresh.waitState((s) => s.phase === 'attached');
  });

  it('keeps serving the current certificate when an update has a key that does not match', async (t) => {
    const { sup, tls } = await start(t);
    const port = sup.port();
    await tls.update({ 'ca.pem': pki.ca.certPem, 'cert.pem': renewed.certPem, 'key.pem': pki.server.keyPem });
    const line = await withinDeadline(sup.waitForLog((l) => l.includes('supervisor TLS update refused')), 'the refusal is logged');
    assert.match(line, /key\.pem does not match/);
    assert.equal(await servedSerial(port, pki.ca.certPem, pki.client), serialOf(pki.server));
    assert.equal(sup.logs.filter((l) => l.includes('supervisor TLS update refused')).length, 1, 'one refusal per broken version');

    // Fixing the Secret afterwards is picked up as usual.
    await tls.update(tlsFiles(pki.ca.certPem, renewed));
    await untilServed('the fixed update is served', port, pki.ca.certPem, serialOf(renewed), pki.client);
  });

  it('applies a new CA: boundaries with client certificates from it attach', async (t) => {
    const { sup, tls } = await start(t);
    const port = sup.port();
    await tls.update(tlsFiles(pki.otherCa.certPem, otherCaServer));
    await untilServed('the new CA is served', port, pki.otherCa.certPem, serialOf(otherCaServer), pki.otherCaClient);
    const c = makeTestClient(pki, { port, identity: pki.otherCaClient, caPem: pki.otherCa.certPem });
    t.after(() => c.client.close());
    await c.client.start();
    await c.waitState((s) => s.phase === 'attached');
  });

  it('shows its own certificate on /readyz and /metrics, warns in its last days and is not ready once it expired', async (t) => {
    const tls = await projectedDir(tlsFiles(pki.ca.certPem, pki.server));
    let offsetMs = 0;
    const sup = await startTestSupervisor(pki, {
      policies: POLICIES,
      now: () => Date.now() + offsetMs,
      config: { tls: { dir: tls.dir }, metricsListen: { host: '127.0.0.1', port: 0 } },
    });
    t.after(async () => {
      await sup.close();
      await tls.remove();
    });
    const notAfter = isoNotAfter(pki.server);
    const fresh = sup.supervisor.readiness();
    assert.equal(fresh.ready, true);
    assert.equal((fresh.servingCertificate as { notAfter: string }).notAfter, notAfter);
    assert.equal(fresh.warnings, undefined);
    const metrics = sup.supervisor.metricsAddress();
    assert.ok(metrics !== undefined);
    const text = await fetch(`http://127.0.0.1:${metrics.port}/metrics`).then((r) => r.text());
    assert.match(text, new RegExp(`^boundary_supervisor_certificate_expiry_seconds ${Date.parse(notAfter) / 1000}$`, 'm'));
    // Three days before notAfter: still ready, with a warning.
    offsetMs = Date.parse(notAfter) - Date.now() - 3 * 86_400_000;
    const expiring = sup.supervisor.readiness();
    assert.equal(expiring.ready, true);
    assert.deepEqual(expiring.warnings, ['serving-certificate-expiring']);
    // Past notAfter: no boundary could verify it, so the replica says so and is taken out of the Service.
    offsetMs = Date.parse(notAfter) - Date.now() + 60_000;
    const expired = sup.supervisor.readiness();
    assert.equal(expired.ready, false);
    assert.deepEqual(expired.reasons, [`serving-certificate-expired: ${notAfter}`]);
  });
});
