// Regression of issue 28 (lower item, "DNS over TCP"): policy DNS stopped answering new TCP clients once 128
// connections were open, and an idle or slow client held its place: any I/O reset the idle timer. Now a connection
// with no query in progress is closed after TCP_IDLE_TIMEOUT_MS (bytes of an unfinished query do not count), and at
// the limit a new client takes the place of the connection idle longest; only when every connection has a query in
// progress is the new one accepted and closed at once, counted. UDP is not involved.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { createDnsServer, type DnsHandler, type DnsServer, MAX_TCP_CONNECTIONS, TCP_IDLE_TIMEOUT_MS } from '../../src/dns/server.js';
import { buildQuery, udpExchange } from '../harness/dns-client.js';

/** Queries the handler holds: each one's release, and a wait for the n-th to arrive. */
interface Held {
  readonly releases: (() => void)[];
  arrived(count: number): Promise<void>;
}

function holder(): Held & { hold(release: () => void): void } {
  const releases: (() => void)[] = [];
  const waits: { count: number; resolve: () => void }[] = [];
  return {
    releases,
    arrived: (count) => (releases.length >= count ? Promise.resolve() : new Promise((resolve) => waits.push({ count, resolve }))),
    hold(release) {
      releases.push(release);
      for (const w of waits.filter((w) => releases.length >= w.count)) w.resolve();
    },
  };
}

/** Answers every query at once with its own header and question (QR set), except names starting `hold`, held until released. */
function handler(held: ReturnType<typeof holder>): DnsHandler {
  const answer = (message: Buffer): Buffer => {
    const out = Buffer.from(message);
    out[2] = (out[2] ?? 0) | 0x80;
    return out;
  };
  return {
    answer: (message) => (message.includes(Buffer.from('hold')) ? new Promise((resolve) => held.hold(() => resolve(answer(message)))) : answer(message)),
  };
}

async function start(t: TestContext): Promise<{ server: DnsServer; port: number; held: Held }> {
  const held = holder();
  const server = createDnsServer({ host: '127.0.0.1', port: 0, handler: handler(held) });
  await server.start();
  t.after(() => server.close());
  return { server, port: server.address().port, held };
}

interface Client {
  readonly socket: Socket;
  readonly closed: Promise<void>;
  /** Sends one length-prefixed query; resolves with the answer's id. */
  ask(name: string, id: number): Promise<number>;
}

async function client(port: number): Promise<Client> {
  const socket = connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await once(socket, 'connect');
  let buffered = Buffer.alloc(0);
  const waiting: ((id: number) => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
      const id = buffered.readUInt16BE(2);
      buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
      waiting.shift()?.(id);
    }
  });
  return {
    socket,
    closed,
    ask(name, id) {
      const query = buildQuery(name, 'A', { id });
      const prefix = Buffer.alloc(2);
      prefix.writeUInt16BE(query.length);
      socket.write(Buffer.concat([prefix, query]));
      return new Promise((resolve, reject) => {
        waiting.push(resolve);
        socket.once('close', () => reject(new Error(`connection closed before the answer to ${name}`)));
      });
    },
  };
}

/** A client that asked once and was answered, then kept its connection open with nothing to ask. */
async function idleClient(port: number, id: number): Promise<Client> {
  const c = await client(port);
  assert.equal(await c.ask(`idle${id}.example.test`, id), id);
  return c;
}

describe('issue 28: DNS over TCP under idle and slow clients', () => {
  it(`answers a new client when ${MAX_TCP_CONNECTIONS} idle or trickling connections are open, closing the one idle longest`, async (t) => {
    const s = await start(t);
    const clients: Client[] = [];
    for (let i = 0; i < MAX_TCP_CONNECTIONS; i++) clients.push(await idleClient(s.port, i));
    // Some of them trickle the first bytes of a next query: still idle, since no query is complete.
    for (const c of clients.slice(-8)) c.socket.write(Buffer.from([0, 40, 0x12]));
    assert.equal(s.server.stats().tcpConnections, MAX_TCP_CONNECTIONS);
    const late = await client(s.port);
    assert.equal(await late.ask('late.example.test', 7), 7);
    await clients[0]?.closed;
    assert.deepEqual(s.server.stats().tcpClosed, { idle: 0, reclaimed: 1, 'over-limit': 0 });
    // The next newcomer takes the next oldest idle place, not a trickling one's.
    const later = await client(s.port);
    assert.equal(await later.ask('later.example.test', 8), 8);
    await clients[1]?.closed;
    assert.equal(s.server.stats().tcpConnections, MAX_TCP_CONNECTIONS);
    for (const c of [...clients, late, later]) c.socket.destroy();
  });

  it('accepts and closes a new client at once, counted, when every connection has a query in progress; UDP still answers', async (t) => {
    const s = await start(t);
    const busy: Client[] = [];
    const answers: Promise<number>[] = [];
    for (let i = 0; i < MAX_TCP_CONNECTIONS; i++) {
      const c = await client(s.port);
      busy.push(c);
      answers.push(c.ask(`hold${i}.example.test`, i));
    }
    // Every connection's query reached the handler: none of them is idle.
    await s.held.arrived(MAX_TCP_CONNECTIONS);
    const refused = await client(s.port);
    await refused.closed;
    assert.equal(s.server.stats().tcpClosed['over-limit'], 1);
    const udp = await udpExchange(s.port, buildQuery('udp.example.test', 'A', { id: 99 }));
    assert.equal(udp?.readUInt16BE(0), 99, 'UDP is answered meanwhile');
    // Once their answers are out, the busy connections are idle, and a new client gets a place again.
    for (const release of s.held.releases) release();
    assert.deepEqual(await Promise.all(answers), busy.map((_, i) => i));
    const next = await client(s.port);
    assert.equal(await next.ask('next.example.test', 5), 5);
    for (const c of [...busy, next]) c.socket.destroy();
  });

  it('closes a connection idle for TCP_IDLE_TIMEOUT_MS, counted from the last answer; unfinished queries do not reset it', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const s = await start(t);
    const quiet = await idleClient(s.port, 1);
    const trickling = await idleClient(s.port, 2);
    const asking = await idleClient(s.port, 3);
    t.mock.timers.tick(TCP_IDLE_TIMEOUT_MS / 2);
    trickling.socket.write(Buffer.from([0, 40, 0x12, 0x34]));
    assert.equal(await asking.ask('again.example.test', 4), 4, 'a complete query starts the wait again');
    t.mock.timers.tick(TCP_IDLE_TIMEOUT_MS / 2 - 1);
    assert.equal(s.server.stats().tcpConnections, 3, 'nothing closed before the timeout');
    t.mock.timers.tick(1);
    await Promise.all([quiet.closed, trickling.closed]);
    assert.equal(asking.socket.destroyed, false);
    t.mock.timers.tick(TCP_IDLE_TIMEOUT_MS / 2);
    await asking.closed;
    assert.deepEqual(s.server.stats().tcpClosed, { idle: 3, reclaimed: 0, 'over-limit': 0 });
  });
});
