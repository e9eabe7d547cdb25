// Regression of issue 31, "Current OpenShell policies load and work": the `path` of an endpoint without a protocol
// restricts no traffic but narrows where its credential_binding applies (docs/policy.md#endpoint-path-selector).
// boundary bound the provider on every path of such an endpoint, so a placeholder sent to /v2 was swapped for the
// secret though the endpoint names /v1/** only. Now: /v1 gets the secret, /v2 with a placeholder is refused 403
// credential_endpoint_mismatch with nothing sent, /v2 without one goes. curl as the client, forward HTTP and
// CONNECT with TLS interception; an echo origin on loopback.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

const run = promisify(execFile);
const SECRET = 'l4-path-secret-31';

describe('issue 31: an L4 endpoint path narrows its credential binding, not its traffic', () => {
  let plain: Origin;
  let secure: Origin;
  let b: RunningBoundary;
  let source: FileCredentialSource;
  let dir: string;
  let caFile: string;

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca });
    dir = await mkdtemp(join(tmpdir(), 'boundary-l4-path-'));
    source = (await credentialsFile(dir, `providers:\n  github:\n    env:\n      GH_TOKEN: "${SECRET}"\n`)).source;
    b = await startBoundary({
      upstreamCaPem: pki.ca.certPem,
      credentials: source,
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        ports: [${plain.port}, ${secure.port}]
        path: /v1/**
        credential_binding: { provider: github }
        allow_uninspected_credentials: true
    binaries: [{ path: "/**" }]
`,
    });
    caFile = join(dir, 'boundary-ca.pem');
    await writeFile(caFile, b.caPem ?? '');
  });

  after(async () => {
    await b?.close();
    await source?.close();
    await Promise.all([plain?.close(), secure?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  async function curl(transport: 'forward' | 'connect', path: string, headers: readonly string[]): Promise<{ code: number; body: Record<string, unknown> }> {
    const url = transport === 'forward' ? `http://api.example.test:${plain.port}${path}` : `https://api.example.test:${secure.port}${path}`;
    const tls = transport === 'connect' ? ['--cacert', caFile] : [];
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '-w', '\n%{http_code}', ...tls, ...headers.flatMap((h) => ['-H', h]), url]);
    const cut = stdout.lastIndexOf('\n');
    return { code: Number(stdout.slice(cut + 1)), body: JSON.parse(stdout.slice(0, cut)) as Record<string, unknown> };
  }

  const seen = (): Origin['seen'] => [...plain.seen, ...secure.seen];
  const bearer = `Authorization: Bearer ${PH}GH_TOKEN`;

  for (const transport of ['forward', 'connect'] as const) {
    it(`swaps the placeholder on the endpoint's path (${transport})`, async () => {
      const reply = await curl(transport, '/v1/repos', [bearer]);
      assert.equal(reply.code, 200, JSON.stringify(reply.body));
      // The origin's echo of the secret is redacted on its way back: read what the origin received.
      assert.equal(seen().at(-1)?.headers.authorization, `Bearer ${SECRET}`);
    });

    it(`refuses the placeholder outside the endpoint's path, sending nothing (${transport})`, async () => {
      const before = seen().length;
      const reply = await curl(transport, '/v2/repos', [bearer]);
      assert.equal(reply.code, 403, JSON.stringify(reply.body));
      assert.equal(reply.body.error, 'credential_endpoint_mismatch');
      assert.equal(seen().length, before);
      assert.ok(!b.log.text().includes(SECRET));
    });

    it(`lets a request without a placeholder through outside the path: the path is no access rule (${transport})`, async () => {
      const reply = await curl(transport, '/v2/repos', []);
      assert.equal(reply.code, 200, JSON.stringify(reply.body));
      assert.equal(reply.body.url, '/v2/repos');
    });
  }
});
