// Issue 12 (certificates renew): an attached boundary follows its --tls-dir, a kubelet-style projected Secret, without
// a restart; a broken update keeps the last good certificate; /readyz and /metrics show the expiry. Loopback only.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import type { Boundary } from '../../src/app/boundary-types.js';
import { createBoundary } from '../../src/app/boundary.js';
import type { ControlState } from '../../src/control/client.js';
import { CERT_EXPIRED_REASON, CERT_EXPIRING_WARNING, type ControlCertificateStatus, createControlTlsSource } from '../../src/control/tls-source.js';
import { type IssuedCertificate, issueCertificate } from '../../src/pki/issue.js';
import { attachedConfig } from '../harness/attached-config.js';
import { makeTestPki, type Pem, type TestPki } from '../harness/certs.js';
import { memorySink, policyYaml, quietLogger, startTestSupervisor, type TestSupervisor } from '../harness/control.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { type LogSink, logSink } from '../harness/log-sink.js';
import { type ProjectedDir, projectedDir, RELOAD_DEADLINE_MS } from '../harness/projected-dir.js';
import { withinDeadline } from '../harness/waiters.js';
import { waiterList } from '../harness/waiters.js';

const POLICIES = { 'sb-1': policyYaml('api.example.test') };
const METRIC = 'boundary_control_certificate_expiry_seconds';

interface TestBoundary {
  readonly boundary: Boundary;
  readonly log: LogSink;
  readonly tls: ProjectedDir;
  /** Resolves with the first control state (the current one or a later one) that matches. */
  until(what: string, predicate: (state: ControlState) => boolean): Promise<ControlState>;
  readyz(): Promise<{ status: number; body: Record<string, unknown> }>;
  /** The gauge as /metrics renders it. */
  expiryMetric(): Promise<number | undefined>;
}

function tlsFiles(caPem: string, identity: Pem): Record<string, string> {
  return { 'ca.pem': caPem, 'cert.pem': identity.certPem, 'key.pem': identity.keyPem };
}

/** X.509 stores whole seconds: what notAfter reads back as. */
function notAfterSeconds(issued: IssuedCertificate | Pem): number {
  return Date.parse(new X509Certificate(issued.certPem).validTo) / 1000;
}

function certificateOf(body: Record<string, unknown>): ControlCertificateStatus {
  return body.controlCertificate as ControlCertificateStatus;
}

async function startBoundary(t: { after(fn: () => Promise<unknown>): void }, sup: TestSupervisor, files: Record<string, string>): Promise<TestBoundary> {
  const tls = await projectedDir(files);
  const stateDir = await mkdtemp(join(tmpdir(), 'boundary-state-'));
  const log = logSink();
  let last: ControlState | undefined;
  const states = waiterList<ControlState>({ record: false });
  const config = attachedConfig({ supervisor: `127.0.0.1:${sup.port()}`, tlsDir: tls.dir, sandboxId: 'sb-1', stateDir });

  const boundary = createBoundary(config, {
    resolver: fakeResolver({}),
    now: Date.now,
    logger: log.logger,
    audit: log.sink,
    registry: new Registry(),
    controlTuning: {
      tuning: { backoff: { baseMs: 20, capMs: 200 } },
      onState(state) {
        last = state;
        states.push(state);
      },
    },
  });
  t.after(async () => {
    await boundary.close();
    await tls.remove();
    await rm(stateDir, { recursive: true, force: true });
  });
  await boundary.start();
  const admin = (path: string) => fetch(`http://127.0.0.1:${boundary.adminAddress().port}${path}`);
  return {
    boundary,
    log,
    tls,
    until(what, predicate) {
      if (last !== undefined && predicate(last)) return Promise.resolve(last);
      return states.waitFor(predicate, RELOAD_DEADLINE_MS, what, () => `last state ${last?.phase}, ${last?.lastError?.kind}: ${last?.lastError?.message}`);
    },
    async readyz() {
      const response = await admin('/readyz');
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    },
    async expiryMetric() {
      const text = await (await admin('/metrics')).text();
      const line = text.split('\n').find((l) => l.startsWith(`${METRIC} `));
      return line === undefined ? undefined : Number(line.slice(METRIC.length + 1));
    },
  };
}

