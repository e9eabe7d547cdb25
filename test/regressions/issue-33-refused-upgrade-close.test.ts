// Found by issue 33's connection churn: a WebSocket upgrade refused inside an inspected TLS tunnel could leave the
// tunnel open for good once the client had gone. The refusal was written and the socket ended, but the socket had
// been handed over by the HTTP/1.1 server and nobody read it again: a frame the client sent as the refusal arrived sat
// unread in the TLS socket, so the FIN behind it was never delivered as an end, the half-open socket never closed,
// and the tunnel (counted in boundary_proxy_tunnels) held its upstream connection, dialled at CONNECT, until the idle
// timeout. A refusal written on a raw socket (a refused CONNECT, a refused upgrade) now reads on and drops what comes,
// so the client's close is seen, and is destroyed after a bounded linger if the client does not close. A handshake the
// origin refused had the same shape: its answer is relayed one way, and the client's connection was held until the
// origin closed its own; now the client's FIN gives the answer the linger, then both go.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { head, metric, rawClient, SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openTunnel } from '../harness/proxy-client.js';
import { httpOrigin, listenTracked, type Origin, tlsOrigin } from '../harness/servers.js';

/** Tunnels are counted this often while they close; the state before the fix never closed. */
const POLLS = 150;
const POLL_MS = 100;
/** Longer than the test waits: the refused handshake's connection must close without the origin closing it. */
const REFUSING_KEEP_ALIVE_MS = 120_000;

describe('issue 33: a refused upgrade ends its connection, and an inspected tunnel, once the client has gone', { timeout: SUITE_TIMEOUT_MS }, () => {
  let b: RunningBoundary;
  let origin: Origin;
  let plain: Origin;
  let refusing: { readonly port: number; close(): Promise<void> };
  let ca: string;

  before(async () => {
    const pki = await makeTestPki();
    origin = await tlsOrigin({ ca: pki.ca, names: ['api.example.test'] });
    plain = await httpOrigin();
    // An origin that refuses every handshake (426) and keeps its connection well past the test.
    const server = createServer({ keepAliveTimeout: REFUSING_KEEP_ALIVE_MS }, (req, res) => {
      req.resume();
      res.writeHead(426, { 'content-length': '0' }).end();
    });
    refusing = await listenTracked(server);
    b = await startBoundary({
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        access: full
      - host: api.example.test
        port: ${plain.port}
        protocol: rest
        enforcement: enforce
        access: read-only
      - { host: api.example.test, port: ${refusing.port} }
    binaries: [{ path: "/**" }]
`,
      names: { 'api.example.test': ['127.0.0.1'] },
      upstreamCaPem: pki.ca.certPem,
    });
    ca = `${b.caPem ?? ''}${pki.ca.certPem}`;
  });

  after(async () => {
    await b?.close();
    await Promise.all([origin?.close(), plain?.close(), refusing?.close()]);
  });

  /** The open tunnels once they are down to `count`, or after POLLS tries. */
  async function tunnelsDownTo(count: number): Promise<number> {
    let open = await metric(b, 'boundary_proxy_tunnels');
    for (let i = 0; i < POLLS && open > count; i++) {
      await sleep(POLL_MS);
      open = await metric(b, 'boundary_proxy_tunnels');
    }
    return open;
  }

  /** A WebSocket handshake to `path`, as ws.ts's harness writes it. */
  const upgradeHead = (target: string, host: string): string =>
    head(`GET ${target} HTTP/1.1\nHost: ${host}\nConnection: Upgrade\nUpgrade: websocket\nSec-WebSocket-Version: 13\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==`);

  /** Resolves with the answer's status line once its head is in; `then` is written the moment it is. */
  function statusLine(socket: Duplex, then: Buffer): Promise<string> {
    return new Promise((resolve, reject) => {
      let text = '';
      const onData = (chunk: Buffer): void => {
        text += chunk.toString('latin1');
        if (!text.includes('\r\n\r\n')) return;
        socket.removeListener('data', onData);
        socket.write(then);
        resolve(text.slice(0, text.indexOf('\r\n')));
      };
      socket.on('data', onData);
      socket.once('error', reject);
    });
  }

  for (const transport of ['an inspected TLS tunnel', 'the forward proxy'] as const) {
    it(`a WebSocket upgrade refused through ${transport}, a frame sent as the refusal arrives, then the client's FIN: the connection goes`, async () => {
      const before = await metric(b, 'boundary_proxy_tunnels');
      const authority = `api.example.test:${transport === 'the forward proxy' ? plain.port : origin.port}`;
      let client: Duplex;
      let raw: Socket;
      if (transport === 'the forward proxy') {
        raw = await rawClient(b.proxyPort);
        client = raw;
        client.write(upgradeHead(`http://${authority}/ws`, authority));
      } else {
        const tunnel = await openTunnel(b.proxyPort, authority);
        assert.equal(tunnel.status, 200);
        raw = tunnel.socket;
        const tls = tlsConnect({ socket: tunnel.socket, ca, servername: 'api.example.test', ALPNProtocols: ['http/1.1'] });
        await once(tls, 'secureConnect');
        client = tls;
        client.write(upgradeHead('/ws', authority));
        assert.equal(await metric(b, 'boundary_proxy_tunnels'), before + 1);
      }
      client.on('error', () => {});
      // A frame the client sends as the refusal arrives, before its own FIN: it sits unread in front of the FIN.
      assert.match(await statusLine(client, Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0x68, 0x69])), /^HTTP\/1\.1 403 /);
      client.resume();
      assert.equal(await tunnelsDownTo(before), before, 'the tunnel closed');
      for (let i = 0; i < POLLS && !raw.destroyed; i++) await sleep(POLL_MS);
      assert.ok(raw.destroyed, 'boundary closed the connection');
    });
  }

  it("a handshake the origin refused (426) on a connection it keeps: the client's FIN closes the connection", async () => {
    const authority = `api.example.test:${refusing.port}`;
    const client = await rawClient(b.proxyPort);
    client.on('error', () => {});
    client.write(upgradeHead(`http://${authority}/ws`, authority));
    // A frame sent as the answer arrives, then the FIN: nothing upstream hears of either.
    assert.match(await statusLine(client, Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0x68, 0x69])), /^HTTP\/1\.1 426 /);
    client.end();
    client.resume();
    for (let i = 0; i < POLLS && !client.destroyed; i++) await sleep(POLL_MS);
    assert.ok(client.destroyed, 'boundary closed the connection');
  });
});
