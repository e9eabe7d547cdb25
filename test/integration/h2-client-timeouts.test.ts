// h2-client's response-head deadline against a loopback node:http2 origin that holds its answers, on fake timers:
// H2_UPSTREAM_HEADERS_TIMEOUT_MS checked to the millisecond per stream, restarted by request body writes, and run by
// one timer for every waiting stream of a client.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type ServerHttp2Stream } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import type { BoundaryError } from '../../src/shared/errors.js';
import { createH2Client, H2_UPSTREAM_HEADERS_TIMEOUT_MS, type H2Client, type H2Handler } from '../../src/http2/h2-client.js';
import { testTimers, type TestTimers } from '../harness/clock.js';
import { type WaiterList, waiterList } from '../harness/waiters.js';

const HEAD_MS = H2_UPSTREAM_HEADERS_TIMEOUT_MS;

/** A cleartext HTTP/2 origin that answers nothing until told: each stream is recorded with the bytes it sent. */
async function holdingOrigin(): Promise<{ port: number; streams: WaiterList<{ stream: ServerHttp2Stream; path: string }>; bytes: WaiterList<number> }> {
  const server = createServer();
  const streams = waiterList<{ stream: ServerHttp2Stream; path: string }>();
  const bytes = waiterList<number>();
  let received = 0;
  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    stream.on('data', (chunk: Buffer) => {
      received += chunk.length;
      bytes.push(received);
    });
    streams.push({ stream, path: String(headers[':path']) });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  after(() => {
    server.close();
  });
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return { port: address.port, streams, bytes };
}

function clientTo(port: number, timers: TestTimers): H2Client {
  const client = createH2Client({
    timers,
    connect: () =>
      new Promise<Socket>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => resolve(socket));
        socket.once('error', reject);
      }),
  });
  after(() => client.destroy());
  return client;
}

/** A request whose outcome is a promise: the status of its head, or the error it failed with. */
function send(client: H2Client, path: string, body: AsyncIterable<Buffer> | null = null): { head: Promise<number>; error: Promise<Error> } {
  let onHead: (status: number) => void = () => undefined;
  let onError: (err: Error) => void = () => undefined;
  const head = new Promise<number>((resolve) => {
    onHead = resolve;
  });
  const error = new Promise<Error>((resolve) => {
    onError = resolve;
  });
  const handler: H2Handler = { onHead: (status) => onHead(status), onData() {}, onTrailers() {}, onEnd() {}, onError: (err) => onError(err) };
  client.request({ method: body === null ? 'GET' : 'POST', target: path, headers: ['host', 'origin.test'], body, scheme: 'http', teTrailers: false }, handler);
  return { head, error };
}

/** Settles to 'pending' when `p` has not settled by the time already-due I/O callbacks ran. */
async function state(p: Promise<unknown>): Promise<'settled' | 'pending'> {
  return Promise.race([p.then(() => 'settled' as const), new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending')))]);
}

describe('h2-client response-head deadline', { timeout: 20_000 }, () => {
  it(`fails a stream with UPSTREAM_TIMEOUT when no response head arrives within ${HEAD_MS} ms`, async () => {
    const timers = testTimers();
    const origin = await holdingOrigin();
    const call = send(clientTo(origin.port, timers), '/silent');
    const { stream } = await origin.streams.waitFor((s) => s.path === '/silent', 5_000, 'the request');
    timers.advance(HEAD_MS - 1);
    assert.equal(await state(call.error), 'pending');
    timers.advance(1);
    assert.equal(((await call.error) as BoundaryError).code, 'UPSTREAM_TIMEOUT');
    // The origin's stream is cancelled, not left open.
    await once(stream, 'close');
    assert.equal(stream.rstCode, 8);
  });

  it('restarts the deadline with every request body chunk, as stream inactivity does', async () => {
    const timers = testTimers();
    const origin = await holdingOrigin();
    const released = waiterList<number>();
    async function* body(): AsyncGenerator<Buffer> {
      for (let i = 1; i <= 3; i++) {
        await released.waitFor((n) => n === i, 5_000, `release of chunk ${i}`);
        yield Buffer.from('x');
      }
    }
    const call = send(clientTo(origin.port, timers), '/upload', body());
    await origin.streams.waitFor((s) => s.path === '/upload', 5_000, 'the request');
    // Each chunk goes up just before the deadline: 4 x (HEAD_MS - 1) ms in all, never HEAD_MS without a write.
    for (let i = 1; i <= 3; i++) {
      timers.advance(HEAD_MS - 1);
      assert.equal(await state(call.error), 'pending');
      released.push(i);
      await origin.bytes.waitFor((n) => n >= i, 5_000, `${i} body bytes`);
    }
    timers.advance(HEAD_MS - 1);
    assert.equal(await state(call.error), 'pending');
    timers.advance(1);
    assert.equal(((await call.error) as BoundaryError).code, 'UPSTREAM_TIMEOUT');
  });

  it('runs every waiting stream of a client on one timer, each to its own deadline; an answered stream never times out', async () => {
    const timers = testTimers();
    const origin = await holdingOrigin();
    const client = clientTo(origin.port, timers);
    const first = send(client, '/first');
    await origin.streams.waitFor((s) => s.path === '/first', 5_000, 'the first request');
    timers.advance(HEAD_MS / 2);
    const second = send(client, '/second');
    const answered = send(client, '/answered');
    await origin.streams.waitFor((s) => s.path === '/second', 5_000, 'the second request');
    const { stream } = await origin.streams.waitFor((s) => s.path === '/answered', 5_000, 'the answered request');
    assert.equal(timers.pending, 1, 'one timer for the three streams');
    stream.respond({ ':status': 200 });
    assert.equal(await answered.head, 200);
    timers.advance(HEAD_MS / 2);
    assert.equal(((await first.error) as BoundaryError).code, 'UPSTREAM_TIMEOUT');
    assert.equal(await state(second.error), 'pending');
    timers.advance(HEAD_MS / 2 - 1);
    assert.equal(await state(second.error), 'pending');
    timers.advance(1);
    assert.equal(((await second.error) as BoundaryError).code, 'UPSTREAM_TIMEOUT');
    assert.equal(await state(answered.error), 'pending');
    timers.advance(HEAD_MS * 2);
    assert.equal(await state(answered.error), 'pending');
  });
});
