// relayRaw (src/proxy/tunnel.ts), the passthrough tunnel's byte relay on real loopback sockets: bytes both ways,
// half-close, and the idle watch that replaced per-socket timeouts (issue 33: no timer re-armed per chunk). A
// tunnel closes once no byte moved either way for the idle timeout, never sooner, and traffic keeps it open.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { relayRaw, type TunnelEndCause } from '../../src/proxy/tunnel.js';

/** Short, so the test is quick; a loaded host only makes the close later, which the assertions allow. */
const IDLE_MS = 400;
/** Traffic on the busy tunnel comes this often, well inside the idle timeout. */
const TICK_MS = IDLE_MS / 4;
const BUSY_TICKS = 10;

interface Pair {
  readonly client: Socket;
  readonly proxyClientSide: Socket;
  readonly proxyUpstreamSide: Socket;
  readonly origin: Socket;
}

const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** A connected loopback pair; half-open allowed, as on the proxy's own sockets. */
async function socketPair(): Promise<[Socket, Socket]> {
  const server = createServer({ allowHalfOpen: true });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const near = connect({ port: address.port, host: '127.0.0.1', allowHalfOpen: true });
  await once(near, 'connect');
  const [far] = await accepted;
  return [near, far];
}

async function relayed(onClosed: (cause?: TunnelEndCause) => void): Promise<Pair> {
  const [client, proxyClientSide] = await socketPair();
  const [proxyUpstreamSide, origin] = await socketPair();
  // A caller's earlier socket timeout (the SNI gate arms one) must not survive into the relay.
  proxyClientSide.setTimeout(IDLE_MS);
  relayRaw(proxyClientSide, proxyUpstreamSide, IDLE_MS, onClosed);
  return { client, proxyClientSide, proxyUpstreamSide, origin };
}

function closedWith(): { promise: Promise<TunnelEndCause | undefined>; onClosed: (cause?: TunnelEndCause) => void } {
  let resolve: (cause?: TunnelEndCause) => void = () => undefined;
  const promise = new Promise<TunnelEndCause | undefined>((r) => {
    resolve = r;
  });
  return { promise, onClosed: (cause) => resolve(cause) };
}

async function read(socket: Socket, bytes: number): Promise<string> {
  let text = '';
  while (text.length < bytes) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    text += chunk.toString('latin1');
  }
  return text;
}

describe('relayRaw', () => {
  it('relays both ways and delivers what is in flight after a half-close', async () => {
    const closed = closedWith();
    const t = await relayed(closed.onClosed);
    t.client.write('ping');
    assert.equal(await read(t.origin, 4), 'ping');
    t.origin.write('pong');
    assert.equal(await read(t.client, 4), 'pong');
    t.client.end();
    await once(t.origin, 'end');
    t.origin.end('last words');
    assert.equal(await read(t.client, 10), 'last words');
    assert.equal(await closed.promise, undefined, 'a clean close on both sides has no cause');
  });

  it('arms no socket timeout: the idle watch reads byte counters instead of re-arming a timer per chunk', async () => {
    const closed = closedWith();
    const t = await relayed(closed.onClosed);
    assert.equal(t.proxyClientSide.timeout, 0);
    assert.equal(t.proxyUpstreamSide.timeout ?? 0, 0);
    t.client.destroy();
    t.origin.destroy();
    await closed.promise;
  });

  it('closes a silent tunnel at the idle timeout, never sooner, with cause idle-timeout', async () => {
    const closed = closedWith();
    const started = performance.now();
    const t = await relayed(closed.onClosed);
    const clientEnded = once(t.client, 'end');
    assert.equal(await closed.promise, 'idle-timeout');
    assert.ok(performance.now() - started >= IDLE_MS, 'closed before its idle timeout');
    await clientEnded;
    t.client.destroy();
    t.origin.destroy();
  });

  it('keeps a tunnel with traffic open past the idle timeout, then closes it once it falls silent', async () => {
    const closed = closedWith();
    let closedYet = false;
    void closed.promise.then(() => {
      closedYet = true;
    });
    const t = await relayed(closed.onClosed);
    t.origin.on('data', () => undefined);
    for (let i = 0; i < BUSY_TICKS; i++) {
      t.client.write('x');
      await delay(TICK_MS);
    }
    assert.equal(closedYet, false, `open after ${BUSY_TICKS * TICK_MS} ms of traffic every ${TICK_MS} ms`);
    const silentFrom = performance.now();
    assert.equal(await closed.promise, 'idle-timeout');
    assert.ok(performance.now() - silentFrom >= IDLE_MS - TICK_MS, 'closed before its idle timeout');
    t.client.destroy();
    t.origin.destroy();
  });
});
