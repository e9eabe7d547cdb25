// Token grants in attached mode (docs/supervisor.md#token-grants): a real supervisor delivers each grant's definition,
// client secret and refresh token only to the sandbox whose policy binds its provider; that real attached boundary
// fetches, refreshes and uses the token against oauth2-mock-server over HTTPS; a changed grant restarts (its old token
// dropped), a withdrawn one stops; no secret or token reaches a log, event, metric, state file or API answer.

import assert from 'node:assert/strict';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { canonicalPlaceholder } from '../../src/credentials/placeholder.js';
import type { GrantStatus } from '../../src/grants/runner.js';
import { REFRESH_AT_FRACTION, RETRY_INITIAL_MS, TOKEN_EXPIRY_SKEW_MS } from '../../src/grants/runner.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { parsePolicy } from '../../src/policy/parse.js';
import type { SupervisorConfig } from '../../src/supervisor/supervisor.js';
import { type AttachedBoundary, startAttached } from '../harness/attached-boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { testTimers } from '../harness/clock.js';
import { startTestSupervisor, WAIT_TIMEOUT_MS } from '../harness/control.js';
import { withStateDir } from '../harness/state-dir.js';
import { pollUntil, type TokenServer, tokenServer, type VerifyingOrigin, verifyingOrigin } from '../harness/oauth-server.js';
import { type PostgresServer, postgresSkip, startPostgres } from '../harness/postgres.js';
import { sendRequest } from '../harness/proxy-client.js';
import { textsUnder } from '../harness/files-under.js';

const NAMES = ['auth.example.test', 'api.example.test', 'user.example.test', 'other.example.test'];
const SECRETS = { billing: 'att-billing-secret-4c2e91', rotated: 'att-billing-secret-rotated-77d0a3', user: 'att-user-secret-1b8f6d', refresh: 'att-refresh-token-e93a05' };

function credentialsYaml(auth: number, origin: number): string {
  const endpoint = `https://auth.example.test:${auth}/token`;
  return `providers:
  billing:
    endpoints: [{ host: api.example.test, port: ${origin} }]
    token_grants:
      BILLING_TOKEN:
        grant_type: client_credentials
        token_endpoint: ${endpoint}
        client_id: billing-client
        client_secret: { value_from: { file: billing-secret } }
        scope: "invoices:read"
  user:
    endpoints: [{ host: user.example.test, port: ${origin} }]
    token_grants:
      USER_TOKEN:
        grant_type: refresh_token
        token_endpoint: ${endpoint}
        client_id: user-client
        client_secret: { value_from: { file: user-secret } }
        refresh_token: { value_from: { file: user-refresh } }
        placement: bearer
`;
}

function policy(origin: number, hosts: readonly string[]): string {
  const endpoints = hosts.map((host) => `      - host: ${host}\n        port: ${origin}\n        protocol: rest\n        enforcement: enforce\n        access: full\n`);
  return `version: 1\nnetwork_policies:\n  api:\n    endpoints:\n${endpoints.join('')}    binaries: [{ path: "/**" }]\n`;
}

const grantsOf = (b: AttachedBoundary): GrantStatus[] => (b.boundary.readiness().tokenGrants as GrantStatus[] | undefined) ?? [];
const stateOf = (b: AttachedBoundary, key: string) => grantsOf(b).find((g) => g.key === key)?.state;
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;


