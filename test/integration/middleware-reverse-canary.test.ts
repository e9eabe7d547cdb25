// Issue 31: boundary/reverse-canary through boundary with real clients (undici, curl) and loopback origins: a real
// credential value in a header, the query or the body, plain, percent-encoded or base64, is refused 403 at a host it is
// not bound to and passes at the bound one, forward and through an intercepted CONNECT; a value split across two body
// chunks is still seen; a credential reload swaps the values watched. The FINDING names the key, never the value.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { ProxyAgent, request, WebSocket } from 'undici';
import { createStaticCredentialSource, type StaticCredentialSource } from '../../src/credentials/source.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';
import { type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
const NAMES = { 'bound.example.test': ['127.0.0.1'], 'other.example.test': ['127.0.0.1'] } as const;
// `+` and `/` make the percent-encoded and base64 forms differ from the raw one.
const secretValue = (): string => `Rv+${randomBytes(12).toString('hex')}/k`;

const FORMS: readonly [string, (v: string) => string][] = [
  ['plain', (v) => v],
  ['percent-encoded', (v) => encodeURIComponent(v)],
  ['base64', (v) => Buffer.from(v, 'utf8').toString('base64')],
];

const policy = (plain: number, secure: number, ws: number): string => `version: 1
network_policies:
  apis:
    endpoints:
      - { host: bound.example.test, ports: [${plain}, ${secure}, ${ws}] }
      - { host: other.example.test, ports: [${plain}, ${secure}, ${ws}] }
    binaries: [{ path: "/**" }]
network_middlewares:
  canary:
    middleware: boundary/reverse-canary
    endpoints: { include: ["*.example.test"] }
`;

describe('issue 31: boundary/reverse-canary through boundary', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let secure: Origin;
  let ws: WsOrigin;
  let b: RunningBoundary;
  let caFile: string;
  let dispatcher: ProxyAgent;
  let source: StaticCredentialSource;
  let value = secretValue();
  const providers = (v: string, ports: readonly number[]) => [{ name: 'github', env: { GH_TOKEN: v }, endpoints: ports.map((port) => ({ host: 'bound.example.test', port })) }];

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca, names: ['bound.example.test', 'other.example.test'] });
    ws = await wsOrigin();
    source = createStaticCredentialSource({ providers: providers(value, [plain.port, secure.port, ws.port]) });
    b = await startBoundary({ policy: policy(plain.port, secure.port, ws.port), names: NAMES, upstreamCaPem: pki.ca.certPem, credentials: source });
    caFile = join(b.dir, 'ca.pem');
    await writeFile(caFile, `${b.caPem ?? ''}${pki.ca.certPem}`);
    dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}` });
  });

  after(async () => {
    await dispatcher?.close();
    await b?.close();
    await Promise.all([plain?.close(), secure?.close(), ws?.close()]);
  });

  const send = async (host: string, where: 'header' | 'query' | 'body', carried: string): Promise<{ status: number; text: string }> => {
    const res = await request(`http://${host}:${plain.port}/api${where === 'query' ? `?t=${carried}` : ''}`, {
      method: 'POST',
      headers: where === 'header' ? { 'x-token': carried } : {},
      body: where === 'body' ? JSON.stringify({ token: carried }) : '{}',
      dispatcher,
    });
    return { status: res.statusCode, text: await res.body.text() };
  };

  for (const where of ['header', 'query', 'body'] as const) {
    for (const [form, encode] of FORMS) {
      it(`forward HTTP: the value ${form} in the ${where} is refused at an unbound host and passes at the bound one`, async () => {
        const seen = plain.seen.length;
        const refused = await send('other.example.test', where, encode(value));
        assert.equal(refused.status, 403, refused.text);
        const answer = JSON.parse(refused.text) as Record<string, unknown>;
        assert.equal(answer.error, 'middleware_denied');
        assert.equal(answer.reason_code, 'credential_value_leak');
        assert.ok(!refused.text.includes('GH_TOKEN') && !refused.text.includes(value));
        assert.equal(plain.seen.length, seen);
        const finding = await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'reverse-canary.credential' && e.dst_endpoint?.domain === 'other.example.test');
        assert.equal(finding.unmapped.subject, 'GH_TOKEN');
        const passed = await send('bound.example.test', where, encode(value));
        assert.equal(passed.status, 200, passed.text);
        assert.equal(plain.seen.length, seen + 1);
      });
    }
  }

  it('a value split across two body chunks is still seen', async () => {
    const half = Math.floor(value.length / 2);
    async function* twoChunks(): AsyncGenerator<Buffer> {
      yield Buffer.from(`{"token":"${value.slice(0, half)}`);
      await delay(50);
      yield Buffer.from(`${value.slice(half)}"}`);
    }
    const seen = plain.seen.length;
    const res = await request(`http://other.example.test:${plain.port}/split`, { method: 'POST', body: Readable.from(twoChunks()), dispatcher });
    const text = await res.body.text();
    assert.equal(res.statusCode, 403, text);
    assert.equal((JSON.parse(text) as { reason_code?: string }).reason_code, 'credential_value_leak');
    assert.equal(plain.seen.length, seen);
  });

  it('intercepted CONNECT (curl, HTTP/1.1 and HTTP/2): refused at the unbound host, passes at the bound one, large bodies too', async () => {
    const bigFile = join(b.dir, 'big-with-value.bin');
    const big = Buffer.alloc(2 * 1024 * 1024, 0x63);
    Buffer.from(Buffer.from(value).toString('base64')).copy(big, 1024 * 1024 + 100);
    await writeFile(bigFile, big);
    const curl = async (host: string, args: string[]): Promise<number> => {
      const { stdout } = await run('curl', ['-sS', '--max-time', '20', '-x', `http://127.0.0.1:${b.proxyPort}`, '--cacert', caFile, '-o', '/dev/null', '-w', '%{http_code}', ...args, `https://${host}:${secure.port}/x`], {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        encoding: 'utf8',
      });
      return Number(stdout);
    };
    for (const version of ['--http1.1', '--http2']) {
      const header = [version, '-H', `authorization: token ${value}`];
      assert.equal(await curl('other.example.test', header), 403, version);
      assert.equal(await curl('bound.example.test', header), 200, version);
      assert.equal(await curl('other.example.test', [version, '--data-binary', `@${bigFile}`]), 403, `${version} large body`);
    }
  });

  it('a body too large to hold still has its head read: the value in a header is refused, not a stage failure', async () => {
    const res = await request(`http://other.example.test:${plain.port}/upload`, { method: 'POST', headers: { 'x-token': value }, body: Buffer.alloc(1024 * 1024 + 1, 0x61), dispatcher });
    const text = await res.body.text();
    assert.equal(res.statusCode, 403, text);
    assert.equal((JSON.parse(text) as { error?: string; reason_code?: string }).reason_code, 'credential_value_leak');
  });

  it('a body too large to hold streams through the canary: a clean upload passes whole, a value past 1 MiB or across it is refused', async () => {
    const MIB = 1024 * 1024;
    const seen = plain.seen.length;
    const clean = Buffer.alloc(2 * MIB + 17, 0x61);
    const ok = await request(`http://other.example.test:${plain.port}/upload`, { method: 'POST', body: clean, dispatcher });
    assert.equal(ok.statusCode, 200, await ok.body.text());
    assert.equal(plain.seen[seen]?.body.length, clean.length);
    for (const at of [MIB + 4096, MIB - 5, 2 * MIB]) {
      const body = Buffer.alloc(2 * MIB + 64, 0x62);
      Buffer.from(encodeURIComponent(value)).copy(body, at);
      const res = await request(`http://other.example.test:${plain.port}/upload`, { method: 'POST', body, dispatcher });
      const text = await res.body.text();
      assert.equal(res.statusCode, 403, `at ${at}: ${text}`);
      assert.equal((JSON.parse(text) as { reason_code?: string }).reason_code, 'credential_value_leak');
    }
    assert.ok(plain.seen.slice(seen).every((s) => !s.body.includes(encodeURIComponent(value))));
    const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.http_request?.url?.path === '/upload' && e.unmapped.reason_code === 'middleware-denied');
    assert.deepEqual(event.unmapped.middlewares, [
      { key: 'canary', implementation: 'boundary/reverse-canary', binding: 'http-request', decision: 'deny', transformed: false, reason_code: 'credential_value_leak', findings: 'reverse-canary.credential', finding_count: 1 },
    ]);
  });

  it('WebSocket (undici): an upgrade carrying the value is refused at the unbound host; a text message carrying it closes 1008', async () => {
    const refused = new WebSocket(`ws://other.example.test:${ws.port}/chat`, { dispatcher, headers: { authorization: `Bearer ${value}` } });
    // undici reports a refused handshake as an error (a non-101 answer).
    await once(refused, 'error');
    await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'reverse-canary.credential' && e.dst_endpoint?.port === ws.port);
    const bound = new WebSocket(`ws://bound.example.test:${ws.port}/chat`, { dispatcher, headers: { authorization: `Bearer ${value}` } });
    await once(bound, 'open');
    bound.close();
    const socket = new WebSocket(`ws://other.example.test:${ws.port}/chat`, { dispatcher });
    await once(socket, 'open');
    const closed = once(socket, 'close');
    socket.send(`here it is: ${Buffer.from(value).toString('base64')}`);
    const [event] = (await closed) as [{ code: number }];
    assert.equal(event.code, 1008);
  });

  it('a credential reload swaps the values watched; no value ever reaches the log', async () => {
    const old = value;
    value = secretValue();
    source.replace(providers(value, [plain.port, secure.port, ws.port]));
    assert.equal((await send('other.example.test', 'header', old)).status, 200);
    assert.equal((await send('other.example.test', 'header', value)).status, 403);
    const logs = b.log.text();
    for (const v of [old, value]) for (const [, encode] of FORMS) assert.ok(!logs.includes(encode(v)));
  });
});
