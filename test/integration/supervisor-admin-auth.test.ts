// The supervisor's admin listener needs an operator on every route (token file or operator certificate over
// --admin-tls), follows a Kubernetes-style token rotation, and its metrics listener serves only metrics and
// probes. Real supervisor, control client, TLS and socat; loopback only; no sleeps.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ConnectionOptions } from 'node:tls';
import { recordingIo } from '../harness/cli-io.js';
import { supervisorCommand } from '../../src/app/cli/supervisor.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { createSupervisor } from '../../src/supervisor/supervisor.js';
import { type AdminReply, adminRequest, rawConnect, runSocat, SKIP_SOCAT, statusLine } from '../harness/admin-client.js';
import { makeTestPki, type Pem, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, quietLogger, startTestSupervisor, type TestClient, type TestSupervisor } from '../harness/control.js';
import { type EchoServer, echoServer } from '../harness/servers.js';

const TOKEN_A = 'operator-token-a-0123456789abcdefghijklmnop';
const TOKEN_B = 'operator-token-b-0123456789abcdefghijklmnop';
const WRONG = 'not-the-token-0123456789abcdefghijklmnopqrs';

type Credentials = { readonly headers: Record<string, string>; readonly proxyHeader?: string; readonly cert?: Pem };

describe('supervisor admin listener authentication', () => {
  let pki: TestPki;
  let operator: Pem;
  let sup: TestSupervisor;
  let client: TestClient;
  let secretDir: string;
  let echo: EchoServer;
  let echoPort: number;
  let adminPort: number;
  let metricsPort: number;

  /** A Kubernetes Secret volume: token -> ..data/token, ..data -> ..<stamp>, swapped by renaming ..data. */
  async function writeSecret(stamp: string, token: string): Promise<void> {
    await mkdir(join(secretDir, stamp));
    await writeFile(join(secretDir, stamp, 'token'), `${token}\n`);
    await symlink(stamp, join(secretDir, '..data_tmp'));
    await rename(join(secretDir, '..data_tmp'), join(secretDir, '..data'));
  }

  const tlsFor = (cert?: Pem): ConnectionOptions => ({ ca: pki.ca.certPem, ...(cert === undefined ? {} : { cert: cert.certPem, key: cert.keyPem }) });
  const bearer = (token: string): Credentials => ({ headers: { authorization: `Bearer ${token}` }, proxyHeader: `proxy-authorization: Bearer ${token}` });
  const get = (path: string, creds: Credentials, method = 'GET'): Promise<AdminReply> =>
    adminRequest({ port: adminPort, method, path, headers: creds.headers, tls: tlsFor(creds.cert) });

  /** Every admin route, each resolving to the status it answered (relays are closed once they answer). */
  const ROUTES: Record<string, { ok: number; call: (creds: Credentials) => Promise<{ status: number; challenge?: string }> }> = {
    'GET /v1/sandboxes': { ok: 200, call: (c) => get('/v1/sandboxes', c).then(withChallenge) },
    'PUT expect': { ok: 202, call: (c) => get('/v1/sandboxes/sb-1/instances/pod-expected', c, 'PUT').then(withChallenge) },
    'GET /healthz': { ok: 200, call: (c) => get('/healthz', c).then(withChallenge) },
    'GET /readyz': { ok: 200, call: (c) => get('/readyz', c).then(withChallenge) },
    'GET unknown path': { ok: 404, call: (c) => get('/v1/nope', c).then(withChallenge) },
    'POST relay upgrade': {
      ok: 101,
      call: async (c) => {
        const reply = await adminRequest({
          port: adminPort,
          method: 'POST',
          path: `/v1/sandboxes/sb-1/relay?port=${echoPort}`,
          headers: { ...c.headers, connection: 'Upgrade', upgrade: 'boundary-relay' },
          tls: tlsFor(c.cert),
        });
        reply.socket?.destroy();
        return withChallenge(reply);
      },
    },
    'CONNECT relay': {
      ok: 200,
      call: async (c) => {
        const { head, socket } = await rawConnect(adminPort, `sb-1:${echoPort}`, c.proxyHeader === undefined ? [] : [c.proxyHeader], tlsFor(c.cert));
        socket.destroy();
        const status = Number(statusLine(head).split(' ')[1]);
        const challenge = /\r\nproxy-authenticate: ([^\r]+)/i.exec(head)?.[1];
        return challenge === undefined ? { status } : { status, challenge };
      },
    },
  };

  function withChallenge(reply: AdminReply): { status: number; challenge?: string } {
    const challenge = reply.headers['www-authenticate'];
    return challenge === undefined ? { status: reply.status } : { status: reply.status, challenge };
  }

  before(async () => {
    pki = await makeTestPki();
    operator = await issueCertificate({ ca: pki.ca, kind: 'client', operator: 'alice', trustDomain: pki.trustDomain, now: Date.now });
    echo = await echoServer();
    echoPort = echo.port;
    secretDir = await mkdtemp(join(tmpdir(), 'boundary-admin-secret-'));
    await writeSecret('..2026_01_01_00_00_00.1', TOKEN_A);
    await symlink('..data/token', join(secretDir, 'token'));
    sup = await startTestSupervisor(pki, {
      policies: { 'sb-1': policyYaml('a.example.test') },
      config: { adminTokenFile: join(secretDir, 'token'), adminTls: true, metricsListen: { host: '127.0.0.1', port: 0 }, trustDomain: pki.trustDomain },
    });
    client = makeTestClient(pki, { port: sup.port(), relayAllow: [{ host: '127.0.0.1', port: echoPort }] });
    await client.client.start();
    await client.waitState((s) => s.policy.effective);
    await sup.waitFor((e) => e.type === 'status');
    adminPort = sup.supervisor.adminAddress()?.port ?? 0;
    metricsPort = sup.supervisor.metricsAddress()?.port ?? 0;
  });

  after(async () => {
    await client.client.close();
    await sup.close();
    await echo.close();
    await rm(secretDir, { recursive: true, force: true });
  });

  for (const [route, { ok, call }] of Object.entries(ROUTES)) {
    it(`${route}: 401/407 without credentials, 403 for a wrong token or a sandbox certificate, served for a token or an operator`, async () => {
      const anonymous = await call({ headers: {} });
      if (route === 'CONNECT relay') {
        assert.equal(anonymous.status, 407);
        assert.match(anonymous.challenge ?? '', /Basic realm=/);
      } else {
        assert.equal(anonymous.status, 401);
        assert.match(anonymous.challenge ?? '', /^Bearer realm=/);
      }
      assert.equal((await call(bearer(WRONG))).status, 403, 'wrong token');
      assert.equal((await call({ headers: {}, cert: pki.client })).status, 403, 'sandbox certificate');
      assert.equal((await call({ headers: {}, cert: pki.otherCaClient })).status, 403, 'certificate from another CA');
      assert.equal((await call(bearer(TOKEN_A))).status, ok, 'right token');
      assert.equal((await call({ headers: {}, cert: operator })).status, ok, 'operator certificate');
    });
  }

  it('answers refusals with JSON {error, message} and never echoes the token', async () => {
    const refused = await get('/v1/sandboxes', bearer(WRONG));
    assert.deepEqual(Object.keys(refused.body).sort(), ['error', 'message']);
    assert.equal(refused.body.error, 'forbidden');
    assert.ok(!JSON.stringify(refused.body).includes(WRONG));
    assert.ok(!sup.logs.some((line) => line.includes(TOKEN_A) || line.includes(WRONG)), 'no token in the supervisor log');
  });

  it('takes CONNECT credentials as Authorization Bearer and Proxy-Authorization Basic <any>:<token>', async () => {
    const basic = `proxy-authorization: Basic ${Buffer.from(`anyone:${TOKEN_A}`).toString('base64')}`;
    for (const header of [`authorization: Bearer ${TOKEN_A}`, basic]) {
      const { head, socket } = await rawConnect(adminPort, `sb-1:${echoPort}`, [header], tlsFor());
      socket.destroy();
      assert.equal(statusLine(head), 'HTTP/1.1 200 Connection Established', header.split(':')[0]);
    }
    const wrongBasic = `proxy-authorization: Basic ${Buffer.from(`operator:${WRONG}`).toString('base64')}`;
    const { head, socket } = await rawConnect(adminPort, `sb-1:${echoPort}`, [wrongBasic], tlsFor());
    socket.destroy();
    assert.equal(statusLine(head), 'HTTP/1.1 403 Forbidden');
  });

  it('follows an atomic ..data swap of the token Secret without a restart, and fails closed on a bad one', async () => {
    await writeSecret('..2026_01_01_00_00_00.2', TOKEN_B);
    assert.equal((await get('/v1/sandboxes', bearer(TOKEN_A))).status, 403, 'the old token is revoked');
    assert.equal((await get('/v1/sandboxes', bearer(TOKEN_B))).status, 200, 'the new token works');
    await writeSecret('..2026_01_01_00_00_00.3', 'short');
    assert.equal((await get('/v1/sandboxes', bearer(TOKEN_B))).status, 503, 'a rotation to an unusable token keeps no old token alive');
    assert.equal((await get('/v1/sandboxes', { headers: {}, cert: operator })).status, 200, 'operator certificates still work');
    await writeSecret('..2026_01_01_00_00_00.4', TOKEN_A);
    assert.equal((await get('/v1/sandboxes', bearer(TOKEN_A))).status, 200);
  });

  it('relays for real socat with proxyauth= over a token-only plain HTTP admin listener', { skip: SKIP_SOCAT }, async (t) => {
    const plain = await startTestSupervisor(pki, { policies: { 'sb-1': policyYaml('a.example.test') } });
    t.after(() => plain.close());
    const c = makeTestClient(pki, { port: plain.port(), relayAllow: [{ host: '127.0.0.1', port: echoPort }] });
    t.after(() => c.client.close());
    await c.client.start();
    await plain.waitFor((e) => e.type === 'status');
    const port = plain.supervisor.adminAddress()?.port ?? 0;
    const payload = Buffer.from('SSH-2.0-OpenSSH_9.6 with proxyauth\r\n'.repeat(500));
    const relayed = await runSocat(port, plain.adminToken, `sb-1:${echoPort}`, payload);
    assert.equal(relayed.code, 0, relayed.stderr);
    assert.ok(relayed.stdout.equals(payload));
    const anonymous = await runSocat(port, undefined, `sb-1:${echoPort}`, Buffer.alloc(0));
    assert.notEqual(anonymous.code, 0);
    assert.match(anonymous.stderr, /Proxy Authentication Required/);
    const wrong = await runSocat(port, WRONG, `sb-1:${echoPort}`, Buffer.alloc(0));
    assert.match(wrong.stderr, /Forbidden/);
  });

  it('serves /metrics with process_ and nodejs_ series, /healthz and /readyz on the metrics listener, and nothing else', async () => {
    const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(metrics.status, 200);
    const text = await metrics.text();
    assert.match(text, /^process_cpu_user_seconds_total /m);
    assert.match(text, /^nodejs_heap_size_used_bytes /m);
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status, 200);
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status, 200);
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/v1/sandboxes`, { headers: sup.adminHeaders })).status, 404);
    const connect = await rawConnect(metricsPort, `sb-1:${echoPort}`, [`proxy-authorization: Bearer ${TOKEN_A}`]);
    connect.socket.destroy();
    assert.equal(statusLine(connect.head), 'HTTP/1.1 405 Method Not Allowed');
    const upgrade = await adminRequest({
      port: metricsPort,
      method: 'POST',
      path: `/v1/sandboxes/sb-1/relay?port=${echoPort}`,
      headers: { connection: 'Upgrade', upgrade: 'boundary-relay' },
    });
    assert.equal(upgrade.status, 400);
  });

  it('refuses an operator certificate on the control listener: it names no sandbox', async () => {
    const c = makeTestClient(pki, { port: sup.port(), identity: operator, instanceId: 'pod-operator' });
    await c.client.start();
    const failure = await c.sink.waitFor((e) => e.class === 'NET' && e.activity === 'FAIL');
    await c.client.close();
    const error = failure.unmapped?.error as { kind: string; message: string };
    assert.equal(error.kind, 'refused-by-supervisor');
    assert.match(error.message, /^no-sandbox-identity: /);
  });
});

describe('supervisor admin listener configuration', () => {
  it('refuses to build an admin listener without a token file or admin TLS', async () => {
    const pki = await makeTestPki();
    const config = {
      listen: { host: '127.0.0.1', port: 0 },
      tls: { caPem: pki.ca.certPem, certPem: pki.server.certPem, keyPem: pki.server.keyPem },
      policiesDir: tmpdir(),
      adminListen: { host: '127.0.0.1', port: 0 },
    };
    assert.throws(() => createSupervisor(config, { now: Date.now, logger: quietLogger().logger }), { code: 'ADMIN_AUTH_MISSING' });
  });

  it('fails to start on a token file that is short or missing, before any listener opens', async (t) => {
    const pki = await makeTestPki();
    const dir = await mkdtemp(join(tmpdir(), 'boundary-admin-token-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'short'), 'too-short\n');
    for (const file of ['short', 'missing']) {
      const supervisor = createSupervisor(
        {
          listen: { host: '127.0.0.1', port: 0 },
          tls: { caPem: pki.ca.certPem, certPem: pki.server.certPem, keyPem: pki.server.keyPem },
          policiesDir: dir,
          adminListen: { host: '127.0.0.1', port: 0 },
          adminTokenFile: join(dir, file),
        },
        { now: Date.now, logger: quietLogger().logger },
      );
      await assert.rejects(supervisor.start(), { code: 'ADMIN_TOKEN_INVALID' }, file);
      assert.equal(supervisor.adminAddress(), undefined);
      await supervisor.close();
    }
  });

  it('exits 2 from the CLI when the default loopback admin listener would have no authentication', async () => {
    const run = async (argv: string[]): Promise<{ code: number; stderr: string }> => {
      const recording = recordingIo(tmpdir());
      return { code: await supervisorCommand(argv, recording.io), stderr: recording.stderr() };
    };
    const bare = await run(['--tls-dir', 'tls', '--policies', 'policies']);
    assert.equal(bare.code, 2);
    assert.match(bare.stderr, /admin listener \(127\.0\.0\.1:9902\) needs --admin-token-file FILE, --admin-tls or both.*\(USAGE\)/);
    // --flag=value as Kubernetes manifests write it; the run gets past the flags and fails on the missing TLS folder.
    const manifest = await run(['--tls-dir=missing-tls', '--policies=policies', '--admin-listen=127.0.0.1:9902', '--admin-token-file=token', '--metrics-listen=0.0.0.0:9090']);
    assert.equal(manifest.code, 1, manifest.stderr);
    assert.match(manifest.stderr, /\(ENOENT\)/);
    assert.equal((await run(['--tls-dir', 'tls', '--policies', 'p', '--admin-listen', 'off', '--admin-tls'])).code, 2);
  });
});
