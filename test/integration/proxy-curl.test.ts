import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

const run = promisify(execFile);
const CURL_TIMEOUT_S = '10';

let plain: Origin;
let secure: Origin;
let b: RunningBoundary;
let caFile = '';

before(async () => {
  const pki = await makeTestPki();
  plain = await httpOrigin();
  secure = await tlsOrigin({ ca: pki.ca });
  b = await startBoundary({
    upstreamCaPem: pki.ca.certPem,
    policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        ports: [${plain.port}, ${secure.port}]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
    binaries: [{ path: "/**" }]
`,
  });
  caFile = join(b.dir, 'boundary-ca.pem');
  await writeFile(caFile, b.caPem as string);
});

after(async () => {
  await b?.close();
  await plain?.close();
  await secure?.close();
});

async function curl(args: string[]): Promise<{ code: string; body: string }> {
  const { stdout } = await run('curl', ['-sS', '--max-time', CURL_TIMEOUT_S, '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '-w', '\n%{http_code}', ...args]);
  const cut = stdout.lastIndexOf('\n');
  return { body: stdout.slice(0, cut), code: stdout.slice(cut + 1) };
}

describe('curl as a real client', () => {
  it('fetches over CONNECT with TLS intercepted by the boundary CA and verified upstream against --upstream-ca', async () => {
    const { code, body } = await curl(['--cacert', caFile, `https://api.example.test:${secure.port}/allowed/curl?x=1`]);
    assert.equal(code, '200');
    assert.equal((JSON.parse(body) as { url: string }).url, '/allowed/curl?x=1');
  });

  it('gets the L7 denial inside the tunnel', async () => {
    const { code, body } = await curl(['--cacert', caFile, `https://api.example.test:${secure.port}/nope`]);
    assert.equal(code, '403');
    assert.equal((JSON.parse(body) as { error: string }).error, 'policy_denied');
  });

  it('fetches plain http:// through the forward proxy', async () => {
    const { code } = await curl([`http://api.example.test:${plain.port}/allowed/forward`]);
    assert.equal(code, '200');
  });

  it('fails the handshake when the client does not trust the boundary CA', async () => {
    await assert.rejects(curl([`https://api.example.test:${secure.port}/allowed/x`]));
  });
});
