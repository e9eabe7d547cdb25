// Issue 28 (red-team report against boundary), "a bound origin that echoes the request returns the real secret to the
// workload": response headers were redacted, bodies were not. Now the answer to a request on an endpoint with a
// credential bound is masked on its way back, length for length: HTTP/1.1 and HTTP/2, cleartext (forward proxy, h2
// by prior knowledge in a tunnel) and intercepted TLS, with Content-Length and without, a secret split across two
// reads, its Basic (base64) form, an event stream that is not held back, and an answer in a content coding boundary
// did not ask for refused. An endpoint with nothing bound is relayed untouched.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingHttpHeaders, request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { connect as h2Connect } from 'node:http2';
import type { Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { canonicalPlaceholder } from '../../src/credentials/placeholder.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { ECHO_PREFIX, type EchoOrigin, echoOrigins } from '../harness/echo-origins.js';
import { CLIENT_TIMEOUT_MS, openTunnel } from '../harness/proxy-client.js';
import { withinDeadline } from '../harness/waiters.js';

const HOST = 'echo.example.test';
const UNBOUND = 'free.example.test';
const SECRET = 'Echo-Secret-9f3c1a7e/+bd4420-kq';
const TRANSPORTS = ['h1', 'h1-tls', 'h2', 'h2-tls'] as const;
type Transport = (typeof TRANSPORTS)[number];
const LABELS: Record<Transport, string> = {
  h1: 'HTTP/1.1 through the forward proxy',
  'h1-tls': 'HTTP/1.1 in an intercepted TLS tunnel',
  h2: 'HTTP/2 by prior knowledge in a tunnel',
  'h2-tls': 'HTTP/2 in an intercepted TLS tunnel',
};

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** Every text an echo of SECRET could be found in, to assert none reached the client. */
function leaks(text: string): string[] {
  const b64 = Buffer.from(SECRET).toString('base64').replace(/=+$/, '');
  return [SECRET, encodeURIComponent(SECRET), b64, b64.slice(4, -4), Buffer.from(`user:${SECRET}`).toString('base64').slice(4, -4)].filter((form) => text.includes(form));
}

describe('issue 28: secrets echoed in response bodies are masked before the workload reads them', () => {
  let b: RunningBoundary;
  let origins: Record<Transport, EchoOrigin>;

  before(async () => {
    const pki = await makeTestPki();
    origins = await echoOrigins(pki.ca, [HOST, UNBOUND]);
    const ports = TRANSPORTS.map((t) => origins[t].port);
    const endpoints = (host: string) =>
      ports.map((port) => `      - host: ${host}\n        port: ${port}\n        protocol: rest\n        enforcement: enforce\n        access: full\n`).join('');
    const credentials = createStaticCredentialSource({
      providers: [{ name: 'echo', env: { ECHO_TOKEN: SECRET }, endpoints: ports.map((port) => ({ host: HOST, port })) }],
    });
    b = await startBoundary({
      policy: `version: 1\nnetwork_policies:\n  echo:\n    endpoints:\n${endpoints(HOST)}${endpoints(UNBOUND)}    binaries: [{ path: "/**" }]\n`,
      names: { [HOST]: ['127.0.0.1'], [UNBOUND]: ['127.0.0.1'] },
      upstreamCaPem: pki.ca.certPem,
      credentials,
    });
  });

  after(async () => {
    await b?.close();
    await Promise.all(TRANSPORTS.map((t) => origins?.[t]?.close()));
  });

  /** One request through boundary; once the answer holds `releaseAt`, the origin may send its second write. */
  async function fetchThrough(transport: Transport, host: string, path: string, headers: OutgoingHttpHeaders, releaseAt?: string): Promise<Answer> {
    const origin = origins[transport];
    const authority = `${host}:${origin.port}`;
    const chunks: Buffer[] = [];
    let released = releaseAt === undefined;
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      if (!released && Buffer.concat(chunks).includes(releaseAt as string)) {
        released = true;
        origin.release();
      }
    };
    if (transport === 'h1' || transport === 'h1-tls') {
      let socket: Socket | undefined;
      if (transport === 'h1-tls') {
        const tunnel = await openTunnel(b.proxyPort, authority);
        socket = tlsConnect({ socket: tunnel.socket, ca: b.caPem, servername: host, ALPNProtocols: ['http/1.1'] });
        await once(socket, 'secureConnect');
      }
      const req = httpRequest({
        ...(socket === undefined ? { host: '127.0.0.1', port: b.proxyPort, path: `http://${authority}${path}`, agent: false } : { createConnection: () => socket as Socket, path }),
        headers: { host: authority, ...headers },
        timeout: CLIENT_TIMEOUT_MS,
      });
      req.end();
      const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
      res.on('data', onData);
      await once(res, 'end');
      socket?.destroy();
      return { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) };
    }
    const tunnel = await openTunnel(b.proxyPort, authority);
    const socket =
      transport === 'h2-tls' ? tlsConnect({ socket: tunnel.socket, ca: b.caPem, servername: host, ALPNProtocols: ['h2'] }) : tunnel.socket;
    const session = h2Connect(`${transport === 'h2-tls' ? 'https' : 'http'}://${authority}`, { createConnection: () => socket });
    try {
      const stream = session.request({ ':path': path, ...headers });
      const [head] = (await once(stream, 'response')) as [IncomingHttpHeaders];
      stream.on('data', onData);
      await once(stream, 'end');
      return { status: Number(head[':status']), headers: head, body: Buffer.concat(chunks) };
    } finally {
      session.destroy();
    }
  }

  const bearer = { authorization: `Bearer ${canonicalPlaceholder('ECHO_TOKEN')}` };

  for (const transport of TRANSPORTS) {
    describe(LABELS[transport], () => {
      for (const framing of ['length', 'stream'] as const) {
        it(`masks the echoed secret, framed by ${framing === 'length' ? 'Content-Length' : 'the stream alone'}, whole and split across two reads`, async () => {
          for (const split of [undefined, 1, 9, SECRET.length - 1]) {
            const query = `framing=${framing}${split === undefined ? '' : `&split=${'Bearer '.length + split}`}`;
            const answer = await withinDeadline(fetchThrough(transport, HOST, `/echo?${query}`, bearer, split === undefined ? undefined : ECHO_PREFIX), `${transport} ${query}`, 10_000);
            assert.equal(answer.status, 200);
            const origin = origins[transport].seen.at(-1);
            assert.equal(origin?.authorization, `Bearer ${SECRET}`, 'boundary injected the secret');
            assert.equal(origin?.acceptEncoding, 'identity', 'and asked for an unencoded answer');
            const text = answer.body.toString('utf8');
            assert.deepEqual(leaks(text), [], `${query}: ${text}`);
            const echoed = (JSON.parse(text) as { echo: string }).echo;
            assert.equal(echoed.length, `Bearer ${SECRET}`.length, 'masked length for length: the framing holds');
            assert.match(echoed, /^Bearer \[redacted\]\**$/);
            if (framing === 'length') assert.equal(Number(answer.headers['content-length']), answer.body.length);
          }
        });
      }

      it('masks the base64 inside an echoed Basic credential, split inside it', async () => {
        const basic = { authorization: `Basic ${Buffer.from(`user:${canonicalPlaceholder('ECHO_TOKEN')}`).toString('base64')}` };
        const answer = await fetchThrough(transport, HOST, '/echo?framing=stream&split=20', basic, ECHO_PREFIX);
        assert.equal(origins[transport].seen.at(-1)?.authorization, `Basic ${Buffer.from(`user:${SECRET}`).toString('base64')}`);
        const text = answer.body.toString('utf8');
        assert.deepEqual(leaks(text), [], text);
        assert.equal(Buffer.from((JSON.parse(text) as { echo: string }).echo.slice('Basic '.length), 'base64').toString('utf8').includes(SECRET), false);
      });

      it('refuses an answer in a content coding it asked the origin not to use', async () => {
        const answer = await fetchThrough(transport, HOST, '/gzip', { ...bearer, 'accept-encoding': 'gzip' });
        assert.equal(answer.status, 502);
        assert.equal((JSON.parse(answer.body.toString('utf8')) as { error: string }).error, 'credential_response_unreadable');
        assert.equal(origins[transport].seen.at(-1)?.acceptEncoding, 'identity');
      });
    });
  }

  it('releases each event of an event stream at once: only a tail that could begin the secret waits', async () => {
    const answer = await withinDeadline(fetchThrough('h1', HOST, '/sse', bearer, 'data: one\n\n'), 'event stream', 10_000);
    const text = answer.body.toString('utf8');
    assert.ok(text.startsWith('data: one\n\ndata: Bearer [redacted]'), text);
    assert.deepEqual(leaks(text), []);
  });

  it('writes one finding for an answer that echoed a credential', async () => {
    await fetchThrough('h1', HOST, '/echo', bearer);
    const finding = await b.log.waitFor((e) => e.finding_info?.title === 'credential-echoed' || e.unmapped?.finding === 'credential-echoed');
    assert.equal(finding.severity, 'High');
    assert.ok(!b.log.text().includes(SECRET), 'no secret in a log line');
  });

  it('relays the answer of an endpoint with no credential bound untouched, as the client asked for it', async () => {
    const answer = await fetchThrough('h1', UNBOUND, '/echo', { authorization: `Bearer ${SECRET}`, 'accept-encoding': 'gzip' });
    assert.equal(origins.h1.seen.at(-1)?.acceptEncoding, 'gzip');
    assert.equal(JSON.parse(answer.body.toString('utf8')).echo, `Bearer ${SECRET}`);
  });
});
