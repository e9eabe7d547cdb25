import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { createServer, type Server } from 'node:tls';
import { describe, it } from 'node:test';
import { createUpstreams } from '../../src/proxy/upstream.js';

const certs = new URL('../../fixtures/certs/', import.meta.url);
const read = (name: string): string => readFileSync(new URL(name, certs), 'utf8');

async function tlsServer(options: { cert: string; key: string }): Promise<{ server: Server; port: number }> {
  const server = createServer({ cert: options.cert, key: options.key }, (socket) => {
    socket.on('error', () => socket.destroy());
    socket.end('ok');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return { server, port: address.port };
}

async function dial(port: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port });
  await once(socket, 'connect');
  return socket;
}

describe('upstream TLS session resumption', () => {
  it('resumes the session of a verified upstream on the next connection to the same name and address', async (t) => {
    const { server, port } = await tlsServer({ cert: read('server.pem'), key: read('server.key') });
    const upstreams = createUpstreams({ connectTimeoutMs: 2_000, extraCaPem: read('ca.pem') });
    t.after(async () => {
      await upstreams.close();
      server.close();
    });
    const reused: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const tls = await upstreams.secureSocket(await dial(port), { host: 'localhost', port });
      reused.push(tls.isSessionReused());
      tls.resume();
      // Reading to the end also receives the TLS 1.3 session ticket.
      await once(tls, 'end');
      tls.destroy();
    }
    assert.deepEqual(reused, [false, true, true]);
  });

  it('never stores a session from an upstream that failed verification', async (t) => {
    // A certificate from another CA: every attempt must fail verification, none may be resumed.
    const { server, port } = await tlsServer({ cert: read('other-ca-client.pem'), key: read('other-ca-client.key') });
    const upstreams = createUpstreams({ connectTimeoutMs: 2_000, extraCaPem: read('ca.pem') });
    t.after(async () => {
      await upstreams.close();
      server.close();
    });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(upstreams.secureSocket(await dial(port), { host: 'localhost', port }));
    }
  });
});
