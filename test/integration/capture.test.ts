import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { cidrContains, parseCidr, parseIp } from '../../src/net/ip.js';
import { EXPIRED_LISTENER_LINGER_MS } from '../../src/proxy/capture-listeners.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { testClock } from '../harness/clock.js';
import { type EchoServer, echoServer, type Origin, tlsOrigin } from '../harness/servers.js';

const run = promisify(execFile);
/** Bounds a hang only: an echo through capture that has not come back by then is not coming, however loaded the host. */
const CLIENT_TIMEOUT_MS = 30_000;
// No proxy variable reaches curl: capture is the only way it can get anywhere.
const NO_PROXY_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

async function digShort(dnsPort: number, name: string): Promise<string> {
  const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(dnsPort), '+tries=1', '+time=3', '+short', name, 'A']);
  return stdout.trim();
}

async function curl(args: string[]): Promise<{ code: string; body: string }> {
  const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--noproxy', '*', '-w', '\n%{http_code}', ...args], { env: NO_PROXY_ENV });
  const cut = stdout.lastIndexOf('\n');
  return { body: stdout.slice(0, cut), code: stdout.slice(cut + 1) };
}

/** Connects, writes `data`, and resolves with everything read until `expect` bytes arrived. */
function exchange(host: string, port: number, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let got = '';
    const timer = setTimeout(() => done(new Error(`echo timed out after ${got.length} bytes`)), CLIENT_TIMEOUT_MS);
    function done(err?: Error): void {
      clearTimeout(timer);
      socket.destroy();
      if (err === undefined) resolve(got);
      else reject(err);
    }
    socket.on('error', done);
    socket.on('connect', () => socket.write(data));
    socket.on('data', (chunk: Buffer) => {
      got += chunk.toString('utf8');
      if (got.length >= data.length) done();
    });
  });
}

