// A passthrough tunnel's downloads read into the relay's buffers (src/chain/bulk-reads.ts) and are written to the
// client straight from them: every byte arrives in order through slow clients, bytes sent before the relay took
// the socket, half-closes, many transfers at once (more than there are own buffers) and clients that leave.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { BULK_READ_BYTES, bulkReadBuffersInUse, MAX_BULK_READ_BUFFERS, sendReadsTo } from '../../src/chain/bulk-reads.js';
import { netDial } from '../../src/chain/dial.js';
import { relayRaw, type TunnelEndCause } from '../../src/proxy/tunnel.js';

const IDLE_MS = 60_000;
const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** Deterministic bytes (xorshift32), so a lost, doubled or reordered chunk changes the digest. */
function pattern(bytes: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(bytes);
  let x = seed | 1;
  for (let i = 0; i < bytes; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
const digest = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function listen(onConnection: (s: Socket) => void): Promise<number> {
  const server = createServer({ allowHalfOpen: true }, onConnection);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as { port: number }).port;
}

interface Tunnel {
  readonly client: Socket;
  readonly closed: Promise<TunnelEndCause | undefined>;
}

/** client -> proxy side -relayRaw- upstream dialled for bulk reads -> origin; `beforeRelay` runs between dial and relay. */
async function tunnel(originPort: number, beforeRelay?: (upstream: Socket) => Promise<void>): Promise<Tunnel> {
  const upstream = await netDial({ host: '127.0.0.1', port: originPort, bulkReads: true });
  await beforeRelay?.(upstream);
  let onClosed: (cause?: TunnelEndCause) => void = () => undefined;
  const closed = new Promise<TunnelEndCause | undefined>((resolve) => {
    onClosed = resolve;
  });
  const port = await listen((proxySide) => relayRaw(proxySide, upstream, IDLE_MS, onClosed));
  const client = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  await once(client, 'connect');
  return { client, closed };
}

/** Reads everything until end, pausing `pauses` times for a few ms (a slow client). */
async function readAll(socket: Socket, pauses = 0): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let left = pauses;
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    if (left > 0 && chunks.length % 4 === 0) {
      left--;
      socket.pause();
      setTimeout(() => socket.resume(), 5);
    }
  });
  await once(socket, 'end');
  return Buffer.concat(chunks);
}

describe('bulk reads through relayRaw', () => {
  it('takes sockets dialled for it, and only those', async () => {
    const port = await listen((s) => s.end());
    const bulk = await netDial({ host: '127.0.0.1', port, bulkReads: true });
    const plain = await netDial({ host: '127.0.0.1', port });
    assert.equal(sendReadsTo(bulk, () => true), true);
    assert.equal(sendReadsTo(plain, () => true), false);
    bulk.destroy();
    plain.destroy();
  });

  it('delivers a 48 MiB download byte for byte to a client that keeps pausing, and gives its buffer back', async () => {
    const body = pattern(48 * 1_048_576, 7);
    const port = await listen((s) => s.end(body));
    const t = await tunnel(port);
    const got = await readAll(t.client, 200);
    assert.equal(got.length, body.length);
    assert.equal(digest(got), digest(body));
    t.client.end();
    assert.equal(await t.closed, undefined);
    assert.equal(bulkReadBuffersInUse(), 0);
  });

  it('delivers what the origin sent before the relay took the socket first, then the rest, in order', async () => {
    const banner = pattern(200_000, 11);
    const rest = pattern(5 * BULK_READ_BYTES, 13);
    let origin: Socket | undefined;
    const port = await listen((s) => {
      origin = s;
      s.write(banner);
    });
    const t = await tunnel(port, async (upstream) => {
      // Nobody reads the upstream yet: the banner queues on it (node stops reading once its buffer is full).
      while (upstream.readableLength === 0) await delay(5);
      await delay(50);
    });
    origin?.end(rest);
    const got = await readAll(t.client);
    assert.equal(digest(got), digest(Buffer.concat([banner, rest])));
    t.client.end();
    await t.closed;
  });

  it('ends the client when the origin ended before the relay took the socket', async () => {
    const port = await listen((s) => s.end('bye'));
    const t = await tunnel(port, async (upstream) => {
      upstream.resume();
      await once(upstream, 'end');
    });
    const got = await readAll(t.client);
    // resume() above consumed the three bytes; what matters is the end, which arrives.
    assert.ok(got.length <= 3);
    t.client.end();
    await t.closed;
  });

  it('keeps relaying the download after the client half-closed its side', async () => {
    const body = pattern(6 * BULK_READ_BYTES, 17);
    const port = await listen((s) => {
      s.resume();
      s.once('end', () => s.end(body));
    });
    const t = await tunnel(port);
    const reading = readAll(t.client);
    t.client.end();
    assert.equal(digest(await reading), digest(body));
    await t.closed;
  });

  it(`relays ${MAX_BULK_READ_BUFFERS + 4} downloads at once (more than there are own buffers), every byte in place`, async () => {
    const count = MAX_BULK_READ_BUFFERS + 4;
    const bodies = Array.from({ length: count }, (_, i) => pattern(4 * BULK_READ_BYTES + i * 4099, 100 + i));
    let next = 0;
    const port = await listen((s) => s.end(bodies[next++] as Buffer));
    let most = 0;
    const sampler = setInterval(() => {
      most = Math.max(most, bulkReadBuffersInUse());
    }, 1);
    try {
      const tunnels: Tunnel[] = [];
      // One at a time up to the relay, so connection i gets body i.
      for (let i = 0; i < count; i++) tunnels.push(await tunnel(port));
      const got = await Promise.all(tunnels.map((t, i) => readAll(t.client, i % 3 === 0 ? 50 : 0)));
      for (let i = 0; i < count; i++) assert.equal(digest(got[i] as Buffer), digest(bodies[i] as Buffer), `download ${i}`);
      for (const t of tunnels) t.client.end();
      await Promise.all(tunnels.map((t) => t.closed));
    } finally {
      clearInterval(sampler);
    }
    assert.ok(most > 0, 'the downloads read into own buffers');
    assert.ok(most <= MAX_BULK_READ_BUFFERS, `at most ${MAX_BULK_READ_BUFFERS} own buffers (saw ${most})`);
    assert.equal(bulkReadBuffersInUse(), 0);
  });

  it('closes both sides and gives the buffer back when the client leaves mid-download', async () => {
    const body = pattern(32 * 1_048_576, 23);
    const port = await listen((s) => {
      s.on('error', () => undefined);
      s.end(body);
    });
    const t = await tunnel(port);
    let seen = 0;
    t.client.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > 4 * BULK_READ_BYTES) t.client.destroy();
    });
    const cause = await t.closed;
    assert.ok(cause === undefined || cause === 'client-reset' || cause === 'client-error', String(cause));
    assert.equal(bulkReadBuffersInUse(), 0);
  });
});
