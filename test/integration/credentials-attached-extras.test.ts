// Attached mode delivers client certificates and placeholder formats (docs/credentials.md#client-certificates,
// #shaped-placeholders): a real supervisor reads them from its credentials file and gives them, with the providers,
// only to the sandbox whose policy reaches their endpoints; that sandbox's boundary presents the certificate to an
// origin that requires it and swaps the shaped placeholder, and the other sandbox's boundary holds neither.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { FORMAT_CATALOGUE, shapedPlaceholder } from '../../src/credentials/shaped.js';
import { type CertificateAuthority, createCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { type AttachedBoundary, startAttached } from '../harness/attached-boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { startTestSupervisor, type TestSupervisor } from '../harness/control.js';
import { type MtlsOrigin, mtlsOrigin } from '../harness/mtls-origin.js';
import { sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const run = promisify(execFile);
/** Bounds a hang only: curl's whole exchange on a loaded host. */
const CURL_HANG_BOUND_S = 60;
const MTLS = 'mtls.example.test';
const API = 'api.example.test';
const SECRET = 'gh-secret-attached-4c1e9a';

function policy(host: string, port: number): string {
  return `version: 1\nnetwork_policies:\n  p:\n    endpoints:\n      - host: ${host}\n        port: ${port}\n    binaries: [{ path: "/**" }]\n`;
}

describe('attached mode delivers client certificates and shaped placeholder formats', () => {
  let pki: TestPki;
  let serverCa: CertificateAuthority;
  let strict: MtlsOrigin;
  let plain: Origin;
  let sup: TestSupervisor;
  let a: AttachedBoundary;
  let b: AttachedBoundary;
  let dir: string;
  const shaped = shapedPlaceholder('gh', 'GH_TOKEN', { id: 'github-classic', parts: FORMAT_CATALOGUE['github-classic'] ?? [] });

  before(async () => {
    pki = await makeTestPki();
    serverCa = await createCertificateAuthority({ commonName: 'origin server CA', now: Date.now });
    const clientCa = await createCertificateAuthority({ commonName: 'client CA', now: Date.now });
    strict = await mtlsOrigin({ serverCa, clientCa, names: [MTLS], require: true });
    plain = await httpOrigin();
    dir = await mkdtemp(join(tmpdir(), 'boundary-attached-extras-'));
    const client = await issueCertificate({ ca: clientCa, kind: 'client', sandboxId: 'attached-agent', trustDomain: 'agents.test', now: Date.now });
    await writeFile(join(dir, 'client.pem'), client.certPem);
    await writeFile(join(dir, 'client.key'), client.keyPem);
    await writeFile(join(dir, 'gh'), SECRET);
    await writeFile(join(dir, 'upstream-ca.pem'), serverCa.certPem);
    await writeFile(
      join(dir, 'credentials.yaml'),
      `providers:\n  payments:\n    client_certificate: { cert: client.pem, key: client.key }\n    endpoints: [{ host: ${MTLS}, port: ${strict.port} }]\n` +
        `  gh:\n    env:\n      GH_TOKEN: { value_from: { file: gh }, format: github-classic }\n    endpoints: [{ host: ${API}, port: ${plain.port} }]\n`,
    );
    const both = `${policy(MTLS, strict.port)}`.replace('    binaries', `      - host: ${API}\n        port: ${plain.port}\n    binaries`);
    sup = await startTestSupervisor(pki, { policies: { 'sb-a': both, 'sb-b': policy('elsewhere.example.test', 443) }, config: { credentialsFile: join(dir, 'credentials.yaml') } });
    const identity = async (sandboxId: string): Promise<TestPki> => ({
      ...pki,
      sandboxId,
      client: await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId, trustDomain: pki.trustDomain, now: Date.now }),
    });
    const names = { [MTLS]: ['127.0.0.1'], [API]: ['127.0.0.1'] };
    const config = { upstreamCa: join(dir, 'upstream-ca.pem') };
    a = await startAttached(await identity('sb-a'), sup, { names, config });
    b = await startAttached(await identity('sb-b'), sup, { names, config });
    await a.waitState((s) => s.policy.effective);
    await b.waitState((s) => s.policy.effective);
  });

  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await sup?.close();
    await Promise.all([strict?.close(), plain?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  it('only the sandbox whose policy reaches them is given the certificate and the format', () => {
    const payments = a.boundary.credentials.current().providers.get('payments');
    assert.match(payments?.clientCertificate?.subject ?? '', /CN=attached-agent/);
    assert.equal(a.boundary.credentials.current().providers.get('gh')?.shaped.get('GH_TOKEN'), shaped);
    assert.deepEqual([...b.boundary.credentials.current().providers.keys()], []);
  });

  it("the granted sandbox's boundary presents the certificate and swaps the shaped placeholder", async () => {
    const caFile = join(dir, 'interception-ca.pem');
    await writeFile(caFile, await readFile(join(a.stateDir, 'ca.pem'), 'utf8'));
    const args = ['-sS', '--max-time', String(CURL_HANG_BOUND_S), '--cacert', caFile, '--proxy', `http://127.0.0.1:${a.proxyPort}`];
    const { stdout } = await run('curl', [...args, `https://${MTLS}:${strict.port}/who`], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    assert.equal(JSON.parse(stdout).subject, 'attached-agent');
    const answer = await sendRequest({ proxyPort: a.proxyPort, path: `http://${API}:${plain.port}/x`, headers: { authorization: `token ${shaped}` } });
    assert.equal(answer.status, 200);
    assert.equal(plain.seen.at(-1)?.headers.authorization, `token ${SECRET}`);
  });
});
