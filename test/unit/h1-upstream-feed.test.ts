// http1/upstream-feed.ts on loopback sockets: a plain TCP socket is read from its handle (no 'data' listener) with its
// end still heard, pause and resume stop and restart the reads, and a socket with bytes already buffered falls back
// to 'data' events with those bytes first.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { feedBytes } from '../../src/http1/upstream-feed.js';

/** A loopback server whose accepted sockets are handed out in order, and a client socket connected to it. */
async function pair(server: Server): Promise<{ client: Socket; peer: Socket }> {
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect((server.address() as { port: number }).port, '127.0.0.1');
  await once(client, 'connect');
  const [peer] = await accepted;
  return { client, peer };
}

/** Resolves once `received()` reaches `bytes` (polled each turn of the loop). */
async function until(received: () => number, bytes: number): Promise<void> {
  while (received() < bytes) await new Promise((resolve) => setImmediate(resolve));
}

describe('feedBytes', () => {
  const server = createServer();
  const ready = new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.close());

  it('reads a plain TCP socket from its handle: every byte in order, no data event, and the end still heard', async () => {
    await ready;
    const { client, peer } = await pair(server);
    const chunks: Buffer[] = [];
    feedBytes(client, (chunk) => chunks.push(chunk));
    assert.equal(client.listenerCount('data'), 0);
    const ended = once(client, 'end');
    peer.write('first ');
    await until(() => Buffer.concat(chunks).length, 6);
    peer.end('and last');
    await ended;
    assert.equal(Buffer.concat(chunks).toString(), 'first and last');
    client.destroy();
  });

  it('stops reading while paused and reads on after resume', async () => {
    await ready;
    const { client, peer } = await pair(server);
    let received = 0;
    const feed = feedBytes(client, (chunk) => {
      received += chunk.length;
    });
    peer.write('x'.repeat(10));
    await until(() => received, 10);
    feed.pause();
    peer.write('y'.repeat(20));
    // The bytes reach the client's kernel buffer; several turns pass without a read.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    assert.equal(received, 10);
    feed.resume();
    await until(() => received, 30);
    assert.equal(received, 30);
    client.destroy();
    peer.destroy();
  });

  it('falls back to data events when the socket already holds bytes, and hands those over first', async () => {
    await ready;
    const { client, peer } = await pair(server);
    client.pause();
    client.unshift(Buffer.from('kept '));
    const chunks: Buffer[] = [];
    feedBytes(client, (chunk) => chunks.push(chunk));
    assert.equal(client.listenerCount('data'), 1);
    client.resume();
    peer.write('then read');
    await until(() => Buffer.concat(chunks).length, 14);
    assert.equal(Buffer.concat(chunks).toString(), 'kept then read');
    client.destroy();
    peer.destroy();
  });
});