/** Resolves with the error code of a connection attempt that must fail at once (no listener). */
function connectError(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      reject(new Error(`${host}:${port} accepted a connection`));
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** Resolves once the peer closed the connection; `sawData` tells whether anything came back first. */
function closedByPeer(socket: Socket): Promise<{ sawData: boolean }> {
  let sawData = false;
  socket.on('data', () => {
    sawData = true;
  });
  socket.on('error', () => undefined);
  // Not events.once: it rejects on 'error', and a reset is one of the ways the peer closes.
  return new Promise((resolve) => socket.once('close', () => resolve({ sawData })));
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function inWindow(b: RunningBoundary, ip: string): boolean {
  const window = b.boundary.transparent.pool()?.windows[4];
  return window !== undefined && cidrContains(parseCidr(window)!, parseIp(ip)!);
}

describe('transparent capture through policy DNS, with no proxy settings', () => {
  let b: RunningBoundary;
  let origin: Origin;
  let echo: EchoServer;
  let deadPort = 0;
  let caFile = '';

  before(async () => {
    const pki = await makeTestPki();
    origin = await tlsOrigin({ ca: pki.ca });
    echo = await echoServer();
    deadPort = await freePort();
    b = await startBoundary({
      upstreamCaPem: pki.ca.certPem,
      names: { 'echo.example.test': ['127.0.0.1'], 'db.example.test': ['127.0.0.9'] },
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
    binaries: [{ path: "/**" }]
  echo:
    endpoints:
      - host: echo.example.test
        port: ${echo.port}
        protocol: tcp
      - host: db.example.test
        port: ${deadPort}
        protocol: tcp
    binaries: [{ path: "/**" }]
`,
    });
    caFile = join(b.dir, 'boundary-ca.pem');
    await writeFile(caFile, b.caPem as string);
  });

  after(async () => {
    await b?.close();
    await origin?.close();
    await echo?.close();
  });

  it('reaches a TLS origin at its synthetic address, with L7 rules applied per request', async () => {
    const synthetic = await digShort(b.dnsPort!, 'api.example.test');
    assert.ok(inWindow(b, synthetic), `${synthetic} is in the synthetic window`);
    const resolve = `api.example.test:${origin.port}:${synthetic}`;
    const allowed = await curl(['--resolve', resolve, '--cacert', caFile, `https://api.example.test:${origin.port}/allowed/capture?q=1`]);
    assert.equal(allowed.code, '200');
    assert.equal((JSON.parse(allowed.body) as { url: string }).url, '/allowed/capture?q=1');
    const denied = await curl(['--resolve', resolve, '--cacert', caFile, `https://api.example.test:${origin.port}/nope`]);
    assert.equal(denied.code, '403');
    assert.equal((JSON.parse(denied.body) as { error: string }).error, 'policy_denied');
    assert.ok(b.dials.every((d) => d.host === '127.0.0.1' && d.port === origin.port), 'only the pinned real address was dialled');

    const published = await b.log.waitFor((e) => e.class_uid === 5019 && e.unmapped?.normalized_domain === 'api.example.test');
    const open = await b.log.waitFor((e) => e.status_detail === 'transparent_tcp_allowed' && e.unmapped?.normalized_domain === 'api.example.test');
    assert.equal(open.action_id, 1);
    assert.equal(open.unmapped?.mapping_id, published.unmapped?.mapping_id);
    assert.equal(open.unmapped?.synthetic_destination, `${synthetic}:${origin.port}`);
    assert.equal(open.unmapped?.connected_real_destination, `127.0.0.1:${origin.port}`);
    assert.equal(open.unmapped?.dial_mode, 'direct');
    const l7Denied = await b.log.waitFor((e) => e.class_uid === 4002 && e.action_id === 2);
    assert.equal(l7Denied.unmapped?.adapter, 'l7');
  });

  it('relays raw bytes to a protocol: tcp endpoint through its synthetic address', async () => {
    const synthetic = await digShort(b.dnsPort!, 'echo.example.test');
    assert.ok(inWindow(b, synthetic));
    assert.equal(await exchange(synthetic, echo.port, 'ping over capture\n'), 'ping over capture\n');
    const open = await b.log.waitFor((e) => e.status_detail === 'transparent_tcp_allowed' && e.unmapped?.normalized_domain === 'echo.example.test');
    assert.equal(open.unmapped?.inspect, false);
  });

  it('refuses at once a port the policy does not allow for the name: no listener', async () => {
    const synthetic = await digShort(b.dnsPort!, 'echo.example.test');
    assert.equal(await connectError(synthetic, origin.port), 'ECONNREFUSED');
    assert.deepEqual(
      b.boundary.transparent.listening().filter((l) => l.ip === synthetic).map((l) => l.port),
      [echo.port],
    );
  });

  it('refuses a TLS ClientHello whose SNI names another host on a raw tcp route (the SNI never picks the destination)', async () => {
    const synthetic = await digShort(b.dnsPort!, 'echo.example.test');
    const before = echo.connections();
    const socket = tlsConnect({ host: synthetic, port: echo.port, servername: 'evil.example.test', rejectUnauthorized: false });
    const closed = await closedByPeer(socket);
    assert.equal(closed.sawData, false, 'nothing came back: the ClientHello never reached the echo server');
    const finding = await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped?.finding === 'sni-mismatch');
    assert.match(String(finding.message), /evil\.example\.test/);
    assert.ok(echo.connections() >= before);
  });

  it('never lets a direct connection to the real address inherit a mapping (DN-31)', async () => {
    const synthetic = await digShort(b.dnsPort!, 'db.example.test');
    assert.ok(inWindow(b, synthetic));
    // Boundary listens on the synthetic address only; nothing answers at the real one.
    assert.equal(await connectError('127.0.0.9', deadPort), 'ECONNREFUSED');
    for (const l of b.boundary.transparent.listening()) assert.ok(inWindow(b, l.ip), `${l.ip} is synthetic`);
    assert.ok(!b.log.events().some((e) => e.unmapped?.synthetic_ip === '127.0.0.9'));
  });

  it('closes a listener when a policy change no longer allows its port', async () => {
    const synthetic = await digShort(b.dnsPort!, 'db.example.test');
    assert.ok(b.boundary.transparent.listening().some((l) => l.ip === synthetic && l.port === deadPort));
    await b.writePolicy(`version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
    binaries: [{ path: "/**" }]
  echo:
    endpoints:
      - host: echo.example.test
        port: ${echo.port}
        protocol: tcp
    binaries: [{ path: "/**" }]
`);
    await b.boundary.reloadPolicy();
    assert.ok(!b.boundary.transparent.listening().some((l) => l.ip === synthetic));
    assert.equal(await connectError(synthetic, deadPort), 'ECONNREFUSED');
    // The unchanged endpoint keeps its listener across the reload.
    const echoIp = await digShort(b.dnsPort!, 'echo.example.test');
    assert.equal(await exchange(echoIp, echo.port, 'still here\n'), 'still here\n');
  });
});

describe('synthetic mapping expiry', () => {
  let b: RunningBoundary;
  let echo: EchoServer;
  const clock = testClock();

  before(async () => {
    echo = await echoServer();
    b = await startBoundary({
      now: clock.now,
      names: { 'echo.example.test': { addresses: ['127.0.0.1'], ttlSeconds: 5 }, 'other.example.test': ['127.0.0.1'] },
      policy: `version: 1
network_policies:
  echo:
    endpoints:
      - host: echo.example.test
        port: ${echo.port}
        protocol: tcp
      - host: other.example.test
        port: ${echo.port}
        protocol: tcp
    binaries: [{ path: "/**" }]
`,
    });
  });

  after(async () => {
    await b?.close();
    await echo?.close();
  });

  it('denies a connection to an expired mapping with transparent_tcp_mapping_expired and never hands the address to another name', async () => {
    const synthetic = await digShort(b.dnsPort!, 'echo.example.test');
    assert.equal(await exchange(synthetic, echo.port, 'live\n'), 'live\n');
    const dialsBefore = b.dials.length;
    // Past the 5 s TTL, inside the listener's linger: the connection is accepted, explained and closed.
    clock.advance(6_000);
    assert.ok(EXPIRED_LISTENER_LINGER_MS > 6_000);
    const socket = connect({ host: synthetic, port: echo.port });
    const closed = await closedByPeer(socket);
    assert.equal(closed.sawData, false);
    const denied = await b.log.waitFor((e) => e.status_detail === 'transparent_tcp_mapping_expired');
    assert.equal(denied.action_id, 2);
    assert.equal(denied.unmapped?.normalized_domain, 'echo.example.test');
    assert.equal(b.dials.length, dialsBefore, 'nothing was dialled for the expired mapping');

    const other = await digShort(b.dnsPort!, 'other.example.test');
    assert.notEqual(other, synthetic);
    assert.ok(b.boundary.transparent.pool()?.lookup(synthetic).state === 'expired');
    // The same name asking again gets its own address back, live again.
    assert.equal(await digShort(b.dnsPort!, 'echo.example.test'), synthetic);
    assert.equal(await exchange(synthetic, echo.port, 'again\n'), 'again\n');
  });
});
