// Found while sweeping issue 33's memory per connection: a request whose body the client's side ended early (the
// client's FIN after part of a Content-Length body, a chunk the parser refused, the request deadline passing mid-body)
// had already gone upstream, and boundary waited for the origin's answer to it. The origin was waiting for the rest of
// the body, so neither side ever moved: the client connection, the upstream connection and the origin's stayed open
// until the origin gave up (node:http: 300 s; many origins never do), past boundary's own request deadline, which
// stops counting once the server stops reading. A client that cuts uploads short held two descriptors of boundary's
// each time. Now the body's reader hears of it at once: the upstream exchange is aborted (the origin never sees the
// request whole), the connection closes, and the request's one event says why (client-closed, with the cause).

import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { head, rawClient, SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openTunnel } from '../harness/proxy-client.js';
import { listenTracked } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

/** The request deadline of the boundary that tests it (the sweep checks it once a second). */
const REQUEST_DEADLINE_MS = 1_000;
/** How long each side is given to close; the state before the fix never closed. */
const CLOSE_WAIT_MS = 15_000;

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
      - host: gql.example.test
        port: ${port}
        path: /graphql
        protocol: graphql
        enforcement: enforce
        rules: [{ allow: { operation_type: query, fields: [viewer] } }]
    binaries: [{ path: "/**" }]
