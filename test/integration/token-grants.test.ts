import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { GrantStatus } from '../../src/grants/runner.js';
import { REFRESH_AT_FRACTION, RETRY_INITIAL_MS, TOKEN_EXPIRY_SKEW_MS } from '../../src/grants/runner.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { testTimers } from '../harness/clock.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { type TokenServer, tokenServer, type VerifyingOrigin, verifyingOrigin } from '../harness/oauth-server.js';
import { type ClientResponse, openTunnel, sendRequest, tlsOverTunnel } from '../harness/proxy-client.js';

// Token grants (docs/credentials.md#token-grants) against oauth2-mock-server, a real RFC 6749 authorization server,
// over HTTPS on loopback; origins accept only JWTs that verify against its keys. Time is the test's fake timers.

const NAMES = ['auth.example.test', 'api.example.test', 'post.example.test', 'user.example.test', 'other.example.test'];
const SECRETS = { billing: 'billing-client-secret-7f3a9c2e', post: 'post+client secret/91b4', user: 'user-client-secret-c0ffee42', refresh: 'initial-refresh-token-5d1e8b' };

function credentialsYaml(auth: number, plain: number, secure: number): string {
  const endpoint = `https://auth.example.test:${auth}/token`;
  return `providers:
  billing:
    endpoints:
      - { host: api.example.test, port: ${plain} }
      - { host: api.example.test, port: ${secure} }
    token_grants:
      BILLING_TOKEN:
        grant_type: client_credentials
        token_endpoint: ${endpoint}
        client_id: billing-client
        client_secret: { value_from: { file: billing-secret } }
        scope: "invoices:read"
        audience: https://api.example.test
  posty:
    endpoints:
      - { host: post.example.test, port: ${plain} }
    token_grants:
      POST_TOKEN:
        grant_type: client_credentials
        token_endpoint: ${endpoint}
        client_id: post-client
        client_secret: { value_from: { file: post-secret } }
        client_auth: client_secret_post
        resource: https://post.example.test
        placement: bearer
  user:
    endpoints:
      - { host: user.example.test, port: ${plain} }
    token_grants:
      USER_TOKEN:
        grant_type: refresh_token
        token_endpoint: ${endpoint}
        client_id: user-client
        client_secret: { value_from: { file: user-secret } }
        refresh_token: { value_from: { file: user-refresh } }
`;
}

function policy(plain: number, secure: number): string {
  const rest = (host: string, ports: number[]) => `      - host: ${host}
        ports: [${ports.join(', ')}]
        protocol: rest
        enforcement: enforce
        access: full
`;
  return `version: 1
network_policies:
  api:
    endpoints:
${rest('api.example.test', [plain, secure])}${rest('post.example.test', [plain])}${rest('user.example.test', [plain])}${rest('other.example.test', [plain])}    binaries: [{ path: "/**" }]
`;
}

let debugState: (() => unknown) | undefined;

/** Polls a state the boundary reaches after real network I/O (the fake timers only start it); bounded. */
async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail(`timed out waiting for ${what}: ${JSON.stringify(debugState?.())}`);
}

function adminGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('token grants against a real OAuth 2.0 server (oauth2-mock-server)', () => {
  let pki: TestPki;
  let auth: TokenServer;
  let plain: VerifyingOrigin;
  let secure: VerifyingOrigin;
  let b: RunningBoundary;
  let dir: string;
  const timers = testTimers();

  const grant = (key: string): GrantStatus => {
    const list = b.boundary.readiness().tokenGrants as GrantStatus[];
    return list.find((g) => g.key === key) as GrantStatus;
  };
  const forward = (host: string, path: string, headers: Record<string, string> = {}): Promise<ClientResponse> =>
    sendRequest({ proxyPort: b.proxyPort, path: `http://${host}:${plain.port}${path}`, headers });
  const bearer = (key: string) => ({ authorization: `Bearer ${PH}${key}` });

  before(async () => {
    pki = await makeTestPki();
    auth = await tokenServer(pki.ca, ['auth.example.test']);
    plain = await verifyingOrigin(auth);
    secure = await verifyingOrigin(auth, pki.ca);
    dir = await mkdtemp(join(tmpdir(), 'boundary-grants-'));
    await writeFile(join(dir, 'billing-secret'), `${SECRETS.billing}\n`);
    await writeFile(join(dir, 'post-secret'), SECRETS.post);
    await writeFile(join(dir, 'user-secret'), SECRETS.user);
    await writeFile(join(dir, 'user-refresh'), SECRETS.refresh);
    const { source } = await credentialsFile(dir, credentialsYaml(auth.port, plain.port, secure.port));
    b = await startBoundary({
      policy: policy(plain.port, secure.port),
      upstreamCaPem: pki.ca.certPem,
      names: Object.fromEntries(NAMES.map((n) => [n, ['127.0.0.1']])),
      credentials: source,
      timers,
    });
    debugState = () => b.boundary.readiness().tokenGrants;
    await until('every grant to hold a token', () => b.boundary.readiness().ready);
  });

  after(async () => {
    for (const s of [...plain.streams, ...secure.streams]) s.destroy();
    await b?.close();
    await Promise.all([plain?.close(), secure?.close(), auth?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  it('fetches client credentials tokens (secret by Basic and by POST, scope, audience, resource)', () => {
    const billing = auth.requests.find((r) => r.body.client_id === undefined && r.grantType === 'client_credentials');
    assert.ok(billing, 'the billing grant asked for a token');
    assert.equal(billing.authorization, `Basic ${Buffer.from(`billing-client:${SECRETS.billing}`).toString('base64')}`);
    assert.equal(billing.body.scope, 'invoices:read');
    assert.equal(billing.body.audience, 'https://api.example.test');
    assert.equal(billing.body.client_secret, undefined);
    const post = auth.requests.find((r) => r.body.client_id === 'post-client');
    assert.ok(post, 'the client_secret_post grant asked for a token');
    assert.equal(post.authorization, undefined);
    assert.equal(post.body.client_secret, SECRETS.post);
    assert.equal(post.body.resource, 'https://post.example.test');
    for (const key of ['BILLING_TOKEN', 'POST_TOKEN', 'USER_TOKEN']) assert.equal(grant(key).state, 'valid');
  });

  it('injects the token on its bound endpoint only, by forward proxy and through an intercepted CONNECT', async () => {
    const ok = await forward('api.example.test', '/x', bearer('BILLING_TOKEN'));
    assert.equal(ok.status, 200, ok.body);
    const claims = plain.seen.at(-1)?.claims;
    assert.equal(claims?.scope, 'invoices:read');

    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    assert.equal(tunnel.status, 200);
    const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem as string });
    const viaConnect = await sendRequest({ socket: tls, path: '/y', headers: { host: `api.example.test:${secure.port}`, ...bearer('BILLING_TOKEN') } });
    assert.equal(viaConnect.status, 200, viaConnect.body);
    assert.ok(secure.seen.at(-1)?.claims, 'the TLS origin verified the token');
    tls.destroy();

    const before = plain.seen.length;
    const elsewhere = await forward('other.example.test', '/x', bearer('BILLING_TOKEN'));
    assert.equal(elsewhere.status, 403);
    assert.equal(JSON.parse(elsewhere.body).error, 'credential_endpoint_mismatch');
    assert.equal(plain.seen.length, before, 'nothing reached the unbound origin');
  });

  it('placement: bearer writes the Authorization header itself', async () => {
    const res = await forward('post.example.test', '/p');
    assert.equal(res.status, 200, res.body);
    assert.equal(plain.seen.at(-1)?.claims?.jti, res.body.slice(3));
  });

  it('redacts the current token from an echoing answer', async () => {
    const res = await forward('api.example.test', '/echo', bearer('BILLING_TOKEN'));
    assert.equal(res.status, 200);
    for (const token of auth.issued.access) assert.ok(!res.body.includes(token), 'the token was echoed back unredacted');
    assert.match(res.body, /\[redacted\]/);
  });

  it('refreshes ahead of expiry; a stream open across the rotation keeps working, the next request carries the new token', async () => {
    // A stream opened with the current token.
    const streamed: string[] = [];
    let streamDone: () => void = () => undefined;
    const ended = new Promise<void>((resolve) => {
      streamDone = resolve;
    });
    const req = httpRequest({ host: '127.0.0.1', port: b.proxyPort, path: `http://api.example.test:${plain.port}/stream`, headers: bearer('BILLING_TOKEN'), agent: false }, (res) => {
      assert.equal(res.statusCode, 200);
      res.on('data', (c: Buffer) => streamed.push(c.toString('utf8')));
      res.on('end', () => streamDone());
    });
    req.end();
    await until('the stream to open', () => plain.streams.length === 1 && streamed.length > 0);
    const streamJti = plain.seen.at(-1)?.claims?.jti;

    const requestsBefore = auth.requests.length;
    const issuedBefore = auth.issued.access.length;
    const first = grant('BILLING_TOKEN').usableForSeconds;
    // Just short of the refresh point nothing is asked; past it, one refresh per grant, while the old token is still sent.
    const usableMs = 3_600_000 - TOKEN_EXPIRY_SKEW_MS;
    timers.advance(usableMs * REFRESH_AT_FRACTION - 1_000);
    assert.equal(auth.requests.length, requestsBefore);
    timers.advance(2_000);
    await until('the refreshes to land', () => auth.issued.access.length === issuedBefore + 3 && grant('BILLING_TOKEN').usableForSeconds > first - 100);
    assert.ok(auth.issued.access.length === issuedBefore + 3);

    (plain.streams[0] as import('node:http').ServerResponse).end('last\n');
    await ended;
    assert.deepEqual(streamed.join(''), 'first\nlast\n');
    const next = await forward('api.example.test', '/x', bearer('BILLING_TOKEN'));
    assert.equal(next.status, 200);
    const nextJti = plain.seen.at(-1)?.claims?.jti;
    assert.notEqual(nextJti, streamJti, 'the next request carries the new token');
    const echoed = await forward('api.example.test', '/echo', bearer('BILLING_TOKEN'));
    assert.ok(!echoed.body.includes(auth.issued.access.at(-1) as string) && !echoed.body.includes(auth.issued.access.at(-3) as string));
  });

  it('refresh_token grant: the rotated refresh token replaces the old one', async () => {
    const refreshes = auth.requests.filter((r) => r.grantType === 'refresh_token').map((r) => r.body.refresh_token);
    assert.equal(refreshes[0], SECRETS.refresh);
    assert.ok(refreshes.length >= 2);
    // Each later request sent the refresh token the previous answer rotated to.
    const issuedToUser = auth.issued.refresh;
    assert.equal(refreshes[1], issuedToUser[0]);
    const res = await forward('user.example.test', '/u', bearer('USER_TOKEN'));
    assert.equal(res.status, 200);
  });

  it('token server down: retries with backoff, /readyz and the metric say so, requests fail closed, then recovery', async () => {
    await auth.stop();
    const usable = grant('BILLING_TOKEN').usableForSeconds * 1_000;
    // To the refresh point: the request fails; the token in hand is still sent and boundary stays ready.
    timers.advance(Math.ceil((usable * REFRESH_AT_FRACTION) / REFRESH_AT_FRACTION - usable * (1 - REFRESH_AT_FRACTION)) + 1);
    await until('a failed refresh', () => grant('BILLING_TOKEN').failures === 1);
    assert.equal(grant('BILLING_TOKEN').state, 'refresh-failing');
    assert.equal(grant('BILLING_TOKEN').lastFailure, 'connect-failed');
    assert.equal((await adminGet(b.adminPort, '/readyz')).status, 200);
    // Backoff doubles: one more attempt after RETRY_INITIAL_MS, the next only after twice that.
    timers.advance(RETRY_INITIAL_MS);
    await until('the second attempt', () => grant('BILLING_TOKEN').failures === 2);
    timers.advance(RETRY_INITIAL_MS);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(grant('BILLING_TOKEN').failures, 2, 'no attempt before the doubled delay');
    timers.advance(RETRY_INITIAL_MS);
    await until('the third attempt', () => grant('BILLING_TOKEN').failures === 3);
    const metrics = (await adminGet(b.adminPort, '/metrics')).body;
    assert.match(metrics, /boundary_token_grant_requests_total\{outcome="connect-failed",provider="billing",key="BILLING_TOKEN"\} [1-9]/);

    // Past the token's usable life: no token, not ready, and the placeholder fails closed.
    // /readyz shows whole seconds: a second more passes the usable end.
    timers.advance((grant('BILLING_TOKEN').usableForSeconds + 1) * 1_000);
    await until('the token to be dropped', () => grant('BILLING_TOKEN').state === 'unavailable');
    const ready = await adminGet(b.adminPort, '/readyz');
    assert.equal(ready.status, 503);
    assert.ok(JSON.parse(ready.body).reasons.includes('token-grant-unavailable'));
    const refused = await forward('api.example.test', '/x', bearer('BILLING_TOKEN'));
    assert.equal(refused.status, 500);
    assert.equal(JSON.parse(refused.body).error, 'credential_unavailable');
    const event = b.log.decisions().at(-1) as unknown as { unmapped?: Record<string, unknown> };
    assert.equal(event.unmapped?.credential_reason, 'token-unavailable');
    assert.match((await adminGet(b.adminPort, '/metrics')).body, /boundary_token_grant_usable_seconds\{provider="billing",key="BILLING_TOKEN"\} 0/);

    await auth.restart();
    timers.advance(60_000);
    await until('recovery', () => b.boundary.readiness().ready);
    assert.equal(grant('BILLING_TOKEN').state, 'valid');
    const back = await forward('api.example.test', '/x', bearer('BILLING_TOKEN'));
    assert.equal(back.status, 200);
  });

  it('never writes the client secrets, refresh tokens or access tokens to logs, events, metrics or /readyz', async () => {
    const metrics = (await adminGet(b.adminPort, '/metrics')).body;
    const ready = (await adminGet(b.adminPort, '/readyz')).body;
    const secrets = [...Object.values(SECRETS), ...auth.issued.access, ...auth.issued.refresh];
    assert.ok(auth.issued.access.length >= 6);
    const written = `${b.log.text()}\n${metrics}\n${ready}`;
    for (const secret of secrets) {
      assert.ok(!written.includes(secret), 'a secret reached a log, event, metric or /readyz');
      assert.ok(!written.includes(Buffer.from(secret).toString('base64')), 'a secret reached a log in base64');
    }
    assert.match(b.log.text(), /token request failed/, 'the failures were logged (without secrets)');
  });
});
