import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { startBoundary } from '../harness/boundary.js';
import { openTunnel, readAll, sendRequest, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin } from '../harness/servers.js';

const IDLE_CLIENTS = 500;

function policy(port: number): string {
  return `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${port} }
    binaries: [{ path: "/**" }]
`;
}

async function halfSent(proxyPort: number, originPort: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port: proxyPort });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write(`GET http://api.example.test:${originPort}/slow HTTP/1.1\r\nHost: api.example.test\r\nX-Trickle: `);
  return socket;
}

describe('limits', () => {
  it(`keeps serving allowed requests while ${IDLE_CLIENTS} half-sent requests are open (slowloris)`, async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: policy(origin.port) });
    const idle: Socket[] = [];
    t.after(async () => {
      for (const s of idle) s.destroy();
      await b.close();
      await origin.close();
    });
    for (let i = 0; i < IDLE_CLIENTS; i += 50) {
      idle.push(...(await Promise.all(Array.from({ length: 50 }, () => halfSent(b.proxyPort, origin.port)))));
    }
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/ok/${i}` })),
    );
    assert.deepEqual(new Set(responses.map((r) => r.status)), new Set([200]));
    assert.equal(origin.seen.length, 20, 'no half-sent request reached upstream');
  });

  it('closes a connection whose head is not complete within the headers timeout (RX-03)', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: policy(origin.port), limits: { headersTimeoutMs: 300 } });
    t.after(async () => {
      await b.close();
      await origin.close();
    });
    const socket = await halfSent(b.proxyPort, origin.port);
    const text = await readAll(socket);
    assert.match(text, /^HTTP\/1\.1 408/);
    assert.equal(origin.seen.length, 0);
    const metrics = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
    assert.match(metrics, /boundary_proxy_client_errors_total\{reason="timeout"\} 1/);
  });

  it('answers 408 on a decrypted connection in an inspected tunnel whose first request never comes (issue 15)', async (t) => {
    const origin = await httpOrigin();
    const inspected = `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${origin.port}, protocol: rest, enforcement: enforce, access: full }
    binaries: [{ path: "/**" }]
`;
    const b = await startBoundary({ policy: inspected, limits: { headersTimeoutMs: 300 } });
    t.after(async () => {
      await b.close();
      await origin.close();
    });
    const { status, socket } = await openTunnel(b.proxyPort, `api.example.test:${origin.port}`);
    assert.equal(status, 200);
    // The head timeout runs from the handshake: the client sent a ClientHello, never a request.
    const tls = await tlsOverTunnel(socket, { servername: 'api.example.test', ca: b.caPem as string });
    tls.on('error', () => undefined);
    assert.match(await readAll(tls), /^HTTP\/1\.1 408/);
    assert.equal(origin.seen.length, 0);
  });

  it('answers 503 too_many_connections beyond the per-listener limit, with an event and a metric (RX-08)', async (t) => {
    const origin = await httpOrigin();
    // One client address fills the whole listener: the per-source share (issue-15-source-share) is lifted.
    const b = await startBoundary({ policy: policy(origin.port), limits: { maxConnections: 3, maxConnectionsPerSourcePercent: 100 } });
    const held: Socket[] = [];
    t.after(async () => {
      for (const s of held) s.destroy();
      await b.close();
      await origin.close();
    });
    for (let i = 0; i < 3; i++) held.push(await halfSent(b.proxyPort, origin.port));
    const extra = connect({ host: '127.0.0.1', port: b.proxyPort });
    extra.on('error', () => undefined);
    const text = await readAll(extra);
    assert.match(text, /^HTTP\/1\.1 503/);
    assert.ok(text.includes('too_many_connections'));
    await b.log.waitFor((e) => e.activity_name === 'Refuse' && e.unmapped.reason_code === 'too-many-connections');
    const metrics = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
    assert.match(metrics, /boundary_proxy_refused_connections_total\{reason="too-many-connections"\} 1/);
  });
});
