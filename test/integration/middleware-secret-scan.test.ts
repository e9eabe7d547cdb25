// Issue 31: boundary/secret-scan through boundary with real clients (undici, curl, undici's WebSocket) and loopback
// origins, forward and through an intercepted CONNECT: every built-in kind blocked with 403 middleware_denied
// secret_detected, redaction with a fixed Content-Length, an entry's own pattern, a FINDING per finding, bad configs
// refused at load, and no matched value in any log line, event, metric or answer.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ProxyAgent, request, WebSocket } from 'undici';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { issuesOf } from '../harness/policy-parse-fixtures.js';
import { SECRET_SAMPLES } from '../harness/secret-samples.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';
import { type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
const NAMES = { 'block.example.test': ['127.0.0.1'], 'redact.example.test': ['127.0.0.1'], 'ws.example.test': ['127.0.0.1'] } as const;
const AWS = SECRET_SAMPLES[0]!.value;
const JWT = SECRET_SAMPLES.at(-1)!.value;
const CUSTOM = 'ACME_0123456789ABCDEF';

const policy = (p: { plain: number; secure: number; ws: number }): string => `version: 1
network_policies:
  apis:
    endpoints:
      - { host: block.example.test, ports: [${p.plain}, ${p.secure}] }
      - { host: redact.example.test, ports: [${p.plain}, ${p.secure}] }
      - { host: ws.example.test, port: ${p.ws} }
    binaries: [{ path: "/**" }]
network_middlewares:
  secrets-block:
    middleware: boundary/secret-scan
    order: 1
    endpoints: { include: [block.example.test, ws.example.test] }
  secrets-redact:
    middleware: boundary/secret-scan
    order: 2
    config:
      mode: redact
      patterns: [{ name: acme, regex: "ACME_[A-Z0-9]{16}" }]
    endpoints: { include: [redact.example.test] }
`;

describe('issue 31: boundary/secret-scan through boundary', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let secure: Origin;
  let ws: WsOrigin;
  let b: RunningBoundary;
  let caFile: string;
  let dispatcher: ProxyAgent;

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca, names: ['block.example.test', 'redact.example.test'] });
    ws = await wsOrigin();
    b = await startBoundary({ policy: policy({ plain: plain.port, secure: secure.port, ws: ws.port }), names: NAMES, upstreamCaPem: pki.ca.certPem });
    caFile = join(b.dir, 'ca.pem');
    await writeFile(caFile, `${b.caPem ?? ''}${pki.ca.certPem}`);
    dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}` });
  });

  after(async () => {
    await dispatcher?.close();
    await b?.close();
    await Promise.all([plain?.close(), secure?.close(), ws?.close()]);
  });

  const curl = async (url: string, body: string): Promise<{ code: number; body: string }> => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, '--cacert', caFile, '-w', '\n%{http_code}', '--data-binary', body, url], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      encoding: 'utf8',
    });
    const cut = stdout.lastIndexOf('\n');
    return { body: stdout.slice(0, cut), code: Number(stdout.slice(cut + 1)) };
  };

  it('forward HTTP (undici): each built-in kind is refused 403 middleware_denied secret_detected, nothing sent upstream', async () => {
    for (const [i, { kind, value }] of SECRET_SAMPLES.entries()) {
      const seen = plain.seen.length;
      const res = await request(`http://block.example.test:${plain.port}/kind/${i}`, { method: 'POST', body: JSON.stringify({ value }), headers: { 'content-type': 'application/json' }, dispatcher });
      const text = await res.body.text();
      assert.equal(res.statusCode, 403, `${kind}: ${text}`);
      const answer = JSON.parse(text) as Record<string, unknown>;
      assert.equal(answer.error, 'middleware_denied');
      assert.equal(answer.middleware, 'secrets-block');
      assert.equal(answer.reason_code, 'secret_detected');
      assert.ok(!text.includes(value), kind);
      assert.equal(plain.seen.length, seen, kind);
      const finding = await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === `secret.${kind}` && e.unmapped.middleware === 'secrets-block');
      assert.equal(finding.unmapped.count, 1);
      assert.equal(finding.unmapped.reason_code, 'secret_detected');
    }
  });

  it('intercepted CONNECT (curl): blocked, and redacted with a Content-Length that fits', async () => {
    const blocked = await curl(`https://block.example.test:${secure.port}/x`, `token=${JWT}`);
    assert.equal(blocked.code, 403, blocked.body);
    assert.equal((JSON.parse(blocked.body) as { reason_code?: string }).reason_code, 'secret_detected');
    const seen = secure.seen.length;
    const redacted = await curl(`https://redact.example.test:${secure.port}/x`, `a=${AWS}&b=${JWT}&c=${CUSTOM}`);
    assert.equal(redacted.code, 200, redacted.body);
    const got = secure.seen[seen];
    assert.equal(got?.body, 'a=[REDACTED]&b=[REDACTED]&c=[REDACTED]');
    assert.equal(got?.headers['content-length'], String(got?.body.length));
    const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.dst_endpoint?.domain === 'redact.example.test' && e.unmapped.middlewares !== undefined);
    assert.deepEqual(event.unmapped.middlewares, [
      {
        key: 'secrets-redact',
        implementation: 'boundary/secret-scan',
        binding: 'http-request',
        decision: 'allow',
        transformed: true,
        findings: 'secret.aws_access_key_id,secret.jwt,secret.custom.acme',
        finding_count: 3,
      },
    ]);
    for (const kind of ['aws_access_key_id', 'jwt', 'custom.acme']) {
      const finding = await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === `secret.${kind}` && e.unmapped.middleware === 'secrets-redact');
      assert.equal(finding.unmapped.transformed, true);
    }
  });

  it('a key split across two body chunks is still found (undici, chunked)', async () => {
    async function* twoChunks(): AsyncGenerator<Buffer> {
      yield Buffer.from(`{"k":"${AWS.slice(0, 9)}`);
      await delay(50);
      yield Buffer.from(`${AWS.slice(9)}"}`);
    }
    const seen = plain.seen.length;
    const res = await request(`http://block.example.test:${plain.port}/split`, { method: 'POST', body: Readable.from(twoChunks()), dispatcher });
    const text = await res.body.text();
    assert.equal(res.statusCode, 403, text);
    assert.equal((JSON.parse(text) as { reason_code?: string }).reason_code, 'secret_detected');
    assert.equal(plain.seen.length, seen);
  });

  it('forward HTTP (curl): a body without a secret goes as sent', async () => {
    const seen = plain.seen.length;
    const reply = await curl(`http://redact.example.test:${plain.port}/x`, 'nothing to see: sk-short');
    assert.equal(reply.code, 200, reply.body);
    assert.equal(plain.seen[seen]?.body, 'nothing to see: sk-short');
  });

  it('a WebSocket text message (undici WebSocket through CONNECT) with a secret closes 1008; a clean one passes', async () => {
    const socket = new WebSocket(`ws://ws.example.test:${ws.port}/chat`, { dispatcher });
    try {
      await once(socket, 'open');
      socket.send('hello');
      await ws.waitFor((r) => r.kind === 'text' && r.text === 'hello');
      const closed = once(socket, 'close');
      socket.send(JSON.stringify({ key: AWS }));
      const [event] = (await closed) as [{ code: number }];
      assert.equal(event.code, 1008);
      await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'secret.aws_access_key_id' && e.unmapped.binding === 'websocket-message');
    } finally {
      socket.close();
    }
  });

  it('no matched value reaches a log line, an event or a metric', async () => {
    const { body } = await request(`http://127.0.0.1:${b.adminPort}/metrics`);
    const metrics = await body.text();
    const logs = b.log.text();
    for (const { value } of SECRET_SAMPLES) {
      assert.ok(!logs.includes(value), 'log');
      assert.ok(!metrics.includes(value), 'metrics');
    }
    assert.ok(!logs.includes(CUSTOM));
  });

  it('bad configs are refused at load with POLICY_MIDDLEWARE_CONFIG', () => {
    const entry = (config: string): string =>
      `${policy({ plain: 1, secure: 2, ws: 3 }).split('network_middlewares:')[0]}network_middlewares:\n  bad:\n    middleware: boundary/secret-scan\n    config: ${config}\n    endpoints: { include: [block.example.test] }\n`;
    for (const config of ['{ mode: allow }', '{ patterns: [{ name: x, regex: "(a+)+$" }] }', '{ patterns: [{ name: x, regex: "a(b" }] }', '{ extra: 1 }']) {
      assert.deepEqual(
        issuesOf(entry(config)).map((i) => `${i.code} ${i.path}`),
        ['POLICY_MIDDLEWARE_CONFIG network_middlewares.bad.config'],
        config,
      );
    }
    assert.deepEqual(
      issuesOf(entry('{}').replace('boundary/secret-scan', 'boundary/nothing')).map((i) => i.code),
      ['POLICY_MIDDLEWARE_UNKNOWN'],
    );
  });
});
