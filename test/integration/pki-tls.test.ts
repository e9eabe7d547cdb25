import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { type ConnectionOptions, connect, createServer, type SecureContext, TLSSocket, type TlsOptions } from 'node:tls';
import { parseSandboxSpiffeId } from '../../src/pki/issue.js';
import { createLeafCache } from '../../src/pki/leaf.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';

const FIXTURES = new URL('../../fixtures/certs/', import.meta.url);

/** A TLS server on 127.0.0.1:0 that answers `ok <sandbox id | ->` to every authorised connection. */
async function tlsServer(t: TestContext, options: TlsOptions) {
  const clientErrors: Error[] = [];
  const server = createServer(options, (socket: TLSSocket) => {
    if (options.requestCert === true && !socket.authorized) {
      socket.end(`denied ${String(socket.authorizationError)}`);
      return;
    }
    const san = socket.getPeerCertificate().subjectaltname ?? '';
    const identity = parseSandboxSpiffeId(san.replace(/^URI:/, ''));
    socket.end(`ok ${identity?.sandboxId ?? '-'}`);
  });
  server.on('tlsClientError', (err) => clientErrors.push(err));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, clientErrors };
}

/** Connects and reads until close: the text the server sent, or the error that ended the connection. */
async function exchange(options: ConnectionOptions): Promise<{ text: string; error?: Error; peerSan?: string }> {
  const socket = connect(options);
  let text = '';
  let peerSan: string | undefined;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    text += chunk;
  });
  socket.on('secureConnect', () => {
    peerSan = socket.getPeerCertificate().subjectaltname;
  });
  try {
    await once(socket, 'close');
  } catch (err) {
    return { text, error: err as Error };
  }
  const out: { text: string; error?: Error; peerSan?: string } = { text };
  if (peerSan !== undefined) out.peerSan = peerSan;
  return out;
}

async function closeWithError(options: ConnectionOptions): Promise<{ text: string; error: Error | undefined }> {
  const socket = connect(options);
  let text = '';
  let error: Error | undefined;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    text += chunk;
  });
  socket.on('error', (err) => {
    error = err;
  });
  await new Promise((resolve) => socket.once('close', resolve));
  return { text, error };
}

/** How the proxy terminates TLS: a raw accepted socket wrapped with the leaf's SecureContext. */
async function interceptingServer(t: TestContext, context: SecureContext) {
  const server = createNetServer((raw) => {
    const socket = new TLSSocket(raw, { isServer: true, secureContext: context });
    socket.on('secure', () => socket.end('ok -'));
    socket.on('error', () => raw.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port };
}

describe('interception leaves', () => {
  it('completes a TLS handshake for a DNS host with a cached leaf and the CA as the only trust root', async (t) => {
    const pki = await makeTestPki();
    const cache = createLeafCache({ ca: pki.ca, now: Date.now });
    const { port } = await tlsServer(t, {
      SNICallback: (servername, callback) => {
        cache.secureContextFor(servername).then((context) => callback(null, context), callback);
      },
    });
    const result = await exchange({ host: '127.0.0.1', port, servername: 'api.example.test', ca: pki.ca.certPem });
    assert.equal(result.error, undefined);
    assert.equal(result.text, 'ok -');
    assert.equal(result.peerSan, 'DNS:api.example.test');
  });

  it('completes a TLS handshake for an IP literal host with an IP address SAN', async (t) => {
    const pki = await makeTestPki();
    const cache = createLeafCache({ ca: pki.ca, now: Date.now });
    const { port } = await interceptingServer(t, await cache.secureContextFor('127.0.0.1'));
    const result = await exchange({ host: '127.0.0.1', port, ca: pki.ca.certPem });
    assert.equal(result.error, undefined);
    assert.equal(result.peerSan, 'IP Address:127.0.0.1');
  });

  it('is refused by a client that expects a different host name', async (t) => {
    const pki = await makeTestPki();
    const cache = createLeafCache({ ca: pki.ca, now: Date.now });
    const { port } = await interceptingServer(t, await cache.secureContextFor('api.example.test'));
    const result = await closeWithError({ host: '127.0.0.1', port, servername: 'other.example.test', ca: pki.ca.certPem });
    assert.equal((result.error as NodeJS.ErrnoException | undefined)?.code, 'ERR_TLS_CERT_ALTNAME_INVALID');
  });
});

describe('control-channel mTLS', () => {
  function mtlsServerOptions(pki: Pick<TestPki, 'ca' | 'server'>): TlsOptions {
    return {
      key: pki.server.keyPem,
      cert: pki.server.certPem,
      ca: pki.ca.certPem,
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.3',
    };
  }

  it('accepts the sandbox client and reads its sandbox id from the URI SAN', async (t) => {
    const pki = await makeTestPki();
    const { port } = await tlsServer(t, mtlsServerOptions(pki));
    const result = await exchange({ host: '127.0.0.1', port, ca: pki.ca.certPem, key: pki.client.keyPem, cert: pki.client.certPem });
    assert.equal(result.error, undefined);
    assert.equal(result.text, 'ok sb-1');
  });

  for (const [label, pick, reason] of [
    ['a client signed by another CA', (pki: TestPki) => pki.otherCaClient, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
    ['an expired client', (pki: TestPki) => pki.expiredClient, 'CERT_HAS_EXPIRED'],
    ['a server certificate used as a client certificate', (pki: TestPki) => pki.server, 'INVALID_PURPOSE'],
  ] as const) {
    it(`refuses ${label} (${reason})`, async (t) => {
      const pki = await makeTestPki();
      const cred = pick(pki);
      const strict = await tlsServer(t, mtlsServerOptions(pki));
      const client = { host: '127.0.0.1', ca: pki.ca.certPem, key: cred.keyPem, cert: cred.certPem };
      const refused = await closeWithError({ ...client, port: strict.port });
      assert.equal(refused.text, '');
      assert.equal(strict.clientErrors.length, 1);
      // The same handshake against a server that reports instead of refusing names the reason.
      const reporting = await tlsServer(t, { ...mtlsServerOptions(pki), rejectUnauthorized: false });
      const reported = await closeWithError({ ...client, port: reporting.port });
      assert.equal(reported.text, `denied ${reason}`);
    });
  }

  it('refuses a client that presents no certificate', async (t) => {
    const pki = await makeTestPki();
    const server = await tlsServer(t, mtlsServerOptions(pki));
    const result = await closeWithError({ host: '127.0.0.1', port: server.port, ca: pki.ca.certPem });
    assert.equal(result.text, '');
    assert.equal(server.clientErrors.length, 1);
  });

  it('accepts the fixture client and refuses the fixture expired and other-CA clients', async (t) => {
    const read = (name: string) => readFile(new URL(name, FIXTURES), 'utf8');
    const pki = { ca: { certPem: await read('ca.pem') }, server: { certPem: await read('server.pem'), keyPem: await read('server.key') } };
    const server = await tlsServer(t, mtlsServerOptions(pki as Pick<TestPki, 'ca' | 'server'>));
    const base = { host: '127.0.0.1', port: server.port, ca: pki.ca.certPem };
    const good = await exchange({ ...base, key: await read('client.key'), cert: await read('client.pem') });
    assert.equal(good.text, 'ok sb-1');
    for (const name of ['expired-client', 'other-ca-client']) {
      const bad = await closeWithError({ ...base, key: await read(`${name}.key`), cert: await read(`${name}.pem`) });
      assert.equal(bad.text, '', name);
    }
    assert.equal(server.clientErrors.length, 2);
  });
});
