import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { ISSUED_FILES } from '../../src/pki/issue.js';
import { DAY_MS } from '../../src/pki/mint.js';
import { createServingTlsSource, registerServingCertificateExpiry, SERVING_CERT_EXPIRY_METRIC } from '../../src/supervisor/serving-tls.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { makeTestPki } from '../harness/certs.js';

describe('supervisor serving certificate expiry', () => {
  it('reports the serving certificate notAfter, days left and the expiry gauge read at scrape time', async (t) => {
    const pki = await makeTestPki();
    const dir = await mkdtemp(join(tmpdir(), 'boundary-serving-tls-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, ISSUED_FILES.ca), pki.ca.certPem);
    await writeFile(join(dir, ISSUED_FILES.cert), pki.server.certPem);
    await writeFile(join(dir, ISSUED_FILES.key), pki.server.keyPem);
    let now = Date.now();
    const logger = createLogger({ format: 'json', level: 'error', destination: { write: () => true } });
    const source = createServingTlsSource({ dir, now: () => now, logger, apply: () => undefined });
    t.after(() => source.close());
    const registry = new Registry();
    registerServingCertificateExpiry(registry, source);

    assert.equal(source.certificate(), undefined);
    assert.equal((await registry.getSingleMetric(SERVING_CERT_EXPIRY_METRIC)?.get())?.values[0]?.value, 0);

    const identity = await source.start();
    const certificate = source.certificate();
    assert.ok(certificate);
    assert.equal(Date.parse(certificate.notAfter), identity.notAfter);
    assert.equal(certificate.daysLeft, Math.floor((identity.notAfter - now) / DAY_MS));
    now = identity.notAfter + DAY_MS;
    assert.equal(source.certificate()?.daysLeft, -1);

    const text = await registry.metrics();
    assert.match(text, new RegExp(`^${SERVING_CERT_EXPIRY_METRIC} ${identity.notAfter / 1000}$`, 'm'));
  });
});
