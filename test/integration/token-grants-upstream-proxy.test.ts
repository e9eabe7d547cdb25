// A token grant's token endpoint is an upstream like any other: with --upstream-proxy set, boundary fetches the
// token through a CONNECT to the proxy (a real squid started here) by the validated address, never directly, and
// the token it got is injected at the bound endpoint as without a proxy (docs/credentials.md#token-grants).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { type TokenServer, tokenServer, type VerifyingOrigin, verifyingOrigin } from '../harness/oauth-server.js';
import { sendRequest } from '../harness/proxy-client.js';
import { type AccessLine, type Squid, startSquid } from '../harness/squid.js';

/** Bounds the wait for the grant's first token (one fetch through squid; normally well under a second). */
const READY_WAIT_MS = 30_000;
const POLL_MS = 50;

describe('token grants: the token endpoint is reached through the upstream proxy', () => {
  let auth: TokenServer;
  let origin: VerifyingOrigin;
  let squid: Squid;
  let b: RunningBoundary;
  let dir: string;

  before(async () => {
    const pki = await makeTestPki();
    auth = await tokenServer(pki.ca, ['auth.example.test']);
    origin = await verifyingOrigin(auth);
    squid = await startSquid({ ports: [auth.port, origin.port] });
    dir = await mkdtemp(join(tmpdir(), 'boundary-grants-proxy-'));
    await writeFile(join(dir, 'secret'), 'proxied-client-secret-4e1d');
    const { source } = await credentialsFile(
      dir,
      `providers:
  billing:
    endpoints:
      - { host: api.example.test, port: ${origin.port} }
    token_grants:
      BILLING_TOKEN:
        grant_type: client_credentials
        token_endpoint: https://auth.example.test:${auth.port}/token
        client_id: billing-client
        client_secret: { value_from: { file: secret } }
`,
    );
    b = await startBoundary({
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${origin.port}, protocol: rest, enforcement: enforce, access: full }
    binaries: [{ path: "/**" }]
`,
      upstreamCaPem: pki.ca.certPem,
      names: { 'auth.example.test': ['127.0.0.1'], 'api.example.test': ['127.0.0.1'] },
      credentials: source,
      upstreamProxy: { upstreamProxy: squid.url },
    });
    const until = Date.now() + READY_WAIT_MS;
    while (!b.boundary.readiness().ready && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  });

  after(async () => {
    await b?.close();
    await squid?.close();
    await Promise.all([origin?.close(), auth?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('fetches the token through a CONNECT to the validated address and injects it at the bound endpoint', async () => {
    assert.equal(b.boundary.readiness().ready, true, `the grant holds a token: ${JSON.stringify(b.boundary.readiness().tokenGrants)}`);
    const tunnel = (l: AccessLine) => l.method === 'CONNECT' && l.url === `127.0.0.1:${auth.port}` && l.result === 'TCP_TUNNEL/200';
    await squid.waitForLines(tunnel);
    assert.ok(!b.dials.some((d) => d.port === auth.port && d.viaProxy !== true), 'the token endpoint was never dialled directly');
    assert.equal(auth.requests.length, 1, 'one token request');
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1`, headers: { authorization: `Bearer ${PH}BILLING_TOKEN` } });
    assert.equal(res.status, 200, 'the origin verified the token the grant fetched');
  });
});
