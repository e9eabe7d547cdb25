import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Duplex } from 'node:stream';
import { connect } from 'node:tls';
import { MAX_CLIENT_HELLO_BYTES, readClientHello } from '../../src/tls/client-hello.js';
import { sniProblem } from '../../src/proxy/sni-gate.js';

/** The first flight of Node's own TLS client, captured from an in-memory stream (no socket). */
function clientHello(servername: string | undefined): Promise<Buffer> {
  return new Promise((resolve) => {
    const wire = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        resolve(Buffer.from(chunk));
        callback();
      },
    });
    const tls = connect({ socket: wire, ...(servername === undefined ? {} : { servername }), rejectUnauthorized: false });
    tls.on('error', () => undefined);
  });
}

/** Splits one handshake record into two records carrying halves of its payload. */
function fragment(record: Buffer): Buffer {
  const payload = record.subarray(5);
  const half = Math.floor(payload.length / 2);
  const header = (length: number) => Buffer.from([record[0] ?? 0, record[1] ?? 0, record[2] ?? 0, length >> 8, length & 0xff]);
  return Buffer.concat([header(half), payload.subarray(0, half), header(payload.length - half), payload.subarray(half)]);
}

describe('readClientHello', () => {
  it('reads the SNI of a real ClientHello, lower-cased', async () => {
    assert.deepEqual(readClientHello(await clientHello('API.Example.Test')), { kind: 'hello', sni: 'api.example.test' });
  });

  it('reports no SNI when the client sent none', async () => {
    assert.deepEqual(readClientHello(await clientHello(undefined)), { kind: 'hello', sni: undefined });
  });

  it('asks for more bytes on every proper prefix, then reads a hello fragmented over two records', async () => {
    const hello = await clientHello('api.example.test');
    for (const cut of [1, 4, 5, 40, hello.length - 1]) assert.equal(readClientHello(hello.subarray(0, cut)).kind, 'more', `prefix ${cut}`);
    assert.deepEqual(readClientHello(fragment(hello)), { kind: 'hello', sni: 'api.example.test' });
  });

  it('classifies plaintext as not TLS and garbage after a handshake byte as malformed', () => {
    assert.equal(readClientHello(Buffer.from('GET / HTTP/1.1\r\n')).kind, 'not-tls');
    assert.equal(readClientHello(Buffer.from('SSH-2.0-OpenSSH_9.6\r\n')).kind, 'not-tls');
    assert.equal(readClientHello(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00])).kind, 'malformed');
    assert.equal(readClientHello(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x00])).kind, 'malformed');
  });

  it('refuses to wait for a ClientHello that claims more than the inspection limit', () => {
    const huge = MAX_CLIENT_HELLO_BYTES + 1;
    const head = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, (huge >> 16) & 0xff, (huge >> 8) & 0xff, huge & 0xff]);
    assert.equal(readClientHello(head).kind, 'malformed');
  });
});

describe('sniProblem', () => {
  it('passes plaintext, a matching SNI and a missing SNI; refuses another SNI', async () => {
    assert.equal(sniProblem(Buffer.from('PING\r\n'), 'db.example.test'), undefined);
    assert.equal(sniProblem(await clientHello('db.example.test'), 'db.example.test'), undefined);
    assert.equal(sniProblem(await clientHello(undefined), 'db.example.test'), undefined);
    assert.match(sniProblem(await clientHello('evil.example.test'), 'db.example.test') ?? '', /evil\.example\.test/);
  });
});
