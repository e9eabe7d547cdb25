// Issue 31, "Current OpenShell policies load and work": a policy with network_middlewares was refused at load. Now the
// built-in regex (ryno/regex, also openshell/regex) redacts OpenAI-style keys in request bodies and WebSocket text
// messages before credentials, with curl and undici's WebSocket through boundary (W6-W8, W10, R1), and traffic a
// middleware cannot read is refused or relayed with a finding by on_error / on_uninspectable (W4, W7).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ProxyAgent, WebSocket } from 'undici';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { type EchoServer, echoServer, httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';
import { type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
const KEY = 'sk-ABCDEFGHIJKLMNOP';
const NAMES = {
  'api.example.test': ['127.0.0.1'],
  'open.example.test': ['127.0.0.1'],
  'audit.example.test': ['127.0.0.1'],
  'skip.example.test': ['127.0.0.1'],
  'raw.example.test': ['127.0.0.1'],
  'other.example.test': ['127.0.0.1'],
  'ws.example.test': ['127.0.0.1'],
  'rpc.example.test': ['127.0.0.1'],
} as const;

const policy = (p: { plain: number; secure: number; echo: number; ws: number }): string => `version: 1
network_policies:
  apis:
    endpoints:
      - { host: api.example.test, ports: [${p.plain}, ${p.secure}] }
      - { host: open.example.test, port: ${p.plain} }
      - { host: other.example.test, port: ${p.plain} }
      - { host: skip.example.test, port: ${p.secure}, tls: skip }
      - { host: raw.example.test, port: ${p.echo} }
      - { host: ws.example.test, port: ${p.ws} }
      - host: rpc.example.test
        port: ${p.plain}
        protocol: json-rpc
        enforcement: enforce
        rules: [{ allow: { method: chat_send } }, { allow: { method: ${KEY} } }]
      - host: audit.example.test
        port: ${p.plain}
        protocol: rest
        enforcement: audit
        rules: [{ allow: { method: GET, path: /only-get } }]
    binaries: [{ path: "/**" }]
network_middlewares:
  redact-keys:
    middleware: ryno/regex
    order: 10
    endpoints:
      include: ["*.example.test"]
      exclude: [other.example.test, open.example.test, skip.example.test, raw.example.test]
  redact-open:
    middleware: openshell/regex
    order: 20
    on_error: fail_open
    endpoints:
      include: [open.example.test, skip.example.test, raw.example.test]
`;

interface Reply {
  readonly code: number;
  readonly body: string;
}

describe('issue 31: the built-in regex middleware through boundary', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let secure: Origin;
  let echo: EchoServer;
  let ws: WsOrigin;
  let b: RunningBoundary;
  let caFile: string;

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca, names: ['api.example.test', 'skip.example.test'] });
    echo = await echoServer();
    ws = await wsOrigin();
    b = await startBoundary({ policy: policy({ plain: plain.port, secure: secure.port, echo: echo.port, ws: ws.port }), names: NAMES, upstreamCaPem: pki.ca.certPem });
    caFile = join(b.dir, 'ca.pem');
    await writeFile(caFile, `${b.caPem ?? ''}${pki.ca.certPem}`);
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), secure?.close(), echo?.close(), ws?.close()]);
  });

  const curl = async (url: string, args: string[]): Promise<Reply> => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, '--cacert', caFile, '-w', '\n%{http_code}', ...args, url], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      encoding: 'utf8',
    });
    const cut = stdout.lastIndexOf('\n');
    return { body: stdout.slice(0, cut), code: Number(stdout.slice(cut + 1)) };
  };
  const post = (url: string, body: string, extra: string[] = []): Promise<Reply> => curl(url, ['-H', 'content-type: application/json', ...extra, '--data-binary', body]);
  const eventFor = (host: string, method = 'POST') =>
    b.log.waitFor((e) => e.class_uid === 4002 && e.dst_endpoint?.domain === host && e.http_request?.http_method === method && e.unmapped.middlewares !== undefined);

  for (const [name, url] of [
    ['forward HTTP', () => `http://api.example.test:${plain.port}/v1/chat`],
    ['CONNECT to an L4 endpoint, TLS terminated because a middleware selects the host', () => `https://api.example.test:${secure.port}/v1/chat`],
  ] as const) {
    it(`W6 (${name}): the upstream gets the key redacted, with a Content-Length that fits, and the event names the entry`, async () => {
      const origin = name.startsWith('forward') ? plain : secure;
      const seen = origin.seen.length;
      const reply = await post(url(), JSON.stringify({ k: KEY }));
      assert.equal(reply.code, 200, reply.body);
      const got = origin.seen[seen];
      assert.equal(got?.body, '{"k":"[REDACTED]"}');
      assert.equal(got?.headers['content-length'], String(Buffer.byteLength('{"k":"[REDACTED]"}')));
      const event = await eventFor('api.example.test');
      assert.deepEqual(event.unmapped.middlewares, [
        { key: 'redact-keys', implementation: 'ryno/regex', binding: 'http-request', decision: 'allow', transformed: true, findings: 'regex.openai', finding_count: 1 },
      ]);
      assert.ok(!b.log.text().includes(KEY), 'the key never reaches a log line');
    });
  }

  it('W6: a chunked body is redacted and sent with a Content-Length', async () => {
    const seen = plain.seen.length;
    const reply = await post(`http://api.example.test:${plain.port}/upload`, `a ${KEY} b ${KEY}-more`, ['-H', 'transfer-encoding: chunked']);
    assert.equal(reply.code, 200, reply.body);
    const got = plain.seen[seen];
    assert.equal(got?.body, 'a [REDACTED] b [REDACTED]');
    assert.equal(got?.headers['transfer-encoding'], undefined);
    assert.equal(got?.headers['content-length'], String('a [REDACTED] b [REDACTED]'.length));
  });

  it('R1: openshell/regex is the same built-in', async () => {
    const seen = plain.seen.length;
    const reply = await post(`http://open.example.test:${plain.port}/x`, `token=${KEY}`);
    assert.equal(reply.code, 200, reply.body);
    assert.equal(plain.seen[seen]?.body, 'token=[REDACTED]');
  });

  it('W8: an excluded host is not selected: its body goes as sent, and the event has no middleware', async () => {
    const seen = plain.seen.length;
    const reply = await post(`http://other.example.test:${plain.port}/x`, JSON.stringify({ k: KEY }));
    assert.equal(reply.code, 200, reply.body);
    assert.equal(plain.seen[seen]?.body, JSON.stringify({ k: KEY }));
    const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.dst_endpoint?.domain === 'other.example.test');
    assert.equal(event.unmapped.middlewares, undefined);
  });

  it('leaves a body without a key byte for byte, and a bodyless GET alone', async () => {
    const seen = plain.seen.length;
    const body = '\ufeff{"q":"sk-short"}';
    assert.equal((await post(`http://api.example.test:${plain.port}/x`, body)).code, 200);
    assert.equal(plain.seen[seen]?.body, body);
    assert.equal((await curl(`http://api.example.test:${plain.port}/x`, [])).code, 200);
    const event = await eventFor('api.example.test', 'GET');
    assert.deepEqual(event.unmapped.middlewares, [{ key: 'redact-keys', implementation: 'ryno/regex', binding: 'http-request', decision: 'allow', transformed: false }]);
  });

  it('W7: a body that is not UTF-8 fails the stage: 403 middleware_failed under fail_closed, nothing sent upstream', async () => {
    const seen = plain.seen.length;
    const file = join(b.dir, 'binary.bin');
    await writeFile(file, Buffer.from([0xff, 0xfe]));
    const reply = await curl(`http://api.example.test:${plain.port}/bin`, ['--data-binary', `@${file}`]);
    assert.equal(reply.code, 403, reply.body);
    const body = JSON.parse(reply.body) as Record<string, unknown>;
    assert.equal(body.error, 'middleware_failed');
    assert.equal(body.middleware, undefined);
    assert.equal(body.host, 'api.example.test');
    assert.equal(plain.seen.length, seen);
    const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'middleware-failed' && e.dst_endpoint?.domain === 'api.example.test');
    assert.deepEqual(event.unmapped.middlewares, [{ key: 'redact-keys', implementation: 'ryno/regex', binding: 'http-request', decision: 'failed', transformed: false, failure: 'non-utf8' }]);
  });

  it('W7: under fail_open the same body goes upstream unchanged, the failure recorded', async () => {
    const seen = plain.seen.length;
    const file = join(b.dir, 'binary-open.bin');
    await writeFile(file, Buffer.from([0xff, 0xfe]));
    const reply = await curl(`http://open.example.test:${plain.port}/bin`, ['--data-binary', `@${file}`]);
    assert.equal(reply.code, 200, reply.body);
    assert.equal(plain.seen.length, seen + 1);
    const event = await b.log.waitFor((e) => e.http_request?.url?.path === '/bin' && e.dst_endpoint?.domain === 'open.example.test');
    assert.deepEqual(event.unmapped.middlewares, [
      { key: 'redact-open', implementation: 'openshell/regex', binding: 'http-request', decision: 'failed', transformed: false, failure: 'non-utf8', failed_open: true },
    ]);
  });

  it('fails a body over 256 KiB (MAX_REGEX_PAYLOAD_BYTES) under fail_closed', async () => {
    const file = join(b.dir, 'big.txt');
    await writeFile(file, `${KEY} ${'x'.repeat(256 * 1024)}`);
    const reply = await curl(`http://api.example.test:${plain.port}/big`, ['--data-binary', `@${file}`]);
    assert.equal(reply.code, 403, reply.body);
    const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'middleware-failed' && e.http_request?.url?.path === '/big');
    assert.equal((event.unmapped.middlewares as { failure: string }[])[0]?.failure, 'payload-too-large');
  });

  it('runs on an audit endpoint too: a request policy would deny is still redacted', async () => {
    const seen = plain.seen.length;
    const reply = await post(`http://audit.example.test:${plain.port}/not-allowed`, KEY);
    assert.equal(reply.code, 200, reply.body);
    assert.equal(plain.seen[seen]?.body, '[REDACTED]');
    const event = await eventFor('audit.example.test');
    assert.equal(event.unmapped.verdict, 'audit');
  });

  it('decides a replaced JSON-RPC body again: a redacted parameter passes, a method that was a key is denied', async () => {
    const seen = plain.seen.length;
    const ok = await post(`http://rpc.example.test:${plain.port}/rpc`, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'chat_send', params: { k: KEY } }));
    assert.equal(ok.code, 200, ok.body);
    assert.equal(plain.seen[seen]?.body, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'chat_send', params: { k: '[REDACTED]' } }));
    // Allowed as sent (a rule names the key as a method), but the origin would get [REDACTED], which no rule allows.
    const denied = await post(`http://rpc.example.test:${plain.port}/rpc`, JSON.stringify({ jsonrpc: '2.0', id: 2, method: KEY }));
    const error = (JSON.parse(denied.body) as { error?: { data?: { error?: string; method?: string } } }).error;
    assert.equal(error?.data?.error, 'policy_denied', denied.body);
    assert.equal(error?.data?.method, '[REDACTED]');
    assert.ok(!denied.body.includes(KEY));
    assert.equal(plain.seen.length, seen + 1);
    const event = await b.log.waitFor((e) => e.dst_endpoint?.domain === 'rpc.example.test' && e.unmapped.verdict === 'deny');
    assert.equal((event.unmapped.middlewares as { transformed: boolean }[])[0]?.transformed, true);
  });

  it('W4: a tls: skip endpoint a fail_open entry selects is relayed raw, with a finding', async () => {
    const reply = await curl(`https://skip.example.test:${secure.port}/x`, []);
    assert.equal(reply.code, 200, reply.body);
    const finding = await b.log.waitFor((e) => e.unmapped.finding === 'middleware-traffic-uninspectable' && e.dst_endpoint?.domain === 'skip.example.test');
    assert.equal(finding.class_uid, 2004);
  });

  it('relays bytes that are not HTTP on a route only fail_open middlewares inspect, with a finding', async () => {
    const tunnel = connect(b.proxyPort, '127.0.0.1');
    await once(tunnel, 'connect');
    tunnel.write(`CONNECT raw.example.test:${echo.port} HTTP/1.1\r\nhost: raw.example.test:${echo.port}\r\n\r\n`);
    const [established] = (await once(tunnel, 'data')) as [Buffer];
    assert.match(established.toString('latin1'), /^HTTP\/1\.1 200/);
    tunnel.write('\x00\x01 not http at all\n');
    const [echoed] = (await once(tunnel, 'data')) as [Buffer];
    assert.equal(echoed.toString('latin1'), '\x00\x01 not http at all\n');
    tunnel.destroy();
    await b.log.waitFor((e) => e.unmapped.finding === 'middleware-traffic-uninspectable' && e.dst_endpoint?.domain === 'raw.example.test');
  });

  it('W10: a WebSocket text message reaches the upstream redacted, re-framed (undici WebSocket through CONNECT)', async () => {
    const dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}` });
    const socket = new WebSocket(`ws://ws.example.test:${ws.port}/chat`, { dispatcher });
    try {
      await once(socket, 'open');
      socket.send(JSON.stringify({ input: KEY }));
      const record = await ws.waitFor((r) => r.kind === 'text');
      assert.deepEqual(record, { kind: 'text', text: '{"input":"[REDACTED]"}' });
      const [reply] = (await once(socket, 'message')) as [{ data: string }];
      assert.equal(reply.data, 'echo:{"input":"[REDACTED]"}');
      socket.send('nothing to hide');
      await ws.waitFor((r) => r.kind === 'text' && r.text === 'nothing to hide');
      const event = await b.log.waitFor((e) => e.http_request?.http_method === 'WEBSOCKET_TEXT' && e.unmapped.middlewares !== undefined);
      assert.deepEqual(event.unmapped.middlewares, [
        { key: 'redact-keys', implementation: 'ryno/regex', binding: 'websocket-message', decision: 'allow', transformed: true, findings: 'regex.openai', finding_count: 1 },
      ]);
    } finally {
      socket.close();
      await dispatcher.close();
    }
  });
});
