// Issue 31: with `--peer-policy-header ryno`, boundary's denials name their policy in X-Ryno-Policy beside
// X-Boundary-Policy (curl, forward HTTP/1.1 and HTTP/2 through an intercepted CONNECT); without it, only the latter.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

const run = promisify(execFile);
const NAMES = { 'api.example.test': ['127.0.0.1'] } as const;
const policy = (plain: number, secure: number): string => `version: 1
network_policies:
  api_rules:
    endpoints:
      - host: api.example.test
        ports: [${plain}, ${secure}]
        protocol: rest
        enforcement: enforce
        rules: [{ allow: { method: GET, path: /ok } }]
    binaries: [{ path: "/**" }]
`;

/** The response head's fields by lower-cased name (curl -D -). */
function fields(head: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of head.split('\r\n').slice(1)) {
    const at = line.indexOf(':');
    if (at > 0) out.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim());
  }
  return out;
}

describe('issue 31: the peer policy header on denials', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let secure: Origin;
  let withPeer: RunningBoundary;
  let without: RunningBoundary;
  let caFile: string;

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca, names: ['api.example.test'] });
    withPeer = await startBoundary({ policy: policy(plain.port, secure.port), names: NAMES, upstreamCaPem: pki.ca.certPem, peerPolicyHeader: 'ryno' });
    without = await startBoundary({ policy: policy(plain.port, secure.port), names: NAMES, upstreamCaPem: pki.ca.certPem });
    caFile = join(withPeer.dir, 'ca.pem');
    await writeFile(caFile, `${withPeer.caPem ?? ''}${pki.ca.certPem}`);
  });

  after(async () => {
    await Promise.all([withPeer?.close(), without?.close()]);
    await Promise.all([plain?.close(), secure?.close()]);
  });

  const head = async (b: RunningBoundary, url: string, extra: string[] = []): Promise<Map<string, string>> => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, '--cacert', caFile, '-o', '/dev/null', '-D', '-', ...extra, url], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      encoding: 'utf8',
    });
    return fields(stdout);
  };

  it('forward HTTP/1.1: X-Ryno-Policy beside X-Boundary-Policy', async () => {
    const got = await head(withPeer, `http://api.example.test:${plain.port}/denied`);
    assert.equal(got.get('x-boundary-policy'), 'api_rules');
    assert.equal(got.get('x-ryno-policy'), 'api_rules');
  });

  it('HTTP/2 through an intercepted CONNECT: the same two fields', async () => {
    const got = await head(withPeer, `https://api.example.test:${secure.port}/denied`, ['--http2']);
    assert.equal(got.get('x-boundary-policy'), 'api_rules');
    assert.equal(got.get('x-ryno-policy'), 'api_rules');
  });

  it('by default only X-Boundary-Policy', async () => {
    const got = await head(without, `http://api.example.test:${plain.port}/denied`);
    assert.equal(got.get('x-boundary-policy'), 'api_rules');
    assert.equal(got.has('x-ryno-policy'), false);
    assert.equal(got.has('x-openshell-policy'), false);
  });
});
