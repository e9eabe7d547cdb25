// Issue 18: HTTP/2 through inspection with real clients: curl --http2 through CONNECT and transparently, nghttp for
// trailers, h2load for many streams on one connection, an origin without HTTP/2 (translated to HTTP/1.1), and
// cleartext HTTP/2 by prior knowledge (curl --http2-prior-knowledge) in a CONNECT tunnel and on a captured port.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { errorOf, FRAME, PREFACE, readFrames, settings } from '../harness/h2-frames.js';
import { type H2Origin, h2cOrigin, h2TlsOrigin } from '../harness/h2-origin.js';
import { type Origin, tlsOrigin } from '../harness/servers.js';

const run = promisify(execFile);
// No proxy variable reaches a client unless the test gives it one.
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

interface Curl {
  readonly code: string;
  readonly version: string;
  readonly body: string;
}

async function curl(args: readonly string[]): Promise<Curl> {
  const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--noproxy', '', '-w', '\n%{http_code} %{http_version}', ...args], { env: ENV });
  const cut = stdout.lastIndexOf('\n');
  const [code = '', version = ''] = stdout.slice(cut + 1).split(' ');
  return { body: stdout.slice(0, cut), code, version };
}

function rule(host: string, port: number): string {
  return `      - host: ${host}
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
          - allow: { method: POST, path: "/upload" }
`;
}