async function scenario(t: TestContext, pki: TestPki, auth: TokenServer, origin: VerifyingOrigin, store: Partial<SupervisorConfig>): Promise<void> {
  const port = origin.port;
  const dir = await mkdtemp(join(tmpdir(), 'boundary-attached-grants-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const write = async (name: string, text: string) => {
    await writeFile(join(dir, `.${name}.tmp`), text);
    await rename(join(dir, `.${name}.tmp`), join(dir, name));
  };
  await write('billing-secret', SECRETS.billing);
  await write('user-secret', SECRETS.user);
  await write('user-refresh', SECRETS.refresh);
  await write('credentials.yaml', credentialsYaml(auth.port, port));
  await writeFile(join(dir, 'upstream-ca.pem'), pki.ca.certPem);
  const bothHosts = policy(port, ['api.example.test', 'user.example.test']);
  const sup = await startTestSupervisor(pki, {
    policies: { 'sb-a': bothHosts, 'sb-b': policy(port, ['other.example.test']) },
    config: { credentialsFile: join(dir, 'credentials.yaml'), ...store },
  });
  t.after(() => sup.close());
  const firstRequest = auth.requests.length;
  const timers = testTimers();
  const names = Object.fromEntries(NAMES.map((name) => [name, ['127.0.0.1']]));
  const attach = async (sandboxId: string): Promise<AttachedBoundary> => {
    const identity = { ...pki, sandboxId, client: await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId, trustDomain: pki.trustDomain, now: Date.now }) };
    const b = await startAttached(identity, sup, { names, timers, config: { upstreamCa: join(dir, 'upstream-ca.pem') } });
    t.after(() => b.close());
    await b.waitState((s) => s.policy.effective);
    return b;
  };
  const a = await attach('sb-a');
  const b = await attach('sb-b');
  const send = (on: AttachedBoundary, host: string, key?: string) =>
    sendRequest({ proxyPort: on.proxyPort, path: `http://${host}:${port}/x`, headers: key === undefined ? {} : { authorization: `Bearer ${canonicalPlaceholder(key)}` } });

  // sb-a runs both grants from what the supervisor delivered; sb-b, whose policy binds neither provider, has none.
  await pollUntil('sb-a to hold both tokens', () => a.boundary.readiness().ready, () => grantsOf(a));
  assert.deepEqual(grantsOf(a).map((g) => [g.key, g.state]).sort(), [['BILLING_TOKEN', 'valid'], ['USER_TOKEN', 'valid']]);
  assert.deepEqual(grantsOf(b), []);
  assert.deepEqual([...b.boundary.credentials.current().providers.keys()], []);
  const asked = auth.requests.slice(firstRequest);
  assert.equal(asked.length, 2, 'one token request per grant, from sb-a only');
  assert.equal(asked.find((r) => r.grantType === 'client_credentials')?.authorization, basic('billing-client', SECRETS.billing));
  const refreshing = asked.find((r) => r.grantType === 'refresh_token');
  assert.equal(refreshing?.body.refresh_token, SECRETS.refresh);
  assert.equal(refreshing?.authorization, basic('user-client', SECRETS.user));

  const billed = await send(a, 'api.example.test', 'BILLING_TOKEN');
  assert.equal(billed.status, 200, billed.body);
  assert.equal(origin.seen.at(-1)?.claims?.scope, 'invoices:read');
  const placed = await send(a, 'user.example.test');
  assert.equal(placed.status, 200, placed.body);
  assert.equal(placed.body, `ok ${String(origin.seen.at(-1)?.claims?.jti)}`);
  const seen = origin.seen.length;
  const elsewhere = await send(b, 'other.example.test', 'BILLING_TOKEN');
  assert.equal(elsewhere.status, 500, elsewhere.body);
  assert.equal(JSON.parse(elsewhere.body).error, 'credential_unavailable');
  assert.equal(origin.seen.length, seen, 'sb-b sent nothing upstream');

  // Refresh ahead of expiry on the boundary's own (test) clock: the next request carries the new token.
  const before = auth.requests.length;
  timers.advance((auth.expiresIn * 1_000 - TOKEN_EXPIRY_SKEW_MS) * REFRESH_AT_FRACTION + 1);
  await pollUntil('both grants to refresh', () => auth.requests.length === before + 2 && grantsOf(a).every((g) => g.state === 'valid'));
  const refreshed = await send(a, 'api.example.test', 'BILLING_TOKEN');
  assert.equal(refreshed.status, 200, refreshed.body);
  assert.equal(refreshed.body, `ok ${String(origin.seen.at(-1)?.claims?.jti)}`);
  assert.notEqual(refreshed.body, billed.body, 'a new token after the refresh');

  // A changed client secret on the supervisor restarts the grant: its old token is dropped at once (the token server
  // is down, so the placeholder fails closed), and the retry uses the new secret.
  await auth.stop();
  const revision = a.boundary.credentials.current().revision;
  await write('billing-secret', SECRETS.rotated);
  await pollUntil('the old token to be dropped', () => stateOf(a, 'BILLING_TOKEN') !== 'valid' && a.boundary.credentials.current().revision > revision);
  const dropped = await send(a, 'api.example.test', 'BILLING_TOKEN');
  assert.equal(dropped.status, 500, dropped.body);
  assert.equal(JSON.parse(dropped.body).error, 'credential_unavailable');
  assert.equal(stateOf(a, 'USER_TOKEN'), 'valid', 'the unchanged grant keeps its token');
  await auth.restart();
  const restarted = auth.requests.length;
  timers.advance(RETRY_INITIAL_MS);
  await pollUntil('the changed grant to hold a token again', () => stateOf(a, 'BILLING_TOKEN') === 'valid', () => grantsOf(a));
  assert.equal(auth.requests.slice(restarted).find((r) => r.grantType === 'client_credentials')?.authorization, basic('billing-client', SECRETS.rotated));
  assert.equal((await send(a, 'api.example.test', 'BILLING_TOKEN')).status, 200);

  // A policy edit that no longer reaches user.example.test withdraws the user grant: its refresh stops, its key is gone.
  const narrowed = policy(port, ['api.example.test']);
  await sup.writePolicy('sb-a', narrowed);
  await a.waitState((s) => s.policy.policyHash === parsePolicy(narrowed).hash);
  await pollUntil('the user grant to be withdrawn', () => stateOf(a, 'USER_TOKEN') === undefined, () => grantsOf(a));
  assert.equal(a.boundary.credentials.current().hasKey('USER_TOKEN'), false);
  const quiet = auth.requests.filter((r) => r.grantType === 'refresh_token').length;
  const billingAsked = () => auth.requests.filter((r) => r.grantType === 'client_credentials').length;
  const billingBefore = billingAsked();
  timers.advance(auth.expiresIn * 1_000);
  await pollUntil('the billing grant to refresh', () => billingAsked() > billingBefore);
  assert.equal(auth.requests.filter((r) => r.grantType === 'refresh_token').length, quiet, 'no refresh of a withdrawn grant');

  // Nothing secret left the boundaries or the supervisor.
  const secrets = [...Object.values(SECRETS), ...auth.issued.access, ...auth.issued.refresh];
  const admin = sup.supervisor.adminAddress()?.port;
  const answers = await Promise.all(
    ['/v1/sandboxes', '/readyz'].map(async (path) => (await fetch(`http://127.0.0.1:${admin}${path}`, { headers: sup.adminHeaders, signal: AbortSignal.timeout(WAIT_TIMEOUT_MS) })).text()),
  );
  const sinks: [string, string][] = [
    ['sb-a log and events', a.log.text()],
    ['sb-b log and events', b.log.text()],
    ['sb-a /readyz', JSON.stringify((await a.get('/readyz')).body)],
    ['sb-a /metrics', await (await fetch(`http://127.0.0.1:${a.adminPort}/metrics`, { signal: AbortSignal.timeout(WAIT_TIMEOUT_MS) })).text()],
    ['supervisor log', sup.logs.join('\n')],
    ['supervisor admin answers', answers.join('\n')],
    ['supervisor state', store.stateDir === undefined ? '' : (await textsUnder(store.stateDir)).join('\n')],
  ];
  for (const [where, text] of sinks) {
    for (const secret of secrets) assert.ok(!text.includes(secret), `a secret or token in ${where}`);
  }
}

describe('token grants in attached mode: delivered by the supervisor, run by the boundary that binds them', () => {
  let pki: TestPki;
  let auth: TokenServer;
  let origin: VerifyingOrigin;
  before(async () => {
    pki = await makeTestPki();
    auth = await tokenServer(pki.ca, ['auth.example.test']);
    origin = await verifyingOrigin(auth);
  });
  after(async () => {
    await origin?.close();
    await auth?.close();
  });

  it('with the memory store', async (t) => {
    await scenario(t, pki, auth, origin, {});
  });

  it('with the file store (--state-dir)', async (t) => {
    await withStateDir(t, 'boundary-attached-grants-state-', (stateDir) => scenario(t, pki, auth, origin, { stateDir }));
  });

  describe('with the PostgreSQL store', { skip: postgresSkip() }, () => {
    let server: PostgresServer | undefined;
    before(async () => {
      server = await startPostgres();
    });
    after(() => server?.stop());

    it('two sandboxes on one database', async (t) => {
      if (server === undefined) throw new Error('the PostgreSQL server did not start');
      await scenario(t, pki, auth, origin, { databaseUrl: await server.createDatabase('attached_grants') });
    });
  });
});