describe('attached mode: control client certificates renew in place (issue 12)', () => {
  let pki: TestPki;
  let bundle: string;
  const client = (ca: TestPki['ca'], validityDays: number) =>
    issueCertificate({ ca, kind: 'client', sandboxId: pki.sandboxId, trustDomain: pki.trustDomain, now: Date.now, validityDays });
  before(async () => {
    pki = await makeTestPki();
    // Both CAs trusted, as during a CA rotation: the supervisor's server certificate is from the first one.
    bundle = pki.ca.certPem + pki.otherCa.certPem;
  });
  const sups: TestSupervisor[] = [];
  after(async () => {
    for (const sup of sups) await sup.close();
  });
  async function supervisor(options: { port?: number; clientCa?: string } = {}): Promise<TestSupervisor> {
    const tls = { caPem: options.clientCa ?? pki.ca.certPem, certPem: pki.server.certPem, keyPem: pki.server.keyPem };
    const sup = await startTestSupervisor(pki, { policies: POLICIES, ...(options.port === undefined ? {} : { port: options.port }), config: { tls } });
    sups.push(sup);
    return sup;
  }

  it('re-attaches with the certificate swapped into the projected directory after the supervisor stopped accepting the old one', async (t) => {
    const [a, b] = await Promise.all([client(pki.ca, 30), client(pki.otherCa, 60)]);
    const sup = await supervisor();
    const boundary = await startBoundary(t, sup, tlsFiles(bundle, a));
    const first = await boundary.until('attached with A', (s) => s.phase === 'attached' && s.policy.effective);
    assert.equal(await boundary.expiryMetric(), notAfterSeconds(a));

    // The supervisor comes back trusting only the other CA: certificate A is now refused at the TLS layer.
    const port = sup.port();
    await sup.close();
    const strict = await supervisor({ port, clientCa: pki.otherCa.certPem });
    await boundary.until('A rejected', (s) => s.phase !== 'attached' && s.lastError?.kind === 'tls-auth');

    await boundary.tls.update(tlsFiles(bundle, b));
    const again = await boundary.until('re-attached with B', (s) => s.phase === 'attached' && s.sessionId !== first.sessionId);
    assert.ok(again.sessionId !== undefined);
    await withinDeadline(strict.waitFor((e) => e.type === 'attached'), 'the strict supervisor admitted B');
    assert.equal(await boundary.expiryMetric(), notAfterSeconds(b));
    const ready = await boundary.readyz();
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.equal(certificateOf(ready.body).notAfter, new Date(notAfterSeconds(b) * 1000).toISOString());
    assert.equal(certificateOf(ready.body).state, 'valid');
    assert.deepEqual(ready.body.warnings, []);
  });

  it('keeps the certificate in use when a swap brings a key that does not match, and a renewal leaves the session up', async (t) => {
    const [a, renewed] = await Promise.all([client(pki.ca, 30), client(pki.ca, 90)]);
    const sup = await supervisor();
    const boundary = await startBoundary(t, sup, tlsFiles(pki.ca.certPem, a));
    const first = await boundary.until('attached with A', (s) => s.phase === 'attached' && s.policy.effective);

    await boundary.tls.update(tlsFiles(pki.ca.certPem, { certPem: renewed.certPem, keyPem: a.keyPem }));
    await withinDeadline(boundary.log.waitFor((e) => e.message.startsWith('control TLS update')), 'refusal event');
    assert.ok(boundary.log.lines().some((line) => line.includes('control TLS update refused') && line.includes('key.pem does not match')));
    const kept = await boundary.readyz();
    assert.equal(certificateOf(kept.body).notAfter, new Date(notAfterSeconds(a) * 1000).toISOString());
    assert.match(String(certificateOf(kept.body).lastRefused?.message), /key\.pem does not match/);
    assert.equal(await boundary.expiryMetric(), notAfterSeconds(a));
    assert.equal(boundary.boundary.readiness().ready, true);

    // A good renewal is taken for the next dial; the session that is up stays up.
    const fingerprint = new X509Certificate(renewed.certPem).fingerprint256;
    await boundary.tls.update(tlsFiles(pki.ca.certPem, renewed));
    await withinDeadline(boundary.log.waitFor((e) => e.unmapped.fingerprint256 === fingerprint), 'renewal loaded');
    assert.equal(await boundary.expiryMetric(), notAfterSeconds(renewed));
    const state = await boundary.until('still attached', (s) => s.phase === 'attached');
    assert.equal(state.sessionId, first.sessionId, 'the renewal did not tear the session down');
    assert.equal(certificateOf((await boundary.readyz()).body).lastRefused, undefined);
    assert.equal(boundary.log.text().includes('PRIVATE KEY'), false, 'no key material in any line');

    // The next dial presents the renewed certificate.
    await sup.restart();
    await boundary.until('re-attached with the renewal', (s) => s.phase === 'attached' && s.sessionId !== first.sessionId);
  });

  it('warns on /readyz inside the warning window while staying ready, and exports notAfter as a gauge', async (t) => {
    const soon = await client(pki.ca, 3);
    const sup = await supervisor();
    const boundary = await startBoundary(t, sup, tlsFiles(pki.ca.certPem, soon));
    await boundary.until('attached', (s) => s.phase === 'attached' && s.policy.effective);
    const ready = await boundary.readyz();
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    const certificate = certificateOf(ready.body);
    assert.equal(certificate.state, 'expiring');
    assert.equal(certificate.daysLeft, 2);
    assert.equal(certificate.spiffeId, `spiffe://${pki.trustDomain}/sandbox/${pki.sandboxId}`);
    const warnings = ready.body.warnings as string[];
    assert.equal(warnings.length, 1);
    assert.ok(warnings[0]?.startsWith(`${CERT_EXPIRING_WARNING}: client certificate expires at ${certificate.notAfter}`), warnings[0]);
    assert.equal(await boundary.expiryMetric(), notAfterSeconds(soon));
  });

  it('names an expired certificate as expired, is not ready with control-certificate-expired, and recovers on renewal', async (t) => {
    const sup = await supervisor();
    const boundary = await startBoundary(t, sup, tlsFiles(pki.ca.certPem, pki.expiredClient));
    const expiredAt = new Date(notAfterSeconds(pki.expiredClient) * 1000).toISOString();
    const failed = await boundary.until('expired failure', (s) => s.lastError !== undefined);
    assert.equal(failed.lastError?.kind, 'tls-auth');
    assert.match(failed.lastError?.message ?? '', new RegExp(`^client certificate expired at ${expiredAt.replaceAll('.', '\\.')}`));
    const notReady = await boundary.readyz();
    assert.equal(notReady.status, 503);
    assert.ok((notReady.body.reasons as string[]).includes(CERT_EXPIRED_REASON), JSON.stringify(notReady.body));
    assert.equal(certificateOf(notReady.body).state, 'expired');
    assert.ok(certificateOf(notReady.body).daysLeft < 0);
    assert.equal(await boundary.expiryMetric(), notAfterSeconds(pki.expiredClient));

    await boundary.tls.update(tlsFiles(pki.ca.certPem, pki.client));
    await boundary.until('attached after renewal', (s) => s.phase === 'attached' && s.policy.effective);
    const ready = await boundary.readyz();
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.equal(certificateOf(ready.body).state, 'valid');
  });

  it('follows a plain replacement of the files, and re-reads them before the dial after a tls-auth failure', async (t) => {
    const [a, b, c] = await Promise.all([client(pki.ca, 30), client(pki.ca, 60), client(pki.ca, 90)]);
    const dir = await mkdtemp(join(tmpdir(), 'boundary-tls-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const replace = async (files: Record<string, string>) => {
      // Write-then-rename per file, as cert-manager's csi driver and editors do outside a projected volume.
      for (const [name, text] of Object.entries(files)) {
        await writeFile(join(dir, `.${name}.tmp`), text);
        await rename(join(dir, `.${name}.tmp`), join(dir, name));
      }
    };
    await replace(tlsFiles(pki.ca.certPem, a));
    const sink = memorySink();
    const source = createControlTlsSource({ dir, sandboxId: pki.sandboxId, now: Date.now, logger: quietLogger().logger, sink, registry: new Registry() });
    await source.start();
    t.after(() => source.close());
    assert.equal((await source.provide({ lastFailure: undefined })).tls.certPem, a.certPem);

    const loaded = (issued: IssuedCertificate) => (e: { unmapped?: Readonly<Record<string, unknown>> }) =>
      e.unmapped?.fingerprint256 === new X509Certificate(issued.certPem).fingerprint256;
    await replace({ 'cert.pem': b.certPem, 'key.pem': b.keyPem });
    await withinDeadline(sink.waitFor(loaded(b)), 'the watcher loaded B');
    assert.equal((await source.provide({ lastFailure: undefined })).tls.certPem, b.certPem);

    // No waiting for the watcher: a tls-auth failure makes the next dial read the folder itself.
    await replace({ 'cert.pem': c.certPem, 'key.pem': c.keyPem });
    assert.equal((await source.provide({ lastFailure: 'tls-auth' })).tls.certPem, c.certPem);
    assert.equal(source.status()?.notAfter, new Date(notAfterSeconds(c) * 1000).toISOString());
  });
});