describe('issue 18: HTTP/2 clients through inspection', () => {
  let b: RunningBoundary;
  let h2: H2Origin;
  let h1Only: Origin;
  let h2c: H2Origin;
  let caFile = '';

  before(async () => {
    const pki = await makeTestPki();
    const names = ['api.example.test', 'old.example.test', '127.0.0.1'];
    [h2, h1Only, h2c] = await Promise.all([h2TlsOrigin({ ca: pki.ca, names }), tlsOrigin({ ca: pki.ca, names }), h2cOrigin()]);
    b = await startBoundary({
      upstreamCaPem: pki.ca.certPem,
      names: { 'old.example.test': ['127.0.0.1'], 'plain.example.test': ['127.0.0.1'] },
      policy: `version: 1
network_policies:
  api:
    endpoints:
${rule('api.example.test', h2.port)}${rule('old.example.test', h1Only.port)}${rule('plain.example.test', h2c.port)}    binaries: [{ path: "/**" }]
`,
    });
    caFile = join(b.dir, 'boundary-ca.pem');
    await writeFile(caFile, b.caPem as string);
  });

  after(async () => {
    await b?.close();
    await Promise.all([h2?.close(), h1Only?.close(), h2c?.close()]);
  });

  const proxy = (): string[] => ['--proxy', `http://127.0.0.1:${b.proxyPort}`];

  it('curl --http2 through CONNECT: ALPN h2 to the client and the origin, a decision per stream', async () => {
    const allowed = await curl([...proxy(), '--http2', '--cacert', caFile, `https://api.example.test:${h2.port}/allowed/one?q=1`]);
    assert.equal(allowed.code, '200');
    assert.equal(allowed.version, '2');
    const seen = JSON.parse(allowed.body) as { httpVersion: string; path: string; authority: string; headers: Record<string, string> };
    assert.equal(seen.httpVersion, '2.0', 'the origin was spoken to in HTTP/2');
    assert.equal(seen.headers.via, '2 boundary', 'Via names the version boundary received (RFC 9110 section 7.6.3)');
    assert.equal(seen.path, '/allowed/one?q=1');
    assert.equal(seen.authority, `api.example.test:${h2.port}`);
    const denied = await curl([...proxy(), '--http2', '--cacert', caFile, '-X', 'DELETE', `https://api.example.test:${h2.port}/allowed/one`]);
    assert.equal(denied.code, '403');
    assert.equal(denied.version, '2');
    const body = JSON.parse(denied.body) as { error: string; reason: string; method: string; path: string };
    assert.deepEqual([body.error, body.reason, body.method, body.path], ['policy_denied', 'no-rule-matched', 'DELETE', '/allowed/one']);
    const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.action_id === 2 && e.http_request?.http_method === 'DELETE');
    assert.equal(event.unmapped?.http_version, '2');
    assert.equal(event.unmapped?.adapter, 'l7');
  });

  it('streams a request body upstream and keeps the path canonical', async () => {
    const file = join(b.dir, 'upload.bin');
    await writeFile(file, 'x'.repeat(200_000));
    const upload = await curl([...proxy(), '--http2', '--cacert', caFile, '--data-binary', `@${file}`, `https://api.example.test:${h2.port}/upload`]);
    assert.equal(upload.code, '200');
    assert.equal((JSON.parse(upload.body) as { body: string }).body.length, 200_000);
    const dotted = await curl([...proxy(), '--http2', '--cacert', caFile, '--path-as-is', `https://api.example.test:${h2.port}/allowed/../admin`]);
    assert.equal(dotted.code, '403', '/allowed/../admin is decided as /admin');
  });

  it('translates the streams to HTTP/1.1 for an origin that offers only http/1.1', async () => {
    const res = await curl([...proxy(), '--http2', '--cacert', caFile, `https://old.example.test:${h1Only.port}/allowed/two`]);
    assert.equal(res.code, '200');
    assert.equal(res.version, '2');
    assert.equal((JSON.parse(res.body) as { url: string }).url, '/allowed/two');
    assert.equal(h1Only.seen.at(-1)?.headers.host, `old.example.test:${h1Only.port}`);
    assert.equal(h1Only.seen.at(-1)?.headers.via, '2 boundary', 'received in HTTP/2, whatever it goes on in');
  });

  it('curl --http2 transparently, through the synthetic address policy DNS handed out', async () => {
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+short', 'api.example.test', 'A']);
    const synthetic = stdout.trim();
    const res = await curl(['--http2', '--cacert', caFile, '--resolve', `api.example.test:${h2.port}:${synthetic}`, `https://api.example.test:${h2.port}/allowed/captured`]);
    assert.equal(res.code, '200');
    assert.equal(res.version, '2');
    const denied = await curl(['--http2', '--cacert', caFile, '--resolve', `api.example.test:${h2.port}:${synthetic}`, `https://api.example.test:${h2.port}/nope`]);
    assert.equal(denied.code, '403');
  });

  it('passes response trailers through to a client that accepts them (nghttp, te: trailers)', async () => {
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+short', 'api.example.test', 'A']);
    const synthetic = stdout.trim();
    // nghttp has no proxy setting: it reaches the origin through capture, naming it in :authority.
    const out = await run('nghttp', ['-nv', '-H', `:authority: api.example.test:${h2.port}`, '-H', 'x-want-trailers: 1', '-H', 'te: trailers', `https://${synthetic}:${h2.port}/allowed/trailers`], { env: ENV });
    assert.match(out.stdout, /x-origin-trailer: done/);
    assert.match(out.stdout, /:status: 200/);
  });

  it('serves many concurrent streams on one connection (h2load)', async () => {
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+short', 'api.example.test', 'A']);
    const out = await run(
      'h2load',
      ['-n', '200', '-c', '2', '-m', '50', `--connect-to=${stdout.trim()}:${h2.port}`, `https://api.example.test:${h2.port}/allowed/load`],
      { env: ENV },
    );
    assert.match(out.stdout, /200 succeeded, 0 failed, 0 errored/);
    assert.match(out.stdout, /status codes: 200 2xx/);
  });

  it('decides cleartext HTTP/2 by prior knowledge in a CONNECT tunnel and on a captured port', async () => {
    const url = `http://plain.example.test:${h2c.port}`;
    const tunnelled = await curl([...proxy(), '--proxytunnel', '--http2-prior-knowledge', `${url}/allowed/h2c`]);
    assert.equal(tunnelled.code, '200');
    assert.equal(tunnelled.version, '2');
    assert.equal((JSON.parse(tunnelled.body) as { httpVersion: string }).httpVersion, '2.0');
    const denied = await curl([...proxy(), '--proxytunnel', '--http2-prior-knowledge', `${url}/secret`]);
    assert.equal(denied.code, '403');
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+short', 'plain.example.test', 'A']);
    const captured = await curl(['--http2-prior-knowledge', '--resolve', `plain.example.test:${h2c.port}:${stdout.trim()}`, `${url}/allowed/captured`]);
    assert.equal(captured.code, '200');
    assert.equal(captured.version, '2');
  });

  it('refuses HTTP/2 sent to the forward proxy itself with GOAWAY HTTP_1_1_REQUIRED and a decision event', async () => {
    const socket = connect({ host: '127.0.0.1', port: b.proxyPort });
    await once(socket, 'connect');
    const frames = readFrames(socket);
    socket.write(Buffer.concat([PREFACE, settings()]));
    const away = await frames.next((f) => f.type === FRAME.GOAWAY);
    assert.ok(away !== undefined);
    assert.equal(errorOf(away).code, 0x0d);
    assert.match(errorOf(away).debug, /^unsupported_l7_protocol: /);
    await frames.closed;
    const event = await b.log.waitFor((e) => e.unmapped?.adapter === 'forward' && e.unmapped?.reason_code === 'unsupported-l7-protocol');
    assert.equal(event.unmapped?.http_version, '2');
  });

  it('still refuses an Upgrade: h2c request', async () => {
    const res = await curl([...proxy(), '--http2', `http://plain.example.test:${h2c.port}/allowed/upgrade`]);
    assert.equal(res.code, '403');
    assert.equal((JSON.parse(res.body) as { error: string }).error, 'unsupported_l7_protocol');
  });
});
