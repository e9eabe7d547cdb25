// http2/socket-reads.ts on loopback sockets: a TLS socket wrapping a TCP socket (as a terminated tunnel is) is read
// from its handle, every byte in order with no 'data' event and the end still heard; each read restarts the idle
// timeouts of the TLS socket and of the TCP socket under it, as node's own reads do; and a socket with bytes already
// buffered falls back to 'data' events with those bytes first.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect, TLSSocket } from 'node:tls';
import { readSocket } from '../../src/http2/socket-reads.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';

/** Resolves once `received()` reaches `bytes` (polled each turn of the loop). */
async function until(received: () => number, bytes: number): Promise<void> {
  while (received() < bytes) await new Promise((resolve) => setImmediate(resolve));
}

describe('readSocket', () => {
  const server: Server = createServer();
  let pki: TestPki;
  before(async () => {
    pki = await makeTestPki();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(() => server.close());

  /** The server's end as boundary terminates a tunnel (a TLSSocket over the accepted TCP socket), and the client's. */
  async function tlsPair(): Promise<{ raw: Socket; terminated: TLSSocket; client: TLSSocket }> {
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    const client = tlsConnect({ port: (server.address() as { port: number }).port, host: '127.0.0.1', ca: pki.ca.certPem });
    const [raw] = await accepted;
    const terminated = new TLSSocket(raw, { isServer: true, cert: pki.server.certPem, key: pki.server.keyPem });
    await Promise.all([once(terminated, 'secure'), once(client, 'secureConnect')]);
    return { raw, terminated, client };
  }

  it('reads a TLS socket from its handle: every byte in order, no data event, and the end still heard', async () => {
    const { terminated, client } = await tlsPair();
    // Larger than one TLS record, so that it arrives in several reads.
    const body = Buffer.alloc(100_000, 'x');
    const chunks: Buffer[] = [];
    readSocket(terminated, (chunk) => chunks.push(chunk));
    const ended = once(terminated, 'end');
    client.end(body);
    await ended;
    assert.equal(terminated.listenerCount('data'), 0);
    assert.ok(chunks.length > 1);
    assert.ok(Buffer.concat(chunks).equals(body));
    terminated.destroy();
  });

  it('restarts the idle timeouts of the socket and of the TCP socket under it on every read', async () => {
    const { raw, terminated, client } = await tlsPair();
    raw.setTimeout(60_000);
    terminated.setTimeout(60_000);
    const refreshed = { raw: 0, terminated: 0 };
    for (const [name, socket] of [['raw', raw], ['terminated', terminated]] as const) {
      const timer = Object.getOwnPropertySymbols(socket).find((s) => s.description === 'timeout');
      assert.ok(timer !== undefined);
      const t = (socket as unknown as Record<symbol, { refresh(): unknown } | undefined>)[timer];
      assert.ok(t !== undefined);
      const refresh = t.refresh.bind(t);
      t.refresh = () => {
        refreshed[name]++;
        return refresh();
      };
    }
    let received = 0;
    readSocket(terminated, (chunk) => {
      received += chunk.length;
    });
    try {
      for (let i = 1; i <= 5; i++) {
        client.write('y'.repeat(10));
        await until(() => received, 10 * i);
      }
      assert.ok(refreshed.terminated >= 5, `TLS socket's timeout restarted ${refreshed.terminated} times`);
      assert.ok(refreshed.raw >= 5, `TCP socket's timeout restarted ${refreshed.raw} times`);
    } finally {
      client.destroy();
      terminated.destroy();
    }
  });

  it('falls back to data events when the socket already holds bytes, and hands those over first', async () => {
    const { terminated, client } = await tlsPair();
    terminated.pause();
    terminated.unshift(Buffer.from('kept '));
    const chunks: Buffer[] = [];
    readSocket(terminated, (chunk) => chunks.push(chunk));
    terminated.resume();
    client.write('then read');
    await until(() => Buffer.concat(chunks).length, 14);
    assert.deepEqual([terminated.listenerCount('data'), Buffer.concat(chunks).toString()], [1, 'kept then read']);
    client.destroy();
    terminated.destroy();
  });
});
