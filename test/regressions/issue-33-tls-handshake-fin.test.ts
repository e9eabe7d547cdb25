// Found by issue 33's connection churn test: a client that sends its ClientHello inside an inspected CONNECT tunnel
// and then closes its side (FIN) before the handshake ends left the tunnel open for good. The tunnel's socket is
// half-open, as the proxy listener makes every client socket, and so was the TLS socket boundary terminates on it: the
// FIN ended its reading and nothing else, the handshake waited for a Finished that could never come, and the tunnel
// (counted in boundary_proxy_tunnels) and its upstream connection, dialled at CONNECT, stayed open. Under load, one to
// three HTTP/2 clients in a hundred that gave up at once did this. Now a FIN during the handshake ends it, as a close
// does, with a LOW `tls-client-closed` finding: a client that gave up is no attack, nor is one that resets instead.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { metric, SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openTunnel } from '../harness/proxy-client.js';
import { listenTracked } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

/** How long each side is given to close; the state before the fix never closed. */
const CLOSE_WAIT_MS = 15_000;

/** The first flight of node's own TLS client for `servername`: its ClientHello, as it would put it on the wire. */
async function clientHello(servername: string, alpn: string[]): Promise<Buffer> {
  const written: Buffer[] = [];
  let wrote: () => void = () => {};
  const first = new Promise<void>((resolve) => {
    wrote = resolve;
  });
  const wire = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      written.push(chunk);
      wrote();
      callback();
    },
  });
  const client = tlsConnect({ socket: wire, servername, ALPNProtocols: alpn, rejectUnauthorized: false });
  client.on('error', () => {});
  await first;
  client.destroy();
  return Buffer.concat(written);
}

function closedWithin(socket: Socket, what: string): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  socket.resume();
  // Not events.once: it rejects on the socket's 'error', and a reset is a close here too.
  return withinDeadline(new Promise<void>((resolve) => socket.once('close', () => resolve())), `${what} closing`, CLOSE_WAIT_MS);
}

describe('issue 33: a FIN during the TLS handshake of an inspected tunnel ends the tunnel', { timeout: SUITE_TIMEOUT_MS }, () => {
  let b: RunningBoundary;
  let upstreams: Socket[];
  let closeOrigin: () => Promise<void>;
  let port: number;

  before(async () => {
    upstreams = [];
    // The tunnel's upstream is dialled at CONNECT; boundary never gets as far as speaking TLS on it here.
    const origin = createServer((socket) => {
      socket.on('error', () => {});
      upstreams.push(socket);
    });
    const listening = await listenTracked(origin);
    port = listening.port;
    closeOrigin = listening.close;
    b = await startBoundary({
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
`,
    });
  });

  after(async () => {
    await b?.close();
    await closeOrigin?.();
  });

  const FIN = 'client closed during the TLS handshake';
  const CASES = [
    { name: 'a ClientHello offering h2 and http/1.1 with the FIN right behind it', alpn: ['h2', 'http/1.1'], end: 'fin', afterServerHello: false, reason: FIN },
    { name: 'a ClientHello offering http/1.1 with the FIN right behind it', alpn: ['http/1.1'], end: 'fin', afterServerHello: false, reason: FIN },
    { name: "a ClientHello, then the FIN once boundary's first flight arrived", alpn: ['h2', 'http/1.1'], end: 'fin', afterServerHello: true, reason: FIN },
    {
      name: "a ClientHello, then a reset once boundary's first flight arrived",
      alpn: ['h2', 'http/1.1'],
      end: 'reset',
      afterServerHello: true,
      reason: 'client reset the connection during the TLS handshake',
    },
  ] as const;

  for (const c of CASES) {
    it(`${c.name}: the tunnel and its upstream close`, async () => {
      const hello = await clientHello('api.example.test', [...c.alpn]);
      const dialled = upstreams.length;
      // Counted from here, so that one case's leftover does not fail the next.
      const open = await metric(b, 'boundary_proxy_tunnels');
      const tunnel = await openTunnel(b.proxyPort, `api.example.test:${port}`);
      assert.equal(tunnel.status, 200);
      assert.equal(await metric(b, 'boundary_proxy_tunnels'), open + 1);
      if (c.afterServerHello) {
        // The FIN or the reset reaches the TLS socket boundary made, mid-handshake.
        tunnel.socket.write(hello);
        tunnel.socket.resume();
        await once(tunnel.socket, 'data');
        if (c.end === 'reset') tunnel.socket.resetAndDestroy();
        else tunnel.socket.end();
      } else {
        // Read during the sniff, before the TLS socket exists: as a client that gives up at once sends it.
        tunnel.socket.end(hello);
      }
      await closedWithin(tunnel.socket, 'the client connection');
      assert.equal(upstreams.length, dialled + 1, 'the tunnel dialled its upstream');
      await closedWithin(upstreams[dialled] as Socket, 'the upstream connection');
      assert.equal(await metric(b, 'boundary_proxy_tunnels'), open);
      const finding = await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'tls-client-closed' && e.unmapped.reason === c.reason);
      assert.equal(finding.status_detail, 'tls_client_closed');
      assert.equal(finding.severity_id, 2, 'LOW');
    });
  }
});
