// The token-grant part of the credentials canary (test/integration/credentials-canary.test.ts): a boundary with a
// client credentials grant and a refresh token grant against oauth2-mock-server, driven through every path that
// touches a token (bound, echoed, mismatched, intercepted CONNECT, refreshes, the token server down and back), so the
// canary can search every sink for the client secret, each refresh token and each access token issued.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REFRESH_AT_FRACTION, RETRY_MAX_MS, TOKEN_EXPIRY_SKEW_MS } from '../../src/grants/runner.js';
import { type RunningBoundary, startBoundary } from './boundary.js';
import { makeTestPki } from './certs.js';
import { testTimers } from './clock.js';
import { credentialsFile, PH } from './credential-parts.js';
import { pollUntil, tokenServer, verifyingOrigin } from './oauth-server.js';
import { type ClientResponse, openTunnel, sendRequest, tlsOverTunnel } from './proxy-client.js';

const NAMES = ['auth.example.test', 'api.example.test', 'user.example.test', 'other.example.test'];

export interface GrantCanaryRun {
  readonly b: RunningBoundary;
  readonly responses: readonly ClientResponse[];
  /** The client secret, the first refresh token, and every access and refresh token the server issued. */
  readonly secrets: readonly string[];
  close(): Promise<void>;
}

export async function grantCanary(options: { format: 'json' | 'shorthand'; secret: string; refresh: string }): Promise<GrantCanaryRun> {
  const pki = await makeTestPki();
  const auth = await tokenServer(pki.ca, ['auth.example.test']);
  // Short-lived tokens: the refreshes below need only a few minutes of the fake clock.
  auth.expiresIn = 120;
  const plain = await verifyingOrigin(auth);
  const secure = await verifyingOrigin(auth, pki.ca);
  // Outside the boundary's state dir, which the canary searches.
  const dir = await mkdtemp(join(tmpdir(), 'boundary-grant-canary-'));
  await writeFile(join(dir, 'secret'), options.secret);
  await writeFile(join(dir, 'refresh'), options.refresh);
  const endpoint = `https://auth.example.test:${auth.port}/token`;
  const { source } = await credentialsFile(
    dir,
    `providers:
  billing:
    endpoints: [{ host: api.example.test, port: ${plain.port} }, { host: api.example.test, port: ${secure.port} }]
    token_grants:
      BILLING_TOKEN:
        grant_type: client_credentials
        token_endpoint: ${endpoint}
        client_id: canary-billing
        client_secret: { value_from: { file: secret } }
        client_auth: client_secret_post
  user:
    endpoints: [{ host: user.example.test, port: ${plain.port} }]
    token_grants:
      USER_TOKEN:
        grant_type: refresh_token
        token_endpoint: ${endpoint}
        client_id: canary-user
        refresh_token: { value_from: { file: refresh } }
        placement: bearer
`,
  );
  const rest = (host: string, ports: number[]) =>
    `      - host: ${host}\n        ports: [${ports.join(', ')}]\n        protocol: rest\n        enforcement: enforce\n        access: full\n`;
  const timers = testTimers();
  const b = await startBoundary({
    policy: `version: 1\nnetwork_policies:\n  api:\n    endpoints:\n${rest('api.example.test', [plain.port, secure.port])}${rest('user.example.test', [plain.port])}${rest('other.example.test', [plain.port])}    binaries: [{ path: "/**" }]\n`,
    upstreamCaPem: pki.ca.certPem,
    names: Object.fromEntries(NAMES.map((n) => [n, ['127.0.0.1']])),
    credentials: source,
    logFormat: options.format,
    timers,
  });
  const close = async () => {
    await b.close();
    await Promise.all([plain.close(), secure.close(), auth.close()]);
    await rm(dir, { recursive: true, force: true });
  };
  const responses: ClientResponse[] = [];
  const forward = async (host: string, path: string, key?: string): Promise<number> => {
    const headers = key === undefined ? {} : { authorization: `Bearer ${PH}${key}` };
    const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://${host}:${plain.port}${path}`, headers });
    responses.push(response);
    return response.status;
  };
  const expect = (what: string, status: number, wanted: number) => {
    if (status !== wanted) throw new Error(`${what}: ${status}, expected ${wanted}`);
  };
  const matrix = async () => {
    expect('bound', await forward('api.example.test', '/x', 'BILLING_TOKEN'), 200);
    expect('echoed', await forward('api.example.test', '/echo', 'BILLING_TOKEN'), 200);
    expect('placed', await forward('user.example.test', '/echo'), 200);
    expect('mismatched', await forward('other.example.test', '/x', 'BILLING_TOKEN'), 403);
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem as string });
    const inside = await sendRequest({ socket: tls, path: '/echo', headers: { host: `api.example.test:${secure.port}`, authorization: `Bearer ${PH}BILLING_TOKEN` } });
    tls.destroy();
    responses.push(inside);
    expect('intercepted', inside.status, 200);
  };
  try {
    await pollUntil('both grants to hold a token', () => b.boundary.readiness().ready);
    await matrix();
    // Two refreshes (a rotated refresh token each time), the matrix after each.
    for (let round = 0; round < 2; round++) {
      const asked = auth.requests.length;
      timers.advance((auth.expiresIn * 1_000 - TOKEN_EXPIRY_SKEW_MS) * REFRESH_AT_FRACTION + 1_000);
      await pollUntil('the refreshes', () => auth.requests.length >= asked + 2 && b.boundary.readiness().ready);
      await matrix();
    }
    // The token server down until every token expired: failures logged, requests fail closed, then recovery.
    await auth.stop();
    const failed = b.log.text().length;
    timers.advance(auth.expiresIn * 1_000);
    await pollUntil('the tokens to be dropped', () => !b.boundary.readiness().ready);
    expect('unavailable', await forward('api.example.test', '/x', 'BILLING_TOKEN'), 500);
    expect('unavailable placement', await forward('user.example.test', '/x'), 401);
    if (b.log.text().length === failed) throw new Error('the failed token requests were not logged');
    await auth.restart();
    timers.advance(RETRY_MAX_MS);
    await pollUntil('recovery', () => b.boundary.readiness().ready);
    await matrix();
  } catch (err) {
    await close();
    throw err;
  }
  return { b, responses, secrets: [options.secret, options.refresh, ...auth.issued.access, ...auth.issued.refresh], close };
}
