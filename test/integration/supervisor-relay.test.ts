// Relays through the supervisor's admin listener asked for with HTTP CONNECT, driven by real socat
// (`socat - PROXY:127.0.0.1:<sandbox>:<port>,proxyport=<admin>,proxyauth=op:<token>`) and by raw CONNECT
// requests to read the exact status lines. Real supervisor and control client over mTLS; loopback only; no sleeps.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { rawConnect, runSocat, SKIP_SOCAT, statusLine } from '../harness/admin-client.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor, type TestClient, type TestSupervisor } from '../harness/control.js';

describe('supervisor relays over HTTP CONNECT (socat PROXY, ssh ProxyCommand)', () => {
  let pki: TestPki;
  let sup: TestSupervisor;
  let client: TestClient;
  let adminPort: number;
  let auth: string;
  let echoPort: number;
  let refusedPort: number;
  const echoSockets = new Set<Socket>();
  const echo = createServer((socket) => {
    echoSockets.add(socket);
    socket.on('close', () => echoSockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.pipe(socket);
  });

  before(async () => {
    pki = await makeTestPki();
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    echoPort = (echo.address() as { port: number }).port;
    refusedPort = echoPort === 65_535 ? echoPort - 1 : echoPort + 1;
    sup = await startTestSupervisor(pki, { policies: { [pki.sandboxId]: policyYaml('a.example.test') } });
    client = makeTestClient(pki, { port: sup.port(), relayAllow: [{ host: '127.0.0.1', port: echoPort }] });
    await client.client.start();
    await client.waitState((s) => s.policy.effective);
    await sup.waitFor((e) => e.type === 'status');
    const admin = sup.supervisor.adminAddress();
    assert.ok(admin);
    adminPort = admin.port;
    auth = `proxy-authorization: Bearer ${sup.adminToken}`;
  });

  after(async () => {
    await client.client.close();
    await sup.close();
    for (const socket of echoSockets) socket.destroy();
    echo.close();
  });

  it('carries bytes both ways for real socat through CONNECT <sandbox>:<port>', { skip: SKIP_SOCAT }, async () => {
    const payload = Buffer.from('SSH-2.0-OpenSSH_9.6 through socat and the supervisor\r\n'.repeat(2_000));
    const result = await runSocat(adminPort, sup.adminToken, `${pki.sandboxId}:${echoPort}`, payload);
    assert.equal(result.code, 0, `socat failed: ${result.stderr}`);
    assert.equal(result.stdout.length, payload.length);
    assert.ok(result.stdout.equals(payload), 'the echoed bytes are the bytes sent');
    const bridged = sup.logs.find((line) => line.includes('relay bridged') && line.includes('"style":"connect"'));
    assert.ok(bridged, 'the supervisor logged a bridged CONNECT relay');
  });

  it('makes socat fail on a port outside --relay-allow and on an unknown sandbox', { skip: SKIP_SOCAT }, async () => {
    const refused = await runSocat(adminPort, sup.adminToken, `${pki.sandboxId}:${refusedPort}`, Buffer.alloc(0));
    assert.notEqual(refused.code, 0, 'socat exits non-zero when the boundary refuses the port');
    assert.match(refused.stderr, /CONNECT .*: Forbidden/, 'socat saw the 403 reason');
    const unknown = await runSocat(adminPort, sup.adminToken, `sb-unknown:${echoPort}`, Buffer.alloc(0));
    assert.notEqual(unknown.code, 0, 'socat exits non-zero for a sandbox that is not attached');
    assert.match(unknown.stderr, /CONNECT .*: Not Found/, 'socat saw the 404 reason');
  });

  it('answers 200 Connection Established and bridges a raw CONNECT both ways', async () => {
    const { head, socket } = await rawConnect(adminPort, `${pki.sandboxId}:${echoPort}`, [auth]);
    assert.equal(statusLine(head), 'HTTP/1.1 200 Connection Established');
    const received: Buffer[] = [];
    let total = 0;
    const message = Buffer.from('ping through the relay\n');
    const done = new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        received.push(chunk);
        total += chunk.length;
        if (total >= message.length) resolve();
      });
    });
    socket.write(message);
    await done;
    assert.deepEqual(Buffer.concat(received), message);
    socket.destroy();
  });

  it('answers 403 when the boundary refuses a port outside --relay-allow', async () => {
    const { head, socket } = await rawConnect(adminPort, `${pki.sandboxId}:${refusedPort}`, [auth]);
    assert.equal(statusLine(head), 'HTTP/1.1 403 Forbidden');
    assert.match(head, /\r\nboundary-error: relay-target-not-allowed\r\n/);
    assert.match(head, /\r\ncontent-length: 0\r\n/);
    socket.destroy();
    const refusal = await client.sink.waitFor((e) => e.class === 'NET' && e.activity === 'REFUSE' && e.dst?.port === refusedPort);
    assert.equal(refusal.detail, 'relay-target-not-allowed');
  });

  it('answers 404 for a sandbox that is not attached or an instance that is not there', async () => {
    const unknown = await rawConnect(adminPort, `sb-unknown:${echoPort}`, [auth]);
    assert.equal(statusLine(unknown.head), 'HTTP/1.1 404 Not Found');
    assert.match(unknown.head, /\r\nboundary-error: not-attached\r\n/);
    unknown.socket.destroy();
    const wrongInstance = await rawConnect(adminPort, `${pki.sandboxId}:${echoPort}`, [auth, 'boundary-instance: pod-missing']);
    assert.equal(statusLine(wrongInstance.head), 'HTTP/1.1 404 Not Found');
    wrongInstance.socket.destroy();
    const rightInstance = await rawConnect(adminPort, `${pki.sandboxId}:${echoPort}`, [auth, 'boundary-instance: pod-1']);
    assert.equal(statusLine(rightInstance.head), 'HTTP/1.1 200 Connection Established');
    rightInstance.socket.destroy();
  });

  it('answers 400 for a malformed CONNECT target', async () => {
    for (const target of [pki.sandboxId, `${pki.sandboxId}:0`, `${pki.sandboxId}:65536`, `${pki.sandboxId}:022`, `bad/id:${echoPort}`, `:${echoPort}`]) {
      const { head, socket } = await rawConnect(adminPort, target, [auth]);
      assert.equal(statusLine(head), 'HTTP/1.1 400 Bad Request', `target ${target}`);
      assert.match(head, /\r\nboundary-error: bad-request\r\n/);
      socket.destroy();
    }
  });
});
