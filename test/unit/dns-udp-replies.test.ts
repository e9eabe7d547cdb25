import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { createDnsServer, NO_RESPONSE } from '../../src/dns/server.js';
import {
  createUdpReplies,
  MAX_HELD_UDP_REPLIES,
  MAX_HOLD_MS_PER_REPLY,
  SEND_AT_ONCE_MS,
  SLOW_TURNS_TO_SEND_AT_ONCE,
} from '../../src/dns/udp-replies.js';
import { testTimers } from '../harness/clock.js';

async function bound(): Promise<Socket> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return socket;
}

/** The next `count` datagrams `socket` receives, as text. */
function receive(socket: Socket, count: number): Promise<string[]> {
  const got: string[] = [];
  return new Promise((resolve) => {
    const onMessage = (message: Buffer): void => {
      got.push(message.toString());
      if (got.length < count) return;
      socket.off('message', onMessage);
      resolve(got);
    };
    socket.on('message', onMessage);
  });
}

/** Counts the sends `socket` is asked for. */
function countSends(socket: Socket): { readonly count: () => number } {
  const send = socket.send.bind(socket) as (...args: unknown[]) => void;
  let sends = 0;
  (socket as unknown as { send: (...args: unknown[]) => void }).send = (...args) => {
    sends++;
    send(...args);
  };
  return { count: () => sends };
}