`;

const NAMES = { 'l7.example.test': ['127.0.0.1'], 'gql.example.test': ['127.0.0.1'] } as const;

/** An origin that reads each request's body and records, by path, whether it ended whole and when its connection closed. */
interface CountingOrigin {
  readonly port: number;
  arrived(path: string): Promise<void>;
  /** Whether a request for `path` arrived at all. */
  got(path: string): boolean;
  /** Resolves once the connection that carried `path` closed; rejects after CLOSE_WAIT_MS. */
  closed(path: string): Promise<void>;
  whole(path: string): boolean;
  close(): Promise<void>;
}

async function countingOrigin(): Promise<CountingOrigin> {
  const events = new EventEmitter();
  const arrived = new Set<string>();
  const ended = new Set<string>();
  const closedPaths = new Set<string>();
  const server = createServer((req: IncomingMessage) => {
    const path = req.url ?? '';
    arrived.add(path);
    events.emit('arrived', path);
    req.resume();
    req.on('end', () => ended.add(path));
    req.socket.once('close', () => {
      closedPaths.add(path);
      events.emit('closed', path);
    });
  });
  const listening = await listenTracked(server);
  const until = (set: Set<string>, name: string, path: string, what: string): Promise<void> => {
    if (set.has(path)) return Promise.resolve();
    let on: (p: string) => void = () => {};
    const seen = new Promise<void>((resolve) => {
      on = (p) => {
        if (p === path) resolve();
      };
      events.on(name, on);
    });
    return withinDeadline(seen, `${what} ${path}`, CLOSE_WAIT_MS).finally(() => events.removeListener(name, on));
  };
  return {
    port: listening.port,
    arrived: (path) => until(arrived, 'arrived', path, 'the origin receiving'),
    closed: (path) => until(closedPaths, 'closed', path, 'the origin closing the connection of'),
    whole: (path) => ended.has(path),
    got: (path) => arrived.has(path),
    close: listening.close,
  };
}

/** Resolves once the proxy closed `socket`'s connection (its end or close); rejects after CLOSE_WAIT_MS. */
function proxyClosed(socket: Socket): Promise<void> {
  if (socket.readableEnded || socket.destroyed) return Promise.resolve();
  socket.resume();
  // Not events.once: it rejects on the socket's 'error', and a reset is a close here too.
  const ended = new Promise<void>((resolve) => {
    socket.once('end', resolve);
    socket.once('close', resolve);
  });
  return withinDeadline(ended, 'boundary closing the client connection', CLOSE_WAIT_MS);
}

const TRANSPORTS = ['forward', 'inspected'] as const;
type Transport = (typeof TRANSPORTS)[number];

/** How the client's side ends the body, after the head and a first part of it went out. */
const CUTS = [
  { ending: 'fin', name: 'the client closes its side (FIN) mid-body', framing: 'Content-Length: 100', first: '0123456789', detail: 'client closed before its request body ended' },
  { ending: 'bad-chunk', name: 'a chunk the parser refuses', framing: 'Transfer-Encoding: chunked', first: '5\r\nhello\r\n', detail: 'request body refused by the HTTP/1.1 parser: HPE_INVALID_CHUNK_SIZE' },
  { ending: 'deadline', name: 'the request deadline passes mid-body', framing: 'Content-Length: 100', first: '0123456789', detail: 'request body not received within the request deadline' },
] as const;

/** The client's side ends the body as `ending` says (the deadline: by sending nothing more). */
function endBody(socket: Socket, ending: (typeof CUTS)[number]['ending']): void {
  if (ending === 'fin') socket.end();
  else if (ending === 'bad-chunk') socket.write('ZZ\r\n');
}

describe('issue 33: a request body cut short ends the exchange it started', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: CountingOrigin;
  let b: RunningBoundary;

  before(async () => {
    origin = await countingOrigin();
    b = await startBoundary({ policy: policy(origin.port), names: NAMES, limits: { requestTimeoutMs: REQUEST_DEADLINE_MS } });
  });

  after(async () => {
    await b?.close();
    await origin?.close();
  });

  async function client(transport: Transport): Promise<Socket> {
    if (transport === 'forward') return rawClient(b.proxyPort);
    const tunnel = await openTunnel(b.proxyPort, `l7.example.test:${origin.port}`);
    assert.equal(tunnel.status, 200);
    return tunnel.socket;
  }

  for (const transport of TRANSPORTS) {
    for (const cut of CUTS) {
      it(`${transport}: ${cut.name}: the upstream exchange is aborted, the connection closes, the event says why`, async () => {
        const path = `/${transport}-${cut.ending}`;
        const host = `${transport === 'forward' ? 'api' : 'l7'}.example.test:${origin.port}`;
        const target = transport === 'forward' ? `http://${host}${path}` : path;
        const socket = await client(transport);
        socket.on('error', () => {});
        socket.write(head(`POST ${target} HTTP/1.1\nHost: ${host}\n${cut.framing}`) + cut.first);
        await origin.arrived(path);
        endBody(socket, cut.ending);
        await Promise.all([proxyClosed(socket), origin.closed(path)]);
        socket.destroy();
        assert.equal(origin.whole(path), false, 'the origin never got the request whole');
        const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.http_request?.url?.path === path && e.unmapped.reason_code !== 'bad-request');
        assert.equal(event.unmapped.reason_code, 'client-closed');
        assert.equal(event.unmapped.reason, cut.detail);
        assert.equal(event.action_id, 1, 'the request went upstream: the event keeps its allow');
        const decisions = b.log.decisions().filter((e) => e.class_uid === 4002 && e.http_request?.url?.path === path);
        assert.equal(decisions.length, 1, 'one decision event for the request');
      });
    }
  }

  // A GraphQL endpoint reads the whole body before it decides: the stage reading it heard nothing either.
  for (const cut of CUTS) {
    it(`a body read before the decision (GraphQL): ${cut.name}: the connection closes, nothing went upstream, the event says why`, async () => {
      const path = `/graphql?${cut.ending}`;
      const host = `gql.example.test:${origin.port}`;
      const socket = await rawClient(b.proxyPort);
      socket.on('error', () => {});
      socket.write(head(`POST http://${host}${path} HTTP/1.1\nHost: ${host}\nContent-Type: application/json\n${cut.framing}`) + cut.first);
      endBody(socket, cut.ending);
      await proxyClosed(socket);
      socket.destroy();
      // Nothing was sent: as for any client that leaves before that, NET:FAIL (docs/events.md).
      const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'client-closed' && e.unmapped.reason === cut.detail && e.action_id !== 1);
      assert.equal(event.class_uid, 4001);
      assert.equal(event.dst_endpoint?.domain, 'gql.example.test');
      assert.equal(origin.got('/graphql'), false, 'the origin received nothing');
    });
  }
});
