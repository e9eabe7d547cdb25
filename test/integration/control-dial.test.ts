import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { before, describe, it } from 'node:test';
import { ControlFailure, dialSupervisor } from '../../src/control/dial.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { makeTestPki, type Pem, type TestPki } from '../harness/certs.js';

// A supervisor run as replicas behind one name: the lookup returns two loopback addresses, one with a TLS h2
// listener and one with nothing, on the same port.
const NAME = 'supervisor.example.test';
const UP = '127.0.0.2';
const DOWN = '127.0.0.3';

async function listen(address: string, port: number, cert: Pem): Promise<Http2SecureServer> {
  const server = createSecureServer({ cert: cert.certPem, key: cert.keyPem, minVersion: 'TLSv1.3', allowHTTP1: false });
  server.on('secureConnection', (socket) => socket.on('error', () => undefined));
  server.listen(port, address);
  await once(server, 'listening');
  return server;
}

const portOf = (server: Http2SecureServer): number => (server.address() as AddressInfo).port;

async function closed(server: Http2SecureServer): Promise<void> {
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

describe('dialSupervisor with a name that resolves to several addresses', () => {
  let pki: TestPki;
  let named: Pem;
  let otherName: Pem;
  before(async () => {
    pki = await makeTestPki();
    [named, otherName] = await Promise.all([
      issueCertificate({ ca: pki.ca, kind: 'server', names: [NAME], now: Date.now }),
      issueCertificate({ ca: pki.ca, kind: 'server', names: ['elsewhere.example.test'], now: Date.now }),
    ]);
  });

  const dial = (port: number, addresses: readonly string[], random: () => number) =>
    dialSupervisor({
      host: NAME,
      port,
      tls: { caPem: pki.ca.certPem, certPem: pki.client.certPem, keyPem: pki.client.keyPem },
      lookup: async () => addresses,
      random,
    });

  it('reaches the replica that is up whichever address it tries first', async (t) => {
    const server = await listen(UP, 0, named);
    t.after(() => closed(server));
    for (const [addresses, random] of [
      [[DOWN, UP], () => 0],
      [[UP, DOWN], () => 0.99],
      [[DOWN, UP], () => 0.99],
      [[UP, DOWN], () => 0],
    ] as const) {
      const socket = await dial(portOf(server), addresses, random);
      assert.equal(socket.remoteAddress, UP);
      assert.equal(socket.alpnProtocol, 'h2');
      // The handshake's stand-in for the rendered chain is gone: the socket answers as any TLS socket does.
      assert.equal(Object.hasOwn(socket, 'getPeerCertificate'), false);
      assert.match(socket.getPeerCertificate(true).subjectaltname ?? '', new RegExp(`DNS:${NAME}`));
      socket.destroy();
    }
  });

  it('fails once, naming every address tried, when every replica is down', async () => {
    const probe = await listen(UP, 0, named);
    const port = portOf(probe);
    await closed(probe);
    const err = await dial(port, [UP, DOWN], () => 0).then(
      () => assert.fail('dial succeeded with nothing listening'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ControlFailure);
    assert.equal(err.kind, 'connect-refused');
    assert.match(err.message, new RegExp(`${UP.replaceAll('.', '\\.')}:${port}`));
    assert.match(err.message, new RegExp(`${DOWN.replaceAll('.', '\\.')}:${port}`));
  });

  it('reports a certificate that does not name the dialled host without trying the next address', async (t) => {
    const wrong = await listen(UP, 0, otherName);
    t.after(() => closed(wrong));
    const right = await listen(DOWN, portOf(wrong), named);
    t.after(() => closed(right));
    let connections = 0;
    right.on('connection', () => {
      connections += 1;
    });
    await assert.rejects(dial(portOf(wrong), [UP, DOWN], () => 0), { kind: 'tls' });
    assert.equal(connections, 0, 'a verification failure is the same at every replica: no second dial');
  });
});
