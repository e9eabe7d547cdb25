// --ca-bundle-out: the workload trust bundle verifies a passthrough upstream signed by an --upstream-ca
// anchor and a leaf minted by boundary's CA, holds the CA, is rewritten on every start, and is never
// written without a CA. Loopback TLS only.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect, createServer, type TlsOptions } from 'node:tls';
import { loadCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { createLeafCache } from '../../src/pki/leaf.js';
import { buildTrustBundle, certificateBlocks, loadSystemRoots, NODE_ROOTS_SOURCE } from '../../src/pki/trust-bundle.js';
import { startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';

/** 'ok' when a client trusting only `bundle` completes a handshake with a server using `server`; else the error code. */
async function handshake(bundle: string, server: TlsOptions, servername: string): Promise<string> {
  const listener = createServer(server, (socket) => socket.end());
  listener.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const { port } = listener.address() as { port: number };
  try {
    return await new Promise<string>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port, servername, ca: bundle });
      socket.once('secureConnect', () => {
        socket.destroy();
        resolve('ok');
      });
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
  } finally {
    listener.close();
  }
}

async function tempDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-bundle-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('the workload trust bundle (--ca-bundle-out)', () => {
  it('verifies an --upstream-ca upstream and a leaf of boundary CA, and holds the CA under a comment', async (t) => {
    const dir = await tempDir(t);
    const pki = await makeTestPki();
    const bundlePath = join(dir, 'out', 'ca-bundle.pem');
    const stateDir = join(dir, 'state');
    const b = await startBoundary({ upstreamCaPem: pki.ca.certPem, caBundleOut: bundlePath, stateDir });
    t.after(() => b.close());
    const bundle = await readFile(bundlePath, 'utf8');
    assert.equal((await stat(bundlePath)).mode & 0o777, 0o644);
    assert.ok(b.caPem !== undefined && bundle.includes(b.caPem.trim()), 'the interception CA is in the bundle');
    assert.ok(bundle.includes(pki.ca.certPem.trim()), 'the --upstream-ca anchor is in the bundle');
    const comments = bundle.split('\n').filter((line) => line.startsWith('# '));
    assert.deepEqual(
      comments.slice(1).map((line) => line.split(':')[0]),
      ['# System roots', '# Upstream trust anchors from --upstream-ca ' + join(b.dir, 'upstream-ca.pem'), '# boundary interception CA (CN=boundary interception CA)'],
    );
    assert.deepEqual(await readdir(join(dir, 'out')), ['ca-bundle.pem'], 'no temporary file is left beside it');

    const upstream = await issueCertificate({ ca: pki.ca, kind: 'server', names: ['api.example.test'], now: Date.now });
    assert.equal(await handshake(bundle, { cert: upstream.certPem, key: upstream.keyPem }, 'api.example.test'), 'ok');
    const ca = await loadCertificateAuthority({ certPem: await readFile(join(stateDir, 'ca.pem'), 'utf8'), keyPem: await readFile(join(stateDir, 'ca.key'), 'utf8') });
    const leaf = await createLeafCache({ ca, now: Date.now }).secureContextFor('intercepted.example.test');
    assert.equal(await handshake(bundle, { SNICallback: (_name, done) => done(null, leaf) }, 'intercepted.example.test'), 'ok');
    // A CA that is in no group is refused: the bundle is a trust list, not a pass.
    const stranger = await issueCertificate({ ca: pki.otherCa, kind: 'server', names: ['api.example.test'], now: Date.now });
    assert.notEqual(await handshake(bundle, { cert: stranger.certPem, key: stranger.keyPem }, 'api.example.test'), 'ok');

    const event = await b.log.waitFor((e) => e.message.startsWith('workload trust bundle written to '));
    assert.match(event.message, /system roots from \S+/);
  });

  it('is rewritten on restart', async (t) => {
    const dir = await tempDir(t);
    const bundlePath = join(dir, 'ca-bundle.pem');
    const stateDir = join(dir, 'state');
    const first = await startBoundary({ caBundleOut: bundlePath, stateDir });
    await first.close();
    const written = await readFile(bundlePath, 'utf8');
    await writeFile(bundlePath, 'stale\n');
    const second = await startBoundary({ caBundleOut: bundlePath, stateDir });
    t.after(() => second.close());
    assert.equal(await readFile(bundlePath, 'utf8'), written);
  });

  it('is not written when the interception CA failed to load', async (t) => {
    const dir = await tempDir(t);
    const bundlePath = join(dir, 'ca-bundle.pem');
    const b = await startBoundary({ caBundleOut: bundlePath, caUnavailable: true });
    t.after(() => b.close());
    assert.match(String(b.boundary.readiness().interception), /^unavailable/);
    await assert.rejects(stat(bundlePath), { code: 'ENOENT' });
  });
});

describe('system roots', () => {
  it('come from the first readable bundle, else from Node when neither the files nor openssl have any', async (t) => {
    const dir = await tempDir(t);
    const file = join(dir, 'roots.pem');
    const pki = await makeTestPki();
    await writeFile(file, `junk\n${pki.ca.certPem}${pki.ca.keyPem}`);
    const fromFile = await loadSystemRoots({ candidates: [join(dir, 'missing.pem'), file], query: async () => undefined });
    assert.deepEqual(fromFile, { certificates: [pki.ca.certPem.trim()], source: file });
    const fromOpenssl = await loadSystemRoots({ candidates: [], query: async () => dir });
    assert.equal(fromOpenssl.source, NODE_ROOTS_SOURCE, 'no cert.pem in that OPENSSLDIR');
    await writeFile(join(dir, 'cert.pem'), pki.ca.certPem);
    assert.equal((await loadSystemRoots({ candidates: [], query: async () => dir })).source, join(dir, 'cert.pem'));
  });

  it('never carry a private key into the bundle, and a path cannot break a comment line', () => {
    const text = buildTrustBundle({
      system: { certificates: [], source: 'none' },
      upstream: { path: '/tmp/evil\nMIIBkTCB', pem: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' },
      ca: { certPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', subject: 'CN=x' },
    });
    assert.doesNotMatch(text, /PRIVATE KEY/);
    assert.equal(certificateBlocks(text).length, 1);
    assert.ok(text.split('\n').every((line) => line.startsWith('#') || line.startsWith('-----') || /^[A-Za-z0-9+/=]*$/.test(line)), text);
  });
});
