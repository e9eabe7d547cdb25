// Regression of issue 15, "An allowed request can reach the origin with no decision event": an allowed request
// followed on the same connection by bytes the parser rejects (or by anything after `Connection: close`) was
// written upstream on a warm pool, then the client-error handler answered 400 on top of it and closed; the
// origin's answer was thrown away and the request ended as a NET:FAIL with no verdict, method or path. Now the
// answer goes out before the connection closes, and a request the origin got always has its one decision event.
import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { head, rawClient, SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openTunnel, readAll, statusOf } from '../harness/proxy-client.js';

const policy = (port: number): string => `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${port} }
      - host: l7.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
`;

/** Forward HTTP to an L4 endpoint, or requests inside a CONNECT tunnel to an inspected one (l7.ts, same relay). */
const TRANSPORTS = ['forward', 'inspected'] as const;
type Transport = (typeof TRANSPORTS)[number];

/** An origin that records each request it received and answers only when the test says so. */
interface HeldOrigin extends EventEmitter {
  readonly port: number;
  readonly received: string[];
  /** Resolves once a request for `path` arrived. */
  arrival(path: string): Promise<void>;
  answer(path: string): void;
  close(): Promise<void>;
}

async function heldOrigin(): Promise<HeldOrigin> {
  const events = new EventEmitter();
  const received: string[] = [];
  const held = new Map<string, ServerResponse>();
  const sockets = new Set<Socket>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '';
      received.push(path);
      held.set(path, res);
      events.emit('arrival', path);
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('origin did not bind');
  return Object.assign(events, {
    port: address.port,
    received,
    async arrival(path: string) {
      for (let i = 0; i < 100 && !received.includes(path); i++) await once(events, 'arrival');
      assert.ok(received.includes(path), `${path} reached the origin`);
    },
    answer(path: string) {
      held.get(path)?.end('answered');
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

describe('issue 15: every request written upstream has exactly one decision event', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: HeldOrigin;
  let b: RunningBoundary;

  before(async () => {
    origin = await heldOrigin();
    b = await startBoundary({ policy: policy(origin.port), names: { 'l7.example.test': ['127.0.0.1'] } });
  });

  after(async () => {
    await b?.close();
    await origin?.close();
  });

  function request(transport: Transport, path: string, extra = ''): string {
    if (transport === 'forward') return head(`GET http://api.example.test:${origin.port}${path} HTTP/1.1\nHost: api.example.test:${origin.port}${extra}`);
    return head(`GET ${path} HTTP/1.1\nHost: l7.example.test:${origin.port}${extra}`);
  }

  async function client(transport: Transport): Promise<Socket> {
    if (transport === 'forward') return rawClient(b.proxyPort);
    const tunnel = await openTunnel(b.proxyPort, `l7.example.test:${origin.port}`);
    assert.equal(tunnel.status, 200);
    return tunnel.socket;
  }

  const decisionsFor = (path: string) => b.log.decisions().filter((e) => e.class_uid === 4002 && e.http_request?.url?.path === path);

  /** The one decision event of a request the origin received (waits for it, then counts). */
  async function onlyDecision(path: string) {
    await b.log.waitFor((e) => e.class_uid === 4002 && e.action_id !== undefined && e.http_request?.url?.path === path);
    const events = decisionsFor(path);
    assert.equal(events.length, 1, `one decision event for ${path}`);
    return events[0];
  }

  /** Sends one allowed request and waits for its answer, so the next one finds an idle upstream socket. */
  async function warm(transport: Transport, path: string): Promise<void> {
    const socket = await client(transport);
    socket.write(request(transport, path, '\nConnection: close'));
    await origin.arrival(path);
    origin.answer(path);
    assert.equal(statusOf(await readAll(socket)), 200);
    await onlyDecision(path);
  }

  for (const transport of TRANSPORTS) {
    for (const [name, trailing] of [
      ['bytes the parser rejects', '\u0001\u0002 not http at all\r\n\r\n'],
      ['a second request after Connection: close', 'GET /after HTTP/1.1\r\nHost: api.example.test\r\n\r\n'],
    ] as const) {
      it(`${transport}: an allowed request followed by ${name}: the client gets the answer and the request its event`, async () => {
        const path = `/${transport}-then-${name.length}`;
        await warm(transport, `/${transport}-warm-${name.length}`);
        const socket = await client(transport);
        const closing = name.includes('Connection') ? '\nConnection: close' : '';
        socket.write(request(transport, path, closing) + trailing);
        // The parser has refused the trailing bytes by the time the origin holds the request, not yet answered.
        await origin.arrival(path);
        origin.answer(path);
        const raw = await readAll(socket);
        assert.equal(statusOf(raw), 200, raw.slice(0, 200));
        assert.ok(raw.endsWith('answered'), 'the answer arrived whole');
        const event = await onlyDecision(path);
        assert.equal(event?.unmapped.reason_code, transport === 'forward' ? 'endpoint-allowed' : 'preset-allowed');
        assert.equal(event?.unmapped.status_code, 200);
        assert.equal(origin.received.includes('/after'), false, 'nothing after Connection: close went upstream');
        assert.equal(decisionsFor('/after').length, 0, 'no event for a request the origin never received');
      });
    }

    it(`${transport}: a client that resets after its request went upstream: the decision event keeps the allow and says so`, async () => {
      const path = `/${transport}-client-gone`;
      await warm(transport, `/${transport}-warm-gone`);
      const socket = await client(transport);
      socket.write(request(transport, path));
      await origin.arrival(path);
      // A reset, not a FIN: the listener is half-open, so a FIN alone still gets the answer relayed.
      socket.resetAndDestroy();
      const event = await onlyDecision(path);
      assert.equal(event?.action, 'Allowed');
      assert.equal(event?.unmapped.verdict, 'allow');
      assert.equal(event?.unmapped.reason_code, 'client-closed');
      assert.equal(event?.http_request?.http_method, 'GET');
      assert.equal(event?.unmapped.status_code, undefined, 'no answer was relayed');
      origin.answer(path);
    });
  }
});