describe('UDP answers held to the end of the loop turn', () => {
  let server: Socket;
  let client: Socket;
  before(async () => {
    server = await bound();
    client = await bound();
  });
  after(() => {
    server.close();
    client.close();
  });

  /** For the timing tests: a holder on the test clock, the server's send counter, and the client's port. */
  function timed() {
    const timers = testTimers();
    return { sends: countSends(server), timers, replies: createUdpReplies(() => {}, timers), port: client.address().port };
  }

  it('sends the answers of one turn after it, in the order given', async () => {
    const sends = countSends(server);
    const errors: unknown[] = [];
    const replies = createUdpReplies((err) => errors.push(err));
    const arrived = receive(client, 3);
    const { port } = client.address();
    for (const text of ['one', 'two', 'three']) replies.send(server, Buffer.from(text), port, '127.0.0.1');
    assert.equal(sends.count(), 0, 'nothing is sent within the turn');
    await turn();
    assert.equal(sends.count(), 3);
    assert.deepEqual(await arrived, ['one', 'two', 'three']);
    assert.deepEqual(errors, []);
  });

  it('sends every held answer at once when the bound is reached', async () => {
    const sends = countSends(server);
    const replies = createUdpReplies(() => {});
    const arrived = receive(client, MAX_HELD_UDP_REPLIES + 1);
    const { port } = client.address();
    for (let i = 0; i < MAX_HELD_UDP_REPLIES; i++) replies.send(server, Buffer.from(String(i)), port, '127.0.0.1');
    assert.equal(sends.count(), MAX_HELD_UDP_REPLIES, 'the answer that reaches the bound sends them all');
    replies.send(server, Buffer.from('last'), port, '127.0.0.1');
    assert.equal(sends.count(), MAX_HELD_UDP_REPLIES);
    await turn();
    assert.equal(sends.count(), MAX_HELD_UDP_REPLIES + 1);
    const texts = await arrived;
    assert.deepEqual(texts, [...Array.from({ length: MAX_HELD_UDP_REPLIES }, (_, i) => String(i)), 'last']);
  });

  it("reports a closed socket's refusal and still sends the answers beside it", async () => {
    const gone = await bound();
    gone.close();
    const errors: unknown[] = [];
    const replies = createUdpReplies((err) => errors.push(err));
    const arrived = receive(client, 1);
    const { port } = client.address();
    replies.send(gone, Buffer.from('lost'), port, '127.0.0.1');
    replies.send(server, Buffer.from('kept'), port, '127.0.0.1');
    replies.flush();
    assert.equal(errors.length, 1);
    assert.equal((errors[0] as NodeJS.ErrnoException).code, 'ERR_SOCKET_DGRAM_NOT_RUNNING');
    assert.deepEqual(await arrived, ['kept']);
    await turn();
    assert.equal(errors.length, 1, 'a flushed answer is not sent again');
  });

  it('keeps holding while a burst takes only its own handling', async () => {
    const { sends, timers, replies, port } = timed();
    const burst = 32;
    const arrived = receive(client, burst + 1);
    for (let i = 0; i < burst; i++) {
      replies.send(server, Buffer.from(String(i)), port, '127.0.0.1');
      timers.advance(MAX_HOLD_MS_PER_REPLY * 0.9);
    }
    await turn();
    assert.equal(sends.count(), burst);
    replies.send(server, Buffer.from('next'), port, '127.0.0.1');
    assert.equal(sends.count(), burst, 'the next turn holds its answers too');
    await turn();
    assert.equal((await arrived).length, burst + 1);
    assert.equal(timers.pending, 0);
  });

  it('keeps holding after fewer slow turns in a row than it takes', async () => {
    const { sends, timers, replies, port } = timed();
    const turns = 2 * SLOW_TURNS_TO_SEND_AT_ONCE;
    const arrived = receive(client, turns + 1);
    for (let i = 0; i < turns; i++) {
      replies.send(server, Buffer.from(String(i)), port, '127.0.0.1');
      // Every turn but the last of each run slow: a collection now and then.
      if ((i + 1) % SLOW_TURNS_TO_SEND_AT_ONCE !== 0) timers.advance(1);
      await turn();
      assert.equal(sends.count(), i + 1);
    }
    replies.send(server, Buffer.from('held'), port, '127.0.0.1');
    assert.equal(sends.count(), turns, 'still held');
    await turn();
    assert.equal((await arrived).length, turns + 1);
    assert.equal(timers.pending, 0);
  });

  it('sends at once for a while after turns in a row whose answers waited on other work, then holds again', async () => {
    const { sends, timers, replies, port } = timed();
    const slow = SLOW_TURNS_TO_SEND_AT_ONCE;
    const arrived = receive(client, 2 * slow + 2);
    for (let i = 0; i < slow; i++) {
      replies.send(server, Buffer.from(`held ${i}`), port, '127.0.0.1');
      replies.send(server, Buffer.from(`held ${i} too`), port, '127.0.0.1');
      assert.equal(sends.count(), 2 * i, 'held within the turn');
      // The rest of the turn: the proxy's connections, a millisecond of them.
      timers.advance(1);
      await turn();
      assert.equal(sends.count(), 2 * i + 2);
    }
    assert.equal(timers.pending, 1);
    replies.send(server, Buffer.from('at once'), port, '127.0.0.1');
    assert.equal(sends.count(), 2 * slow + 1, 'sent as it was made');
    timers.advance(SEND_AT_ONCE_MS - 1);
    assert.equal(timers.pending, 1, 'still sending at once just before the second is over');
    timers.advance(1);
    assert.equal(timers.pending, 0);
    replies.send(server, Buffer.from('held again'), port, '127.0.0.1');
    assert.equal(sends.count(), 2 * slow + 1, 'held again once the while is over');
    await turn();
    assert.equal(sends.count(), 2 * slow + 2);
    assert.deepEqual(await arrived, [
      ...Array.from({ length: slow }, (_, i) => [`held ${i}`, `held ${i} too`]).flat(),
      'at once',
      'held again',
    ]);
  });
});

describe('policy DNS server: held answers', () => {
  it('sends an answer made while the server closes before its socket closes', async () => {
    const faults: unknown[] = [];
    let closing: Promise<void> | undefined;
    const server = createDnsServer({
      host: '127.0.0.1',
      port: 0,
      onError: (err) => faults.push(err),
      handler: {
        answer(message) {
          closing = server.close();
          return message.length > 0 ? Buffer.from('answer') : NO_RESPONSE;
        },
      },
    });
    await server.start();
    const client = await bound();
    try {
      // Bounded: without the flush the answer never comes.
      const reply = once(client, 'message', { signal: AbortSignal.timeout(10_000) });
      client.send(Buffer.from('query'), server.address().port, '127.0.0.1');
      const [message] = (await reply) as [Buffer];
      assert.equal(message.toString(), 'answer');
      await closing;
      assert.deepEqual(faults, []);
    } finally {
      client.close();
    }
  });
});
