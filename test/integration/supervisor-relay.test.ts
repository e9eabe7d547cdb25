// Relays through the supervisor's admin listener asked for with HTTP CONNECT, driven by real socat
// (`socat - PROXY:127.0.0.1:<sandbox>:<port>,proxyport=<admin>`) and by raw CONNECT requests to read the
// exact status lines. Real supervisor and control client over mTLS; loopback only; no sleeps.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, connect as netConnect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { makeTestClient, policyYaml, startTestSupervisor, type TestClient, type TestSupervisor } from '../harness/control.js';

const SOCAT = '/usr/bin/socat';
const SKIP_SOCAT = existsSync(SOCAT) ? false : `socat is not installed at ${SOCAT} (apt-get install socat); the raw CONNECT cases still run`;
/** Upper bound on a CONNECT answer's head; ours are a few hundred bytes. */
const MAX_HEAD_BYTES = 16_384;

interface SocatResult {
  readonly code: number | null;
  readonly stdout: Buffer;
  readonly stderr: string;
}

/** Runs socat through the admin listener, feeds `input` on stdin (then EOF) and collects what comes back. */
async function runSocat(adminPort: number, target: string, input: Buffer): Promise<SocatResult> {
  const child = spawn(SOCAT, ['-', `PROXY:127.0.0.1:${target},proxyport=${adminPort}`], { stdio: ['pipe', 'pipe', 'pipe'] });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  child.stdin.on('error', () => undefined);
  const exited = once(child, 'close') as Promise<[number | null]>;
  if (input.length > 0) {
    // Echoed bytes arrive before stdin closes, so the whole round trip is checked, not just the first half.
    let seen = 0;
    const echoed = new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen >= input.length) resolve();
      });
      child.once('close', () => resolve());
    });
    child.stdin.write(input);
    await echoed;
  }
  child.stdin.end();
  const [code] = await exited;
  return { code, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr).toString() };
}

/** Sends a raw CONNECT and returns the answer's head; the socket stays open for a 200. */
async function rawConnect(adminPort: number, target: string, headers: readonly string[] = []): Promise<{ head: string; socket: Socket }> {
  const socket = netConnect({ host: '127.0.0.1', port: adminPort });
  await once(socket, 'connect');
  socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`);
  let buffered = Buffer.alloc(0);
  const head = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end >= 0) {
        socket.off('data', onData);
        resolve(buffered.subarray(0, end).toString('latin1'));
      } else if (buffered.length > MAX_HEAD_BYTES) reject(new Error('CONNECT answer head too long'));
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('end', () => reject(new Error(`connection ended before a full answer: ${JSON.stringify(buffered.toString('latin1'))}`)));
  });
  return { head, socket };
}

function statusLine(head: string): string {
  return head.split('\r\n', 1)[0] ?? '';
}

describe('supervisor relays over HTTP CONNECT (socat PROXY, ssh ProxyCommand)', () => {
  let pki: TestPki;
  let sup: TestSupervisor;
  let client: TestClient;
  let adminPort: number;
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
  });

  after(async () => {
    await client.client.close();
    await sup.close();
    for (const socket of echoSockets) socket.destroy();
    echo.close();
  });

  it('carries bytes both ways for real socat through CONNECT <sandbox>:<port>', { skip: SKIP_SOCAT }, async () => {
    const payload = Buffer.from('SSH-2.0-OpenSSH_9.6 through socat and the supervisor\r\n'.repeat(2_000));
    const result = await runSocat(adminPort, `${pki.sandboxId}:${echoPort}`, payload);
    assert.equal(result.code, 0, `socat failed: ${result.stderr}`);
    assert.equal(result.stdout.length, payload.length);
    assert.ok(result.stdout.equals(payload), 'the echoed bytes are the bytes sent');
    const bridged = sup.logs.find((line) => line.includes('relay bridged') && line.includes('"style":"connect"'));
    assert.ok(bridged, 'the supervisor logged a bridged CONNECT relay');
  });

  it('makes socat fail on a port outside --relay-allow and on an unknown sandbox', { skip: SKIP_SOCAT }, async () => {
    const refused = await runSocat(adminPort, `${pki.sandboxId}:${refusedPort}`, Buffer.alloc(0));
    assert.notEqual(refused.code, 0, 'socat exits non-zero when the boundary refuses the port');
    assert.match(refused.stderr, /CONNECT .*: Forbidden/, 'socat saw the 403 reason');
    const unknown = await runSocat(adminPort, `sb-unknown:${echoPort}`, Buffer.alloc(0));
    assert.notEqual(unknown.code, 0, 'socat exits non-zero for a sandbox that is not attached');
    assert.match(unknown.stderr, /CONNECT .*: Not Found/, 'socat saw the 404 reason');
  });

  it('answers 200 Connection Established and bridges a raw CONNECT both ways', async () => {
    const { head, socket } = await rawConnect(adminPort, `${pki.sandboxId}:${echoPort}`);
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
    const { head, socket } = await rawConnect(adminPort, `${pki.sandboxId}:${refusedPort}`);
    assert.equal(statusLine(head), 'HTTP/1.1 403 Forbidden');
    assert.match(head, /\r\nboundary-error: relay-target-not-allowed\r\n/);
    assert.match(head, /\r\ncontent-length: 0\r\n/);
    socket.destroy();
    const refusal = await client.sink.waitFor((e) => e.class === 'NET' && e.activity === 'REFUSE' && e.dst?.port === refusedPort);
    assert.equal(refusal.reason, 'relay-target-not-allowed');
  });

  it('answers 404 for a sandbox that is not attached or an instance that is not there', async () => {
    const unknown = await rawConnect(adminPort, `sb-unknown:${echoPort}`);
    assert.equal(statusLine(unknown.head), 'HTTP/1.1 404 Not Found');
    assert.match(unknown.head, /\r\nboundary-error: not-attached\r\n/);
    unknown.socket.destroy();
    const wrongInstance = await rawConnect(adminPort, `${pki.sandboxId}:${echoPort}`, ['boundary-instance: pod-missing']);
    assert.equal(statusLine(wrongInstance.head), 'HTTP/1.1 404 Not Found');
    wrongInstance.socket.destroy();
    const rightInstance = await rawConnect(adminPort, `${pki.sandboxId}:${echoPort}`, ['boundary-instance: pod-1']);
    assert.equal(statusLine(rightInstance.head), 'HTTP/1.1 200 Connection Established');
    rightInstance.socket.destroy();
  });

  it('answers 400 for a malformed CONNECT target', async () => {
    for (const target of [pki.sandboxId, `${pki.sandboxId}:0`, `${pki.sandboxId}:65536`, `${pki.sandboxId}:022`, `bad/id:${echoPort}`, `:${echoPort}`]) {
      const { head, socket } = await rawConnect(adminPort, target);
      assert.equal(statusLine(head), 'HTTP/1.1 400 Bad Request', `target ${target}`);
      assert.match(head, /\r\nboundary-error: bad-request\r\n/);
      socket.destroy();
    }
  });
});
