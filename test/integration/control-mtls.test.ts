import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request } from 'node:http';
import { createServer, type Socket, connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { before, describe, it } from 'node:test';
import { connect as http2Connect } from 'node:http2';
import { controlReadiness } from '../../src/control/readiness.js';
import { CONTROL_ERROR_KINDS, encodeMessage } from '../../src/control/messages.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor, type TestSupervisor } from '../harness/control.js';

const A = policyYaml('a.example.test');
const B = policyYaml('b.example.test');
/** A periodic rescan of the policies folder that never comes within a test: edits arrive through the watcher alone. */
const RESCAN_OFF_MS = 3_600_000;

async function adminGet(supervisor: TestSupervisor, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const admin = supervisor.supervisor.adminAddress();
  assert.ok(admin);
  return new Promise((resolve, reject) => {
    const req = request({ host: admin.host, port: admin.port, path, method: 'GET', headers: supervisor.adminHeaders }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    req.on('error', reject);
    req.end();
  });
}

function allowed(store: { current(): import('../../src/policy/types.js').Policy }, host: string): boolean {
  return decide(store.current(), { adapter: 'connect', host, port: 443 }).verdict === 'allow';
}

describe('control channel over real mTLS and HTTP/2', () => {
  let pki: TestPki;
  before(async () => {
    pki = await makeTestPki();
  });

  it('attaches, makes the policy effective, follows an edit as the watcher sees it and shows the status in /v1/sandboxes', async (t) => {
    // The periodic rescan is off for this supervisor: only the folder's watcher can bring the edit.
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A }, policyRescanMs: RESCAN_OFF_MS });
    t.after(() => sup.close());
    const listeners = new Set<(event: object) => void>();
    const events = {
      subscribe(listener: (event: object) => void) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    const c = makeTestClient(pki, { port: sup.port(), events, timeouts: { eventsFlushMs: 20 } });
    t.after(() => c.client.close());
    assert.equal(controlReadiness(c.client.state()).ready, false);
    assert.equal(allowed(c.store, 'a.example.test'), false, 'fail closed before the first policy');
    await c.client.start();
    await c.waitState((s) => s.policy.effective);
    assert.equal(allowed(c.store, 'a.example.test'), true);
    assert.equal(controlReadiness(c.client.state()).ready, true);
    assert.match(controlReadiness(c.client.state()).supervisor, /^connected since /);
    await sup.waitFor((e) => e.type === 'status' && e.detail === 'effective');
    const generation = c.client.state().policy.generation ?? 0;

    await sup.writePolicy('sb-1', B);
    await c.waitState((s) => (s.policy.generation ?? 0) > generation && s.policy.policyHash === parsePolicy(B).hash);
    assert.equal(allowed(c.store, 'b.example.test'), true);
    assert.equal(allowed(c.store, 'a.example.test'), false);
    const newGeneration = c.client.state().policy.generation;
    await sup.waitFor((e) => e.type === 'status' && e.generation === newGeneration);
    const { body } = await adminGet(sup, '/v1/sandboxes');
    const rows = body.sandboxes as Record<string, unknown>[];
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.sandboxId, 'sb-1');
    assert.equal(rows[0]?.instanceId, 'pod-1');
    assert.equal(rows[0]?.attached, true);
    assert.equal(rows[0]?.effectiveGeneration, newGeneration);
    assert.equal(rows[0]?.policyHash, parsePolicy(B).hash);
    assert.equal(rows[0]?.lastStatus, 'effective');
    assert.equal(typeof rows[0]?.sessionAgeMs, 'number');
    assert.ok(c.sink.events.some((e) => e.class === 'CONFIG' && e.activity === 'LOADED'));

    for (let i = 0; i < 3; i += 1) for (const listener of listeners) listener({ class_uid: 4001, message: `event ${i}` });
    const delivered = await sup.waitFor((e) => e.type === 'events');
    assert.match(delivered.detail ?? '', /^3 events, 0 dropped$/);
    assert.equal(sup.supervisor.sandboxes()[0]?.eventsReceived, 3);
  });

  it('re-attaches by itself after a supervisor restart, re-applies nothing and stays ready throughout', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A } });
    t.after(() => sup.close());
    let effectiveOnce = false;
    const problems: string[] = [];
    const c = makeTestClient(pki, {
      port: sup.port(),
      onState(state) {
        if (!effectiveOnce) return;
        if (!controlReadiness(state).ready) problems.push(`not ready in phase ${state.phase}`);
      },
    });
    t.after(() => c.client.close());
    await c.client.start();
    await c.waitState((s) => s.policy.effective && s.phase === 'attached');
    effectiveOnce = true;
    const before = { local: c.store.current().generation, applied: c.sink.events.filter((e) => e.unmapped?.result === 'applied').length };
    const firstSession = c.client.state().sessionId;

    await sup.restart();
    const lost = await c.waitState((s) => s.phase !== 'attached');
    assert.equal(controlReadiness(lost).ready, true, 'last known good keeps enforcing');
    assert.equal(allowed(c.store, 'a.example.test'), true);
    await c.waitState((s) => s.phase === 'attached' && s.sessionId !== firstSession);
    const attached = await sup.waitFor((e) => e.type === 'attached');
    assert.equal(attached.detail, 'held-policy-current', 'the held hash matched: the policy was not re-sent');
    assert.equal(c.store.current().generation, before.local, 'nothing re-applied');
    assert.equal(c.sink.events.filter((e) => e.unmapped?.result === 'applied').length, before.applied);
    assert.ok(c.sink.events.some((e) => e.class === 'NET' && e.activity === 'CLOSE'));
    assert.deepEqual(problems, []);
    assert.equal(allowed(c.store, 'a.example.test'), true);
    const rows = sup.supervisor.sandboxes();
    assert.equal(rows[0]?.attached, true);
  });

  describe('names every failure kind, for real', () => {
    async function firstFailure(c: ReturnType<typeof makeTestClient>) {
      await c.client.start();
      const event = await c.sink.waitFor((e) => e.class === 'NET' && e.activity === 'FAIL');
      await c.client.close();
      const error = event.unmapped?.error as { kind: string; message: string; retryable?: boolean };
      assert.ok(CONTROL_ERROR_KINDS.includes(error.kind as (typeof CONTROL_ERROR_KINDS)[number]));
      assert.ok(error.message.length > 0, 'message is not empty');
      assert.equal(event.severity, error.retryable === false ? 'HIGH' : 'MED', 'a failure is MED; a refusal that retrying cannot fix is HIGH');
      const readiness = controlReadiness(c.client.state());
      assert.equal(readiness.ready, false);
      assert.equal(readiness.lastError?.kind, error.kind);
      assert.ok(readiness.reasons.some((r) => r.includes(error.kind)));
      return error;
    }

    it('dns: a supervisor name that the injected lookup cannot resolve', async () => {
      const lookup = async (name: string): Promise<readonly string[]> => {
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
      };
      const error = await firstFailure(makeTestClient(pki, { host: 'supervisor.invalid', port: 5500, lookup }));
      assert.equal(error.kind, 'dns');
      assert.match(error.message, /supervisor\.invalid/);
    });

    it('connect-refused: a closed port', async () => {
      const server = createServer();
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const { port } = server.address() as { port: number };
      await new Promise((resolve) => server.close(resolve));
      const error = await firstFailure(makeTestClient(pki, { port }));
      assert.equal(error.kind, 'connect-refused');
      assert.match(error.message, /ECONNREFUSED/);
    });

    it('tls: a supervisor certificate that the control CA did not sign', async (t) => {
      const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A } });
      t.after(() => sup.close());
      const error = await firstFailure(makeTestClient(pki, { port: sup.port(), caPem: pki.otherCa.certPem }));
      assert.equal(error.kind, 'tls');
    });

    it('tls-auth: a client certificate from another CA, and an expired one', async (t) => {
      const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A } });
      t.after(() => sup.close());
      const other = await firstFailure(makeTestClient(pki, { port: sup.port(), identity: pki.otherCaClient }));
      assert.equal(other.kind, 'tls-auth');
      const expired = await firstFailure(makeTestClient(pki, { port: sup.port(), identity: pki.expiredClient }));
      assert.equal(expired.kind, 'tls-auth');
    });

    it('refused-by-supervisor: a sandbox with no policy, with the typed reason', async (t) => {
      const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A } });
      t.after(() => sup.close());
      const stranger = await issueCertificate({ ca: pki.ca, kind: 'client', sandboxId: 'sb-stranger', trustDomain: pki.trustDomain, now: Date.now });
      const error = await firstFailure(makeTestClient(pki, { port: sup.port(), identity: stranger, sandboxId: 'sb-stranger' }));
      assert.equal(error.kind, 'refused-by-supervisor');
      assert.match(error.message, /^unknown-sandbox: /);
      const mismatch = await firstFailure(makeTestClient(pki, { port: sup.port(), sandboxId: 'sb-other' }));
      assert.equal(mismatch.kind, 'refused-by-supervisor');
      assert.match(mismatch.message, /^identity-mismatch: /);
    });

    it('http2: a peer that completes TLS with h2 and then sends bytes that are not HTTP/2', async (t) => {
      const server = (await import('node:tls')).createServer(
        { cert: pki.server.certPem, key: pki.server.keyPem, ALPNProtocols: ['h2'], minVersion: 'TLSv1.3' },
        (socket) => {
          socket.on('error', () => undefined);
          socket.end(Buffer.alloc(64, 0xff));
        },
      );
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      // Not awaited: a TLS socket the client dropped mid-stream may never report close to the server.
      t.after(() => server.close());
      const error = await firstFailure(makeTestClient(pki, { port: (server.address() as { port: number }).port }));
      assert.equal(error.kind, 'http2');
    });

    it('protocol: a peer that answers attach with something that is not a control message', async (t) => {
      const server = (await import('node:http2')).createSecureServer({ cert: pki.server.certPem, key: pki.server.keyPem, minVersion: 'TLSv1.3' });
      server.on('stream', (stream) => {
        stream.respond({ ':status': 200 });
        stream.end('{"kind":"admitted","sessionId":42}\n');
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      t.after(() => server.close());
      const error = await firstFailure(makeTestClient(pki, { port: (server.address() as { port: number }).port }));
      assert.equal(error.kind, 'protocol');
    });
  });

  it('withdraws an instance that does not attach within the deadline, frees its state and records why', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A }, config: { attachDeadlineMs: 300 } });
    t.after(() => sup.close());
    const c = makeTestClient(pki, { port: sup.port() });
    await c.client.start();
    await c.waitState((s) => s.policy.effective);
    await c.client.close();
    await sup.waitFor((e) => e.type === 'detached' && e.instanceId === 'pod-1');
    assert.equal(sup.supervisor.sandboxes()[0]?.attached, false);
    assert.equal(await sup.supervisor.expect('sb-1', 'pod-never'), true);
    const withdrawn = await sup.waitFor((e) => e.type === 'withdrawn' && e.instanceId === 'pod-1');
    assert.match(withdrawn.detail ?? '', /attach deadline/);
    await sup.waitFor((e) => e.type === 'withdrawn' && e.instanceId === 'pod-never');
    assert.deepEqual(sup.supervisor.sandboxes(), [], 'instance state freed');
    const records = sup.supervisor.withdrawn();
    assert.deepEqual(records.map((r) => r.instanceId).sort(), ['pod-1', 'pod-never']);
    assert.ok(records.every((r) => r.reason.includes('attach deadline') && typeof r.at === 'number'));
    const { body } = await adminGet(sup, '/v1/sandboxes');
    assert.deepEqual(body.sandboxes, []);
    assert.equal((body.withdrawn as unknown[]).length, 2);
    assert.deepEqual(body.relays, { pending: 0, active: 0 });
    assert.equal(await sup.supervisor.expect('sb-unknown', 'x'), false);
  });

  it('relays bytes both ways to an allowed loopback target and refuses one outside --relay-allow', async (t) => {
    const echo = createServer((socket) => socket.pipe(socket));
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    const echoPort = (echo.address() as { port: number }).port;
    const sockets = new Set<Socket>();
    echo.on('connection', (s) => sockets.add(s));
    t.after(() => {
      for (const s of sockets) s.destroy();
      echo.close();
    });
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A } });
    t.after(() => sup.close());
    const c = makeTestClient(pki, { port: sup.port(), relayAllow: [{ host: '127.0.0.1', port: echoPort }] });
    t.after(() => c.client.close());
    await c.client.start();
    await c.waitState((s) => s.policy.effective);
    await sup.waitFor((e) => e.type === 'status');
    const admin = sup.supervisor.adminAddress();
    assert.ok(admin);

    const openRelay = (port: number) =>
      new Promise<{ socket?: Socket; status?: number; body?: string }>((resolve, reject) => {
        const req = request({
          host: admin.host,
          port: admin.port,
          method: 'POST',
          path: `/v1/sandboxes/sb-1/relay?port=${port}`,
          headers: { ...sup.adminHeaders, connection: 'Upgrade', upgrade: 'boundary-relay' },
        });
        req.on('upgrade', (_res, socket) => resolve({ socket }));
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        });
        req.on('error', reject);
        req.end();
      });

    const opened = await openRelay(echoPort);
    assert.ok(opened.socket, `expected an upgrade, got ${opened.status} ${opened.body}`);
    const relay = opened.socket;
    const payload = Buffer.from('ssh-2.0 hello through the relay\n'.repeat(1000));
    const received: Buffer[] = [];
    let total = 0;
    const done = new Promise<void>((resolve) => {
      relay.on('data', (chunk: Buffer) => {
        received.push(chunk);
        total += chunk.length;
        if (total >= payload.length) resolve();
      });
    });
    relay.write(payload);
    await done;
    assert.deepEqual(Buffer.concat(received), payload);
    relay.destroy();

    const refused = await openRelay(echoPort + 1 === 65_536 ? echoPort - 1 : echoPort + 1);
    assert.equal(refused.status, 403);
    assert.equal(JSON.parse(refused.body ?? '{}').error, 'relay-target-not-allowed');
    const refusal = await c.sink.waitFor((e) => e.class === 'NET' && e.activity === 'REFUSE');
    assert.equal(refusal.detail, 'relay-target-not-allowed');
  });

  it('keeps serving healthy boundaries beside malformed, oversized, silent and vanishing clients', async (t) => {
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': A } });
    t.after(() => sup.close());
    const healthy = makeTestClient(pki, { port: sup.port(), instanceId: 'healthy-1' });
    t.after(() => healthy.client.close());
    await healthy.client.start();
    await healthy.waitState((s) => s.policy.effective);
    const port = sup.port();
    const cleanup: (() => void)[] = [];
    t.after(() => {
      for (const fn of cleanup) fn();
    });

    // Not TLS at all.
    const raw = netConnect({ host: '127.0.0.1', port });
    raw.on('error', () => undefined);
    raw.end('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    cleanup.push(() => raw.destroy());

    // A valid certificate, then silence: no HTTP/2 preface, ever.
    const silent = tlsConnect({ host: '127.0.0.1', port, ca: pki.ca.certPem, cert: pki.client.certPem, key: pki.client.keyPem, ALPNProtocols: ['h2'] });
    silent.on('error', () => undefined);
    await once(silent, 'secureConnect');
    cleanup.push(() => silent.destroy());

    // A real HTTP/2 session that sends garbage, too much, or gives up half way.
    const session = http2Connect(`https://127.0.0.1:${port}`, {
      createConnection: () =>
        tlsConnect({ host: '127.0.0.1', port, ca: pki.ca.certPem, cert: pki.client.certPem, key: pki.client.keyPem, ALPNProtocols: ['h2'] }),
    });
    session.on('error', () => undefined);
    cleanup.push(() => session.destroy());
    const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; body: string }>((resolve) => {
        const stream = session.request({ ':method': 'POST', ':path': path, ...headers });
        let status = 0;
        const chunks: Buffer[] = [];
        stream.on('response', (h) => {
          status = Number(h[':status']);
        });
        stream.on('data', (d: Buffer) => chunks.push(d));
        stream.on('error', () => resolve({ status, body: Buffer.concat(chunks).toString() }));
        stream.on('close', () => resolve({ status, body: Buffer.concat(chunks).toString() }));
        stream.end(body);
      });
    const garbage = await post('/v1/attach', 'this is not json\n');
    assert.equal(garbage.status, 400);
    assert.equal(JSON.parse(garbage.body).code, 'bad-request');
    const wrongKind = await post('/v1/attach', encodeMessage({ kind: 'ack' }));
    assert.equal(wrongKind.status, 400);
    const oversized = await post('/v1/attach', Buffer.alloc(1_200_000, 0x61));
    assert.ok(oversized.status === 413 || oversized.status === 0, `oversized answered ${oversized.status}`);
    const stranger = await post('/v1/status', encodeMessage({ kind: 'status', generation: 1, policyHash: 'x', state: 'effective' }), {
      'boundary-session-id': 'not-a-session',
    });
    assert.equal(stranger.status, 409);
    const half = session.request({ ':method': 'POST', ':path': '/v1/attach' });
    half.on('error', () => undefined);
    half.write('{"kind":"attach","sandboxId":"sb-1",');
    half.close();

    // The healthy boundary still gets pushes, and new boundaries still attach.
    await sup.writePolicy('sb-1', B);
    await healthy.waitState((s) => s.policy.policyHash === parsePolicy(B).hash);
    const late = makeTestClient(pki, { port, instanceId: 'healthy-2' });
    t.after(() => late.client.close());
    await late.client.start();
    await late.waitState((s) => s.policy.effective && s.policy.policyHash === parsePolicy(B).hash);
    assert.equal(sup.supervisor.readiness().ready, true);
    const attached = sup.supervisor.sandboxes().filter((r) => r.attached).map((r) => r.instanceId).sort();
    assert.deepEqual(attached, ['healthy-1', 'healthy-2']);
    assert.ok(sup.logs.some((line) => line.includes('malformed control message refused')));
  });
});
