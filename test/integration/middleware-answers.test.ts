// The answers of the middleware stage when an entry denies or no capacity is left (docs/policy.md#network-middlewares):
// 403 middleware_denied naming the entry and a valid reason code, on an audit endpoint too (W9); 503 middleware_failed
// with Retry-After; a WebSocket text message denied with close 1008. No built-in denies, so the registry given to
// boundary here maps the entries to an implementation written for the test; the proxy, curl and the origin are real.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ProxyAgent, WebSocket } from 'undici';
import type { EntryResult, MiddlewareImplementation, TextResult } from '../../src/middleware/implementation.js';
import type { MiddlewareCapacity } from '../../src/middleware/capacity.js';
import type { MiddlewareRegistry } from '../../src/middleware/registry.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { httpOrigin, type Origin } from '../harness/servers.js';
import { type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
const NAMES = { 'api.example.test': ['127.0.0.1'], 'bad.example.test': ['127.0.0.1'], 'ws.example.test': ['127.0.0.1'] } as const;

/** Denies anything that says `forbidden`, with `reasonCode`; allows the rest unchanged. */
function denying(reasonCode: string): MiddlewareImplementation {
  return {
    bindings: new Set(['http-request', 'websocket-message'] as const),
    maxPayloadBytes: 1024,
    evaluateBody: (body): EntryResult =>
      body.includes('forbidden') ? { verdict: 'deny', reasonCode, findings: [] } : { verdict: 'allow', body: undefined, findings: [] },
    evaluateText: (text): TextResult => (text.includes('forbidden') ? { verdict: 'deny', reasonCode, findings: [] } : { verdict: 'allow', text: undefined, findings: [] }),
  };
}

const policy = (p: { plain: number; ws: number }): string => `version: 1
network_policies:
  apis:
    endpoints:
      - host: api.example.test
        port: ${p.plain}
        protocol: rest
        enforcement: audit
        rules: [{ allow: { method: GET, path: /only-get } }]
      - { host: bad.example.test, port: ${p.plain} }
      - { host: ws.example.test, port: ${p.ws} }
    binaries: [{ path: "/**" }]
network_middlewares:
  content-filter:
    middleware: ryno/regex
    endpoints: { include: [api.example.test, ws.example.test] }
  sloppy-filter:
    middleware: ryno/regex
    order: 1
    endpoints: { include: [bad.example.test] }
`;

describe('middleware answers: deny, capacity, WebSocket close', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let ws: WsOrigin;
  let b: RunningBoundary;
  let full = false;
  const capacity: MiddlewareCapacity = { acquire: () => !full, release: () => undefined, active: () => 0 };
  const registry: MiddlewareRegistry = {
    implementationFor: (entry) => denying(entry.key === 'sloppy-filter' ? 'Not A Code' : 'content_match'),
    capacity,
    names: () => [],
    replace: async () => undefined,
    admit: async () => undefined,
    close: () => undefined,
  };

  before(async () => {
    plain = await httpOrigin();
    ws = await wsOrigin();
    b = await startBoundary({ policy: policy({ plain: plain.port, ws: ws.port }), names: NAMES, middleware: registry });
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), ws?.close()]);
  });

  const post = async (url: string, body: string): Promise<{ code: number; body: string; headers: string }> => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, '-D', '-', '-w', '\n%{http_code}', '--data-binary', body, url], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      encoding: 'utf8',
    });
    const cut = stdout.lastIndexOf('\n');
    const text = stdout.slice(0, cut);
    const split = text.indexOf('\r\n\r\n');
    return { headers: text.slice(0, split), body: text.slice(split + 4), code: Number(stdout.slice(cut + 1)) };
  };

  it('W9: an audit endpoint still enforces a deny: 403 middleware_denied with the entry key and reason code, nothing sent', async () => {
    const seen = plain.seen.length;
    const reply = await post(`http://api.example.test:${plain.port}/v1/chat?x=1`, 'a forbidden word');
    assert.equal(reply.code, 403, reply.body);
    const body = JSON.parse(reply.body) as Record<string, unknown>;
    assert.equal(body.error, 'middleware_denied');
    assert.equal(body.middleware, 'content-filter');
    assert.equal(body.reason_code, 'content_match');
    assert.equal(body.layer, 'l7');
    assert.equal(body.method, 'POST');
    assert.equal(body.path, '/v1/chat');
    assert.equal(body.host, 'api.example.test');
    assert.equal(body.port, plain.port);
    assert.equal(body.policy, 'apis');
    assert.equal(plain.seen.length, seen);
    const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'middleware-denied');
    assert.deepEqual(event.unmapped.middlewares, [
      { key: 'content-filter', implementation: 'ryno/regex', binding: 'http-request', decision: 'deny', transformed: false, reason_code: 'content_match' },
    ]);
  });

  it('leaves out a reason code outside [a-z][a-z0-9_]* from the answer and the event', async () => {
    const reply = await post(`http://bad.example.test:${plain.port}/x`, 'forbidden');
    assert.equal(reply.code, 403, reply.body);
    const body = JSON.parse(reply.body) as Record<string, unknown>;
    assert.equal(body.error, 'middleware_denied');
    assert.equal(body.middleware, 'sloppy-filter');
    assert.equal('reason_code' in body, false);
  });

  it('answers 503 middleware_failed with Retry-After when no capacity is left, before reading the body', async () => {
    const seen = plain.seen.length;
    full = true;
    try {
      const reply = await post(`http://bad.example.test:${plain.port}/x`, 'fine');
      assert.equal(reply.code, 503, reply.body);
      assert.equal((JSON.parse(reply.body) as Record<string, unknown>).error, 'middleware_failed');
      assert.match(reply.headers, /^retry-after: 1$/im);
    } finally {
      full = false;
    }
    assert.equal(plain.seen.length, seen);
    const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'middleware-capacity');
    assert.equal((event.unmapped.middlewares as { failure: string }[])[0]?.failure, 'capacity');
  });

  it('closes a WebSocket with 1008 when a text message is denied; earlier messages went through', async () => {
    const dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}` });
    const socket = new WebSocket(`ws://ws.example.test:${ws.port}/chat`, { dispatcher });
    try {
      await once(socket, 'open');
      socket.send('hello');
      await ws.waitFor((r) => r.kind === 'text' && r.text === 'hello');
      socket.send('something forbidden');
      const [closed] = (await once(socket, 'close')) as [{ code: number }];
      assert.equal(closed.code, 1008);
      assert.equal(
        ws.records.some((r) => r.kind === 'text' && r.text === 'something forbidden'),
        false,
      );
      const event = await b.log.waitFor((e) => e.http_request?.http_method === 'WEBSOCKET_TEXT' && e.unmapped.reason_code === 'middleware-denied');
      assert.equal(event.unmapped.close_code, 1008);
    } finally {
      socket.close();
      await dispatcher.close();
    }
  });
});
