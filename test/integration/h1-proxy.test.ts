import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { rawExchange, sendRequest } from '../harness/proxy-client.js';

// The forward path end to end over h1-client.ts: a raw origin scripts answers per request path.
let b: RunningBoundary;
let server: Server;
let port = 0;
const sockets: Socket[] = [];
/** Every byte value, as latin1 text: a 256-byte body and an 8 KiB one. */
const EVERY_BYTE = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));
const MANY_BYTES = EVERY_BYTE.repeat(32);

const ANSWERS: Record<string, string> = {
  '/plain': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  '/smuggle': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  '/bare-lf': 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok',
  '/headers':
    'HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-Boundary-Policy: spoofed\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok',
  '/interim': 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal',
  '/chunked': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n',
  '/repeated-length': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2 , 2\r\n\r\nok',
  '/every-byte': `HTTP/1.1 200 OK\r\nContent-Length: ${EVERY_BYTE.length}\r\n\r\n${EVERY_BYTE}`,
  '/many-bytes': `HTTP/1.1 200 OK\r\nContent-Length: ${MANY_BYTES.length}\r\n\r\n${MANY_BYTES}`,
};

before(async () => {
  server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      for (let guard = 0; guard < 8; guard++) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const path = buffered.slice(0, end).split(' ')[1] ?? '';
        buffered = buffered.slice(end + 4);
        socket.write(ANSWERS[path] ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n', 'latin1');
        // The rest of a chunked answer comes in a later write: the relay must stream, not wait for one read.
        if (path === '/chunked') setImmediate(() => socket.write('6\r\n world\r\n0\r\n\r\n'));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('origin did not bind');
  port = address.port;
  b = await startBoundary({
    policy: `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, ports: [${port}] }
    binaries: [{ path: "/**" }]
`,
  });
});

after(async () => {
  await b?.close();
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('forward requests over the strict upstream client', () => {
  const url = (path: string): string => `http://api.example.test:${port}${path}`;

  it('relays an answer and keeps one upstream connection for sequential requests', async () => {
    const before = sockets.length;
    for (let i = 0; i < 3; i++) {
      const response = await sendRequest({ proxyPort: b.proxyPort, path: url('/plain') });
      assert.equal(response.status, 200);
      assert.equal(response.body, 'ok');
    }
    assert.ok(sockets.length - before <= 1);
  });

  for (const [path, detail] of [
    ['/smuggle', /Transfer-Encoding together with Content-Length/],
    ['/bare-lf', /bare LF/],
  ] as const) {
    it(`answers 502 upstream_protocol_error to a response with broken framing (${path}) and logs upstream-protocol-error`, async () => {
      const response = await sendRequest({ proxyPort: b.proxyPort, path: url(path) });
      assert.equal(response.status, 502);
      assert.equal(JSON.parse(response.body).error, 'upstream_protocol_error');
      const event = await b.log.waitFor((e) => e.unmapped.adapter === 'forward' && e.activity_name === 'Fail' && detail.test(String(e.unmapped.reason ?? '')));
      assert.equal(event.unmapped.reason_code, 'upstream-protocol-error');
    });
  }

  it('drops hop-by-hop, nominated and X-Boundary headers and keeps duplicate Set-Cookie lines', async () => {
    const raw = await rawExchange(b.proxyPort, `GET ${url('/headers')} HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n`);
    const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
    assert.match(head, /^HTTP\/1\.1 200 /);
    assert.match(head, /\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n/);
    assert.doesNotMatch(head, /x-hop|keep-alive: timeout|spoofed/i);
  });

  it('passes one plain Content-Length on when the upstream repeated an identical one', async () => {
    const raw = await rawExchange(b.proxyPort, `GET ${url('/repeated-length')} HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n`);
    const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
    assert.match(head, /^HTTP\/1\.1 200 /);
    assert.deepEqual(head.match(/^content-length:.*$/gim), ['Content-Length: 2']);
    assert.equal(raw.slice(raw.indexOf('\r\n\r\n') + 4), 'ok');
  });

  for (const [path, body] of [
    ['/every-byte', EVERY_BYTE],
    ['/many-bytes', MANY_BYTES],
  ] as const) {
    it(`relays every byte value of a complete answer unchanged (${path})`, async () => {
      const raw = await rawExchange(b.proxyPort, `GET ${url(path)} HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n`);
      assert.match(raw, /^HTTP\/1\.1 200 /);
      assert.equal(raw.slice(raw.indexOf('\r\n\r\n') + 4), body);
    });
  }

  it('skips interim 100 and 103 answers', async () => {
    const response = await sendRequest({ proxyPort: b.proxyPort, path: url('/interim') });
    assert.equal(response.status, 200);
    assert.equal(response.body, 'final');
  });

  it('streams a chunked answer that arrives in several writes', async () => {
    const response = await sendRequest({ proxyPort: b.proxyPort, path: url('/chunked') });
    assert.equal(response.status, 200);
    assert.equal(response.body, 'hello world');
  });
});
