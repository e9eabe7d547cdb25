// Client certificates boundary holds (docs/credentials.md#client-certificates): curl through an intercepted CONNECT
// (HTTP/1.1 and HTTP/2 upstream) reaches an origin that requires a certificate from a CA made here, and that origin
// answers with the subject it received; a second origin on the same address (other port, other name) never gets one,
// nor does the first origin under another name; rotation by replacing the files; refusals as coded 502s.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { createFileCredentialSource, type FileCredentialSource } from '../../src/credentials/file-source.js';
import { type CertificateAuthority, createCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { DAY_MS } from '../../src/pki/mint.js';
import { isBoundaryError } from '../../src/shared/errors.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { nextRevision, writeAtomically } from '../harness/credential-parts.js';
import { type MtlsOrigin, mtlsOrigin } from '../harness/mtls-origin.js';

const run = promisify(execFile);
/** Bounds a hang only: curl's whole exchange on a loaded host. */
const CURL_HANG_BOUND_S = 60;
const BOUND = 'mtls.example.test';
const OTHER = 'other.example.test';
const TRUST_DOMAIN = 'agents.test';

function policy(strict: number, lax: number): string {
  // The bound endpoint is L4: the certificate alone makes boundary intercept it. The others are L7, so boundary
  // makes their upstream TLS too, and its pools and session cache are what is under test.
  const rest = (host: string, port: number) => `      - host: ${host}\n        port: ${port}\n        protocol: rest\n        enforcement: enforce\n        access: full\n`;
  return `version: 1
network_policies:
  mtls:
    endpoints:
      - host: ${BOUND}
        port: ${strict}
${rest(BOUND, lax)}${rest(OTHER, strict)}${rest(OTHER, lax)}    binaries: [{ path: "/**" }]
`;
}

function credentials(strict: number): string {
  return `providers:
  payments:
    client_certificate:
      cert: certs/client.pem
      key: certs/client.key
    endpoints:
      - { host: ${BOUND}, port: ${strict} }
`;
}

describe('client certificates held by boundary', () => {
  let serverCa: CertificateAuthority;
  let clientCa: CertificateAuthority;
  let strict: MtlsOrigin;
  let lax: MtlsOrigin;
  let b: RunningBoundary;
  let source: FileCredentialSource;
  let dir: string;
  let caFile: string;

  const issue = async (name: string, ca = clientCa, past = false) =>
    issueCertificate({ ca, kind: 'client', sandboxId: name, trustDomain: TRUST_DOMAIN, ...(past ? { now: () => Date.now() - 30 * DAY_MS, validityDays: 20 } : { now: Date.now }) });

  /** Replaces the certificate and key files (key first, then certificate, each by rename) and waits for the reload. */
  async function rotate(cert: { certPem: string; keyPem: string }): Promise<void> {
    const next = nextRevision(source, source.current().revision);
    await writeAtomically(join(dir, 'certs', 'client.key'), cert.keyPem);
    await writeAtomically(join(dir, 'certs', 'client.pem'), cert.certPem);
    await next;
    // Both files are replaced: wait until the set holds a matching pair (a reload between the two renames fails and keeps the old one).
    while (source.current().providers.get('payments')?.clientCertificate?.certChainPem.trim() !== cert.certPem.trim()) await nextRevision(source, source.current().revision);
  }

  async function curl(url: string, http2 = false): Promise<{ status: number; body: string }> {
    const args = ['-sS', '--max-time', String(CURL_HANG_BOUND_S), http2 ? '--http2' : '--http1.1', '--cacert', caFile, '--proxy', `http://127.0.0.1:${b.proxyPort}`, '-w', '\n%{http_code}'];
    const { stdout } = await run('curl', [...args, url], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    const cut = stdout.lastIndexOf('\n');
    return { status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) };
  }

  before(async () => {
    [serverCa, clientCa] = await Promise.all([
      createCertificateAuthority({ commonName: 'origin server CA', now: Date.now }),
      createCertificateAuthority({ commonName: 'client CA', now: Date.now }),
    ]);
    const names = [BOUND, OTHER, '127.0.0.1'];
    [strict, lax] = await Promise.all([mtlsOrigin({ serverCa, clientCa, names, require: true }), mtlsOrigin({ serverCa, clientCa, names, require: false })]);
    dir = await mkdtemp(join(tmpdir(), 'boundary-client-cert-'));
    await mkdir(join(dir, 'certs'), { recursive: true });
    const first = await issue('agent-one');
    await writeFile(join(dir, 'certs', 'client.pem'), first.certPem);
    await writeFile(join(dir, 'certs', 'client.key'), first.keyPem);
    await writeFile(join(dir, 'credentials.yaml'), credentials(strict.port));
    source = await createFileCredentialSource({ path: join(dir, 'credentials.yaml'), env: {}, watch: true });
    b = await startBoundary({ credentials: source, policy: policy(strict.port, lax.port), upstreamCaPem: serverCa.certPem, names: { [BOUND]: ['127.0.0.1'], [OTHER]: ['127.0.0.1'] } });
    caFile = join(b.dir, 'interception-ca.pem');
    await writeFile(caFile, b.caPem ?? '');
  });

  after(async () => {
    await b?.close();
    await source?.close();
    await Promise.all([strict?.close(), lax?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('presents the bound certificate through an intercepted CONNECT, HTTP/1.1 and HTTP/2 upstream', async () => {
    const h1 = await curl(`https://${BOUND}:${strict.port}/who`);
    assert.equal(h1.status, 200);
    assert.deepEqual(JSON.parse(h1.body), { subject: 'agent-one', version: '1.1' });
    const h2 = await curl(`https://${BOUND}:${strict.port}/who`, true);
    assert.equal(h2.status, 200);
    assert.deepEqual(JSON.parse(h2.body), { subject: 'agent-one', version: '2.0' });
  });

  it('presents it on a transparently captured connection too (synthetic address from policy DNS, no proxy)', async () => {
    const { stdout: synthetic } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+tries=1', '+time=3', '+short', BOUND, 'A']);
    assert.match(synthetic.trim(), /^127\.77\./, 'policy DNS gave a synthetic address');
    for (const http2 of [false, true]) {
      const args = ['-sS', '--max-time', String(CURL_HANG_BOUND_S), http2 ? '--http2' : '--http1.1', '--cacert', caFile, '--resolve', `${BOUND}:${strict.port}:${synthetic.trim()}`];
      const { stdout } = await run('curl', [...args, `https://${BOUND}:${strict.port}/captured`], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
      assert.deepEqual(JSON.parse(stdout), { subject: 'agent-one', version: http2 ? '2.0' : '1.1' });
    }
    assert.ok(b.log.events().some((e) => e.unmapped?.adapter === 'capture' && e.dst_endpoint?.port === strict.port), 'the capture adapter decided it');
  });

  it('never presents it elsewhere: same address on another port, another name on the same port, pooled and resumed', async () => {
    const before = strict.peers.length;
    for (const http2 of [false, true]) {
      // Warm the session cache and HTTP/2 pool with the certificate first, then ask the unbound authorities.
      assert.equal((await curl(`https://${BOUND}:${strict.port}/warm`, http2)).status, 200);
      for (const url of [`https://${BOUND}:${lax.port}/x`, `https://${OTHER}:${lax.port}/x`]) {
        const answer = await curl(url, http2);
        assert.equal(answer.status, 200);
        assert.equal(JSON.parse(answer.body).subject, '', `${url} got no certificate`);
      }
      // The strict origin under another name: no certificate is presented, so it refuses the handshake.
      const refused = await curl(`https://${OTHER}:${strict.port}/x`, http2);
      assert.equal(refused.status, 502);
      assert.equal(JSON.parse(refused.body).error, 'upstream_client_certificate_rejected');
    }
    assert.ok(lax.peers.length >= 4);
    assert.deepEqual(lax.peers.filter((cn) => cn !== ''), [], 'the second origin never received a certificate');
    assert.ok(strict.peers.slice(before).every((cn) => cn === 'agent-one'));
    const event = b.log.events().filter((e) => e.unmapped?.reason_code === 'client-certificate-rejected').at(-1);
    assert.equal(event?.unmapped?.verdict, 'fail');
  });

  it('rotation: the next connection presents the new certificate, with no restart', async () => {
    await rotate(await issue('agent-two'));
    assert.equal(JSON.parse((await curl(`https://${BOUND}:${strict.port}/r`)).body).subject, 'agent-two');
    assert.equal(JSON.parse((await curl(`https://${BOUND}:${strict.port}/r`, true)).body).subject, 'agent-two');
  });

  it('a certificate the origin refuses, or an expired one, is a coded 502 naming why; a key that does not match is refused at load', async () => {
    await rotate(await issue('stranger', await createCertificateAuthority({ commonName: 'unknown CA', now: Date.now })));
    for (const http2 of [false, true]) {
      const refused = await curl(`https://${BOUND}:${strict.port}/w`, http2);
      assert.equal(refused.status, 502);
      const body = JSON.parse(refused.body);
      assert.equal(body.error, 'upstream_client_certificate_rejected');
      // Node's TLS server judges the certificate after the handshake and closes without an alert.
      assert.equal(body.tls_alert, 'closed_without_alert');
    }
    await rotate(await issue('old-agent', clientCa, true));
    const expired = JSON.parse((await curl(`https://${BOUND}:${strict.port}/e`)).body);
    assert.equal(expired.error, 'upstream_client_certificate_rejected');
    assert.equal(expired.tls_alert, 'certificate_expired');
    assert.ok(!strict.peers.includes('old-agent'), 'boundary never presents a certificate past its validity');

    const good = await issue('agent-three');
    const mismatched = await issue('agent-four');
    await writeFile(join(dir, 'certs', 'client.pem'), good.certPem);
    await writeFile(join(dir, 'certs', 'client.key'), mismatched.keyPem);
    await assert.rejects(source.reload(), (err: unknown) => isBoundaryError(err) && err.issues.some((i) => i.code === 'CREDENTIALS_CLIENT_CERT_INVALID'));
  });
});
