// Connection churn leaves nothing behind: for each way a connection through boundary can go (allowed, denied,
// abandoned mid-head or mid-body, CONNECT passed through or inspected, HTTP/2 streams finished or reset, WebSocket,
// pipelined requests, a failed dial, an origin that resets mid-answer), a few dozen connections are opened and ended,
// then the sockets left in the heap (v8.queryObjects, which collects first) and the descriptors left open are counted
// against the count before. Issue 33's leaks showed this way: every closed connection's parser (and through it the
// socket) kept in memory; a request body cut short, a FIN during an inspected tunnel's TLS handshake and a frame
// behind a refused upgrade each holding a tunnel or its connections open for good.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect as h2Connect } from 'node:http2';
import { connect, Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { queryObjects } from 'node:v8';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { head } from '../harness/liveness.js';
import { openTunnel, readAll, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin, listenTracked, type Origin, tlsOrigin } from '../harness/servers.js';
import { openWebSocket } from '../harness/ws.js';

/** Connections of each kind, after a few to warm up whatever is made once (pools, caches). */
const CHURN = 40;
const WARM_UP = 3;
/** Sockets (or descriptors) that may be left over a kind's churn: a pooled upstream connection or two, not one per connection. */
const LEFT_AT_MOST = 6;
/** A kind whose connections do not end (the state before a fix) fails on its own rather than hold up the rest. */
const KIND_TIMEOUT_MS = 60_000;
/** Censuses taken, 100 ms apart, while closes still in flight land (a linger, a deleted parser's turn). */
const CENSUS_TRIES = 50;

interface Census {
  readonly sockets: number;
  readonly fds: number;
}

function census(): Census {
  return { sockets: queryObjects(Socket as never, { format: 'count' }) as unknown as number, fds: readdirSync('/proc/self/fd').length };
}

/** The census once it is back within LEFT_AT_MOST of `before`, or the last of CENSUS_TRIES. */
async function settled(before: Census): Promise<Census> {
  let now = census();
  for (let i = 1; i < CENSUS_TRIES && (now.sockets - before.sockets > LEFT_AT_MOST || now.fds - before.fds > LEFT_AT_MOST); i++) {
    await sleep(100);
    now = census();
  }
  return now;
}

async function raw(port: number, bytes: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.write(bytes);
  return socket;
}

describe('connection churn leaves no socket and no descriptor behind', () => {
  let b: RunningBoundary;
  let plain: Origin;
  let secure: Origin;
  let resetting: Server;
  let resettingPort: number;
  let ca: string;
  let closeResetting: () => Promise<void>;

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca, names: ['api.example.test'] });
    // Answers the head and one byte, then resets its connection.
    resetting = createServer((req, res) => {
      req.resume();
      res.writeHead(200);
      res.write('x', () => res.socket?.destroy());
    });
    const listening = await listenTracked(resetting);
    resettingPort = listening.port;
    closeResetting = listening.close;
    b = await startBoundary({
      policy: `version: 1
network_policies:
  plain:
    endpoints: [{ host: api.example.test, ports: [${plain.port}, ${resettingPort}] }]
    binaries: [{ path: "/**" }]
  inspected:
    endpoints:
      - host: api.example.test
        port: ${secure.port}
        protocol: rest
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
`,
      names: { 'api.example.test': ['127.0.0.1'] },
      upstreamCaPem: pki.ca.certPem,
    });
    ca = `${b.caPem ?? ''}${pki.ca.certPem}`;
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), secure?.close(), closeResetting?.()]);
  });

  const plainAt = (): string => `api.example.test:${plain.port}`;
  const secureAt = (): string => `api.example.test:${secure.port}`;

  /** An HTTP/2 session inside an inspected tunnel. */
  async function h2Session() {
    const tunnel = await openTunnel(b.proxyPort, secureAt());
    const session = h2Connect(`https://${secureAt()}`, {
      createConnection: () => tlsConnect({ socket: tunnel.socket, ca, servername: 'api.example.test', ALPNProtocols: ['h2'] }),
    });
    session.on('error', () => {});
    return { session, tunnel: tunnel.socket };
  }

  const KINDS: Record<string, () => Promise<void>> = {
    'an allowed request on a kept-alive connection the client then drops': async () => {
      const socket = await raw(b.proxyPort, head(`GET http://${plainAt()}/ HTTP/1.1\nHost: ${plainAt()}`));
      await once(socket, 'data');
      socket.destroy();
    },
    'a denied request': async () => {
      await readAll(await raw(b.proxyPort, head('GET http://denied.example.test/ HTTP/1.1\nHost: denied.example.test')));
    },
    'a head abandoned part-way': async () => {
      const socket = await raw(b.proxyPort, `GET http://${plainAt()}/ HTTP/1.1\r\nHost: ${plainAt()}\r\nX-Part: `);
      socket.end();
      await readAll(socket);
    },
    'a body abandoned part-way (FIN)': async () => {
      const socket = await raw(b.proxyPort, `${head(`POST http://${plainAt()}/ HTTP/1.1\nHost: ${plainAt()}\nContent-Length: 100`)}0123456789`);
      await sleep(5);
      socket.end();
      await readAll(socket);
    },
    'pipelined requests, the last with Connection: close': async () => {
      const one = (last: boolean): string => head(`GET http://${plainAt()}/ HTTP/1.1\nHost: ${plainAt()}${last ? '\nConnection: close' : ''}`);
      await readAll(await raw(b.proxyPort, one(false) + one(false) + one(true)));
    },
    'a dial that fails': async () => {
      await readAll(await raw(b.proxyPort, head('GET http://api.example.test:1/ HTTP/1.1\nHost: api.example.test:1\nConnection: close')));
    },
    'an origin that resets mid-answer': async () => {
      await readAll(await raw(b.proxyPort, head(`GET http://api.example.test:${resettingPort}/ HTTP/1.1\nHost: api.example.test:${resettingPort}`)));
    },
    'a CONNECT passed through': async () => {
      const tunnel = await openTunnel(b.proxyPort, plainAt());
      tunnel.socket.write(head(`GET / HTTP/1.1\nHost: ${plainAt()}\nConnection: close`));
      await readAll(tunnel.socket);
    },
    'a CONNECT denied': async () => {
      const tunnel = await openTunnel(b.proxyPort, 'denied.example.test:443');
      tunnel.socket.destroy();
    },
    'an inspected HTTP/1.1 request': async () => {
      const tunnel = await openTunnel(b.proxyPort, secureAt());
      const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca });
      tls.write(head(`GET / HTTP/1.1\nHost: ${secureAt()}`));
      await once(tls, 'data');
      tls.destroy();
    },
    'an inspected body abandoned part-way (FIN)': async () => {
      const tunnel = await openTunnel(b.proxyPort, secureAt());
      const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca });
      tls.on('error', () => {});
      tls.write(`${head(`POST / HTTP/1.1\nHost: ${secureAt()}\nContent-Length: 100`)}0123`);
      await sleep(5);
      tls.end();
      await readAll(tls);
    },
    'HTTP/2 streams answered, then the session closed': async () => {
      const { session, tunnel } = await h2Session();
      await Promise.all(
        [0, 1, 2].map(
          () =>
            new Promise<void>((resolve) => {
              const stream = session.request({ ':path': '/' });
              stream.on('error', () => resolve());
              stream.on('close', () => resolve());
              stream.resume();
            }),
        ),
      );
      session.close();
      await once(tunnel, 'close');
    },
    'an HTTP/2 stream reset mid-body, then the session destroyed': async () => {
      const { session, tunnel } = await h2Session();
      const stream = session.request({ ':path': '/', ':method': 'POST' }, { endStream: false });
      stream.on('error', () => {});
      stream.write('part');
      await sleep(5);
      stream.close(8);
      session.destroy();
      tunnel.destroy();
    },
    'a WebSocket upgrade refused inside an inspected tunnel, a frame sent anyway': async () => {
      const { status, client } = await openWebSocket({ proxyPort: b.proxyPort, transport: 'connect-tls', host: 'api.example.test', port: secure.port, path: '/ws', caPem: ca });
      assert.equal(status, 403);
      client.sendText('hello');
      await client.next().catch(() => undefined);
      client.socket.destroy();
    },
    'a WebSocket opened, used and dropped': async () => {
      const { client } = await openWebSocket({ proxyPort: b.proxyPort, transport: 'forward', host: 'api.example.test', port: plain.port, path: '/ws' });
      client.sendText('hello');
      await client.next().catch(() => undefined);
      client.socket.destroy();
    },
  };

  for (const [kind, churnOne] of Object.entries(KINDS)) {
    it(kind, { timeout: KIND_TIMEOUT_MS }, async () => {
      for (let i = 0; i < WARM_UP; i++) await churnOne();
      const before = await settled(census());
      for (let i = 0; i < CHURN; i++) await churnOne();
      const left = await settled(before);
      assert.ok(left.sockets - before.sockets <= LEFT_AT_MOST, `${left.sockets - before.sockets} sockets of ${CHURN} connections are still in the heap`);
      assert.ok(left.fds - before.fds <= LEFT_AT_MOST, `${left.fds - before.fds} descriptors of ${CHURN} connections are still open`);
    });
  }
});
