// External network middleware services over gRPC (docs/policy.md#external-middleware-services): a real gRPC service
// (test/harness/middleware-service.ts) registered with --middleware-config, asked about each request curl sends through
// boundary, forward and inside an intercepted CONNECT: allow, deny with a reason code (an invalid one is a failure), a
// replaced body decided again by GraphQL policy, header changes, timeouts and a killed service under fail_closed and
// fail_open; at load, a config the service refuses, an unregistered name and a failed handshake.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { after, before, beforeEach, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ProxyAgent, WebSocket } from 'undici';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { defaultBehaviour, manifest, type MiddlewareService, startMiddlewareService } from '../harness/middleware-service.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';
import { type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
const NAMES = {
  'api.example.test': ['127.0.0.1'],
  'open.example.test': ['127.0.0.1'],
  'gql.example.test': ['127.0.0.1'],
  'secure.example.test': ['127.0.0.1'],
  'ws.example.test': ['127.0.0.1'],
} as const;

const registration = (port: number, extra = ''): string => `services:
  - name: acme/dlp
    grpc_endpoint: http://127.0.0.1:${port}
    allow_insecure_transport: true
    max_payload_bytes: 65536
    timeout: 1s
${extra}`;

const policy = (p: { plain: number; secure: number; ws?: number }, entries = ''): string => `version: 1
network_policies:
  apis:
    endpoints:
      - { host: api.example.test, port: ${p.plain} }
      - { host: open.example.test, port: ${p.plain} }
      - { host: secure.example.test, port: ${p.secure} }
      - { host: ws.example.test, port: ${p.ws ?? 1} }
      - host: gql.example.test
        port: ${p.plain}
        protocol: graphql
        enforcement: enforce
        rules: [{ allow: { operation_type: query } }]
    binaries: [{ path: "/**" }]
network_middlewares:
  dlp:
    middleware: acme/dlp
    config: { level: strict }
    endpoints: { include: [api.example.test, gql.example.test, secure.example.test, ws.example.test] }
  dlp-open:
    middleware: acme/dlp
    order: 1
    on_error: fail_open
    endpoints: { include: [open.example.test] }
${entries}`;

interface Reply {
  readonly code: number;
  readonly body: string;
}

describe('external middleware services over gRPC', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let secure: Origin;
  let service: MiddlewareService;
  let ws: WsOrigin;
  let b: RunningBoundary;
  let caFile: string;

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca, names: ['secure.example.test'] });
    ws = await wsOrigin();
    service = await startMiddlewareService();
    b = await startBoundary({
      policy: policy({ plain: plain.port, secure: secure.port, ws: ws.port }),
      names: NAMES,
      upstreamCaPem: pki.ca.certPem,
      middlewareConfig: registration(service.port),
    });
    caFile = join(b.dir, 'ca.pem');
    await writeFile(caFile, `${b.caPem ?? ''}${pki.ca.certPem}`);
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), secure?.close(), ws?.close(), service?.close()]);
  });

  beforeEach(() => Object.assign(service.behaviour, defaultBehaviour()));

  const post = async (url: string, body: string, extra: string[] = []): Promise<Reply> => {
    const { stdout } = await run(
      'curl',
      ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, '--cacert', caFile, '-w', '\n%{http_code}', '-H', 'content-type: application/json', ...extra, '--data-binary', body, url],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: 'utf8' },
    );
    const cut = stdout.lastIndexOf('\n');
    return { body: stdout.slice(0, cut), code: Number(stdout.slice(cut + 1)) };
  };
  const json = (reply: Reply): Record<string, unknown> => JSON.parse(reply.body) as Record<string, unknown>;
  const eventFor = (host: string, path: string) =>
    b.log.waitFor((e) => e.class_uid === 4002 && e.dst_endpoint?.domain === host && e.http_request?.url?.path === path && e.unmapped.middlewares !== undefined);

  it('validated the entry configs at load, and the handshake told boundary the limits', () => {
    assert.ok(service.validated.some((v) => v.middleware_name === 'acme/dlp' && (v.config as { fields: Record<string, unknown> }).fields.level !== undefined));
  });

  for (const [name, origin, url] of [
    ['forward HTTP', () => plain, () => `http://api.example.test:${plain.port}/allow-1?q=1`],
    ['intercepted CONNECT', () => secure, () => `https://secure.example.test:${secure.port}/allow-1?q=1`],
  ] as const) {
    it(`allows (${name}): the service sees the request without credentials or framing, the origin gets it`, async () => {
      const seen = origin().seen.length;
      const reply = await post(url(), '{"a":1}', ['-H', 'authorization: Bearer real-token', '-H', 'x-trace: t1']);
      assert.equal(reply.code, 200, reply.body);
      assert.equal(origin().seen.length, seen + 1);
      const asked = service.requests.at(-1)!;
      assert.equal(asked.middleware_name, 'acme/dlp');
      assert.equal((asked.body as Buffer).toString(), '{"a":1}');
      const target = asked.target as Record<string, unknown>;
      assert.equal(target.path, '/allow-1');
      assert.equal(target.query, 'q=1');
      const names = (asked.headers as { name: string }[]).map((h) => h.name);
      assert.ok(names.includes('x-trace'));
      for (const hidden of ['authorization', 'host', 'content-length', 'proxy-connection']) assert.ok(!names.includes(hidden), hidden);
      const event = await eventFor(name === 'forward HTTP' ? 'api.example.test' : 'secure.example.test', '/allow-1');
      assert.deepEqual(event.unmapped.middlewares, [
        { key: 'dlp', implementation: 'acme/dlp', binding: 'http-request', decision: 'allow', transformed: false },
        { key: 'dlp', implementation: 'acme/dlp', binding: 'http-response', decision: 'allow', transformed: false },
      ]);
      // A line naming a credential placeholder is never shown (no source holds this key, so credentials refuse it after).
      const asks = service.requests.length;
      await post(url().replace('allow-1', 'allow-2'), '{}', ['-H', 'x-key: openshell:resolve:env:API_KEY', '-H', 'x-other: o']);
      assert.equal(service.requests.length, asks + 1);
      const shown = (service.requests.at(-1)!.headers as { name: string; value: string }[]).map((h) => `${h.name}: ${h.value}`);
      assert.ok(shown.includes('x-other: o'));
      assert.ok(!shown.some((h) => h.includes('API_KEY')), shown.join());
    });

    it(`denies (${name}) with a valid reason code: 403 middleware_denied; the free-text reason is nowhere`, async () => {
      service.behaviour.evaluate = () => ({ decision: 'DECISION_DENY', reason_code: 'pii_found', reason: 'SECRET-REASON-TEXT', metadata: { k: 'SECRET-META' } });
      const seen = origin().seen.length;
      const reply = await post(url().replace('allow-1', 'deny-1'), '{"ssn":"x"}');
      assert.equal(reply.code, 403, reply.body);
      assert.equal(json(reply).error, 'middleware_denied');
      assert.equal(json(reply).middleware, 'dlp');
      assert.equal(json(reply).reason_code, 'pii_found');
      assert.ok(!reply.body.includes('SECRET'));
      assert.equal(origin().seen.length, seen);
      const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'middleware-denied' && e.http_request?.url?.path === '/deny-1');
      assert.equal((event.unmapped.middlewares as { reason_code?: string }[])[0]?.reason_code, 'pii_found');
      assert.ok(!b.log.lines().some((l) => l.includes('SECRET-REASON-TEXT') || l.includes('SECRET-META')));
    });
    it(`responses (${name}): blocked at preflight or on the whole body: 403 middleware_denied; passed whole otherwise`, async () => {
      service.behaviour.preflight = (e) => {
        const path = (e.target as { path: string }).path;
        if (path === '/resp-head') return { block_delivery: {}, reason_code: 'status_blocked', reason: 'SECRET-REASON-TEXT' };
        return { inspect: { body_mode: 'HTTP_RESPONSE_BODY_MODE_WHOLE_BODY_BYTES' } };
      };
      const bodies: string[] = [];
      service.behaviour.body = (data) => {
        bodies.push(data.toString());
        return bodies.length === 1 ? { pass_through: {} } : { block_delivery: {}, reason_code: 'body_blocked' };
      };
      const passed = await post(url().replace('allow-1', 'resp-pass'), '{}');
      assert.equal(passed.code, 200, passed.body);
      assert.equal(bodies[0], passed.body);
      const blocked = await post(url().replace('allow-1', 'resp-body'), '{}');
      assert.equal(blocked.code, 403, blocked.body);
      assert.equal(json(blocked).error, 'middleware_denied');
      assert.equal(json(blocked).reason_code, 'body_blocked');
      const head = await post(url().replace('allow-1', 'resp-head'), '{}');
      assert.equal(head.code, 403, head.body);
      assert.equal(json(head).reason_code, 'status_blocked');
      assert.ok(!head.body.includes('SECRET'));
      const event = await b.log.waitFor((e) => e.http_request?.url?.path === '/resp-head' && e.unmapped.middlewares !== undefined);
      assert.equal(event.unmapped.reason_code, 'middleware-denied');
      assert.deepEqual((event.unmapped.middlewares as { binding: string; decision: string }[]).map((m) => `${m.binding} ${m.decision}`), [
        'http-request allow',
        'http-response deny',
      ]);
    });

    it(`responses (${name}): a service that never answers the preflight: 502 response_delivery_failed under fail_closed`, async () => {
      service.behaviour.preflight = () => undefined;
      const reply = await post(url().replace('allow-1', 'resp-timeout'), '{}');
      assert.equal(reply.code, 502, reply.body);
      assert.equal(json(reply).error, 'response_delivery_failed');
      // A failure's event is Network Activity without the path: told apart by its host and status.
      const host = name === 'forward HTTP' ? 'api.example.test' : 'secure.example.test';
      const event = await b.log.waitFor((e) => e.dst_endpoint?.domain === host && e.unmapped.reason_code === 'middleware-failed' && e.unmapped.status_code === 502);
      assert.equal((event.unmapped.middlewares as { failure?: string }[])[1]?.failure, 'timeout');
    });
  }

  it('turns a reason code outside [a-z][a-z0-9_]* into a failure: 403 middleware_failed under fail_closed', async () => {
    service.behaviour.evaluate = () => ({ decision: 'DECISION_DENY', reason_code: 'Not-A-Code' });
    const reply = await post(`http://api.example.test:${plain.port}/bad-code`, '{}');
    assert.equal(reply.code, 403, reply.body);
    assert.equal(json(reply).error, 'middleware_failed');
    assert.equal('reason_code' in json(reply), false);
    const event = await eventFor('api.example.test', '/bad-code');
    assert.equal((event.unmapped.middlewares as { failure?: string }[])[0]?.failure, 'invalid-result');
  });

  it('applies header changes all together, and refuses the whole result when one touches a protected field', async () => {
    service.behaviour.evaluate = () => ({
      decision: 'DECISION_ALLOW',
      header_mutations: [{ write: { name: 'x-dlp', value: 'checked', on_existing: 'EXISTING_HEADER_ACTION_OVERWRITE' } }, { remove: { name: 'x-trace' } }],
    });
    const seen = plain.seen.length;
    const ok = await post(`http://api.example.test:${plain.port}/headers`, '{}', ['-H', 'x-trace: t1']);
    assert.equal(ok.code, 200, ok.body);
    assert.equal(plain.seen[seen]?.headers['x-dlp'], 'checked');
    assert.equal(plain.seen[seen]?.headers['x-trace'], undefined);
    service.behaviour.evaluate = () => ({
      decision: 'DECISION_ALLOW',
      header_mutations: [{ write: { name: 'x-dlp', value: 'checked', on_existing: 'EXISTING_HEADER_ACTION_OVERWRITE' } }, { write: { name: 'authorization', value: 'x', on_existing: 'EXISTING_HEADER_ACTION_OVERWRITE' } }],
    });
    const refused = await post(`http://api.example.test:${plain.port}/protected`, '{}');
    assert.equal(refused.code, 403, refused.body);
    assert.equal(json(refused).error, 'middleware_failed');
    assert.equal(plain.seen.length, seen + 1);
  });

  it('decides a replaced body again: a GraphQL query the service turns into a mutation is denied by policy', async () => {
    service.behaviour.evaluate = () => ({ decision: 'DECISION_ALLOW', has_body: true, body: Buffer.from('{"query":"mutation { drop }"}') });
    const seen = plain.seen.length;
    const reply = await post(`http://gql.example.test:${plain.port}/graphql`, '{"query":"{ viewer }"}');
    assert.equal(reply.code, 403, reply.body);
    assert.equal(plain.seen.length, seen);
    service.behaviour.evaluate = () => ({ decision: 'DECISION_ALLOW', has_body: true, body: Buffer.from('{"query":"{ other }"}') });
    const allowed = await post(`http://gql.example.test:${plain.port}/graphql`, '{"query":"{ viewer }"}');
    assert.equal(allowed.code, 200, allowed.body);
    assert.equal(plain.seen[seen]?.body, '{"query":"{ other }"}');
    assert.equal(plain.seen[seen]?.headers['content-length'], String('{"query":"{ other }"}'.length));
  });

  it('a service slower than the timeout: 403 middleware_failed under fail_closed; passed with a finding under fail_open', async () => {
    service.behaviour.delayMs = 5000;
    const closed = await post(`http://api.example.test:${plain.port}/slow`, '{}');
    assert.equal(closed.code, 403, closed.body);
    assert.equal(json(closed).error, 'middleware_failed');
    const event = await eventFor('api.example.test', '/slow');
    assert.equal((event.unmapped.middlewares as { failure?: string }[])[0]?.failure, 'timeout');
    const seen = plain.seen.length;
    const open = await post(`http://open.example.test:${plain.port}/slow-open`, '{}');
    assert.equal(open.code, 200, open.body);
    assert.equal(plain.seen.length, seen + 1);
    const openEvent = await eventFor('open.example.test', '/slow-open');
    assert.deepEqual((openEvent.unmapped.middlewares as unknown[])[0], {
      key: 'dlp-open',
      implementation: 'acme/dlp',
      binding: 'http-request',
      decision: 'failed',
      transformed: false,
      failure: 'timeout',
      failed_open: true,
    });
  });

  it('a response stage that fails under fail_open lets the answer through', async () => {
    service.behaviour.preflight = () => ({ inspect: { body_mode: 'HTTP_RESPONSE_BODY_MODE_UNSPECIFIED' } });
    const reply = await post(`http://open.example.test:${plain.port}/resp-open`, '{}');
    assert.equal(reply.code, 200, reply.body);
    const event = await eventFor('open.example.test', '/resp-open');
    assert.deepEqual((event.unmapped.middlewares as { binding: string; failure?: string; failed_open?: boolean }[])[1], {
      key: 'dlp-open',
      implementation: 'acme/dlp',
      binding: 'http-response',
      decision: 'failed',
      transformed: false,
      failure: 'invalid-result',
      failed_open: true,
    });
  });

  it('a body over the registration max_payload_bytes is a payload-too-large failure, never sent to the service', async () => {
    const asks = service.requests.length;
    const reply = await post(`http://api.example.test:${plain.port}/big`, `"${'a'.repeat(70_000)}"`);
    assert.equal(reply.code, 403, reply.body.slice(0, 200));
    assert.equal(json(reply).error, 'middleware_failed');
    assert.equal(service.requests.length, asks);
    const event = await eventFor('api.example.test', '/big');
    assert.equal((event.unmapped.middlewares as { failure?: string }[])[0]?.failure, 'payload-too-large');
  });

  it('counts each call by result on /metrics', async () => {
    const text = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
    const count = (labels: string): number => Number(new RegExp(`^boundary_middleware_service_calls_total\\{${labels}\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
    assert.equal(count('call="describe",result="ok"'), 1);
    assert.equal(count('call="validate_config",result="ok"'), 2);
    assert.ok(count('call="http_request",result="ok"') > 0);
    assert.ok(count('call="http_request",result="timeout"') >= 2);
    assert.match(text, /^boundary_middleware_service_call_seconds_count\{call="http_request"\} \d+/m);
  });

  it('WebSocket text messages: asked one by one in order, replaced, then a deny closes with 1008; a slow service fails closed with 1011', async () => {
    service.behaviour.text = (m) => {
      const text = String(m.text);
      if (text.includes('forbidden')) return { decision: 'DECISION_DENY', reason_code: 'ws_blocked' };
      return text === 'swap me' ? { decision: 'DECISION_ALLOW', has_text: true, text: 'swapped' } : { decision: 'DECISION_ALLOW' };
    };
    service.behaviour.textDelayMs = 20;
    const asked = service.texts.length;
    const dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}` });
    const socket = new WebSocket(`ws://ws.example.test:${ws.port}/chat?token=1`, { dispatcher });
    try {
      await once(socket, 'open');
      for (const text of ['one', 'swap me', 'three']) socket.send(text);
      await ws.waitFor((r) => r.kind === 'text' && r.text === 'three');
      const relayed = ws.records.filter((r) => r.kind === 'text').map((r) => (r as { text: string }).text);
      assert.deepEqual(relayed.slice(-3), ['one', 'swapped', 'three']);
      const sent = service.texts.slice(asked);
      assert.deepEqual(sent.map((m) => [m.sequence, m.text]), [[1, 'one'], [2, 'swap me'], [3, 'three']]);
      const target = sent[0]!.target as { path: string; query: string };
      assert.equal(target.path, '/chat');
      assert.equal(target.query, '');
      socket.send('something forbidden');
      const [closed] = (await once(socket, 'close')) as [{ code: number }];
      assert.equal(closed.code, 1008);
      assert.ok(!ws.records.some((r) => r.kind === 'text' && (r as { text: string }).text.includes('forbidden')));
      const event = await b.log.waitFor((e) => e.http_request?.http_method === 'WEBSOCKET_TEXT' && e.unmapped.reason_code === 'middleware-denied');
      assert.equal((event.unmapped.middlewares as { reason_code?: string }[])[0]?.reason_code, 'ws_blocked');
    } finally {
      socket.close();
    }
    service.behaviour.textDelayMs = 5000;
    const slow = new WebSocket(`ws://ws.example.test:${ws.port}/slow`, { dispatcher });
    try {
      await once(slow, 'open');
      slow.send('late');
      const [closed] = (await once(slow, 'close')) as [{ code: number }];
      assert.equal(closed.code, 1011);
      assert.ok(!ws.records.some((r) => r.kind === 'text' && (r as { text: string }).text === 'late'));
    } finally {
      slow.close();
      await dispatcher.close();
    }
  });
});

describe('external middleware services at load and when they die', { timeout: SUITE_TIMEOUT_MS }, () => {
  const ports = { plain: 0, secure: 1 };
  let plain: Origin;
  before(async () => {
    plain = await httpOrigin();
    ports.plain = plain.port;
  });
  after(async () => {
    await plain?.close();
  });

  const post = async (proxyPort: number, url: string): Promise<Reply> => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${proxyPort}`, '-w', '\n%{http_code}', '--data-binary', '{}', url], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      encoding: 'utf8',
    });
    const cut = stdout.lastIndexOf('\n');
    return { body: stdout.slice(0, cut), code: Number(stdout.slice(cut + 1)) };
  };
  const codes = (err: unknown): string[] => ((err as { issues?: { code: string; path: string }[] }).issues ?? []).map((i) => `${i.code} ${i.path}`);

  it('refuses a policy whose config the service refuses, naming the entry; a reload like it keeps the policy in force', async () => {
    const service = await startMiddlewareService();
    try {
      service.behaviour.validate = (config) => (config.fields as Record<string, unknown>).level === undefined;
      await assert.rejects(startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: registration(service.port) }), (err) => {
        assert.deepEqual(codes(err), ['POLICY_MIDDLEWARE_CONFIG network_middlewares.dlp.config']);
        return true;
      });
      service.behaviour.validate = () => true;
      const b = await startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: registration(service.port) });
      try {
        const hash = b.boundary.store.current().hash;
        service.behaviour.validate = () => false;
        await b.writePolicy(policy(ports).replace('level: strict', 'level: lax'));
        await b.boundary.reloadPolicy();
        assert.equal(b.boundary.store.current().hash, hash);
        assert.match(b.log.text(), /POLICY_MIDDLEWARE_CONFIG/);
      } finally {
        await b.close();
      }
    } finally {
      await service.close();
    }
  });

  it('refuses an entry naming a service that is not registered with POLICY_MIDDLEWARE_EXTERNAL', async () => {
    await assert.rejects(startBoundary({ policy: policy(ports), names: NAMES }), (err) => {
      assert.ok(codes(err).includes('POLICY_MIDDLEWARE_EXTERNAL network_middlewares.dlp.middleware'), codes(err).join());
      return true;
    });
  });

  it('refuses a policy naming a service whose handshake fails (no contract capability; nothing listening)', async () => {
    const service = await startMiddlewareService();
    try {
      service.behaviour.manifest = () => manifest([{ operation: 'HTTP_REQUEST' }], ['something.else']);
      await assert.rejects(startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: registration(service.port) }), (err) => {
        assert.ok(codes(err).includes('MIDDLEWARE_HANDSHAKE_FAILED network_middlewares.dlp.middleware'), codes(err).join());
        return true;
      });
      service.behaviour.manifest = () => manifest([{ operation: 'HTTP_REQUEST', maxPayloadBytes: 1024 }]);
      await assert.rejects(startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: registration(service.port) }), (err) => {
        assert.ok(codes(err).includes('MIDDLEWARE_HANDSHAKE_FAILED network_middlewares.dlp.middleware'), codes(err).join());
        return true;
      });
    } finally {
      await service.close();
    }
    await assert.rejects(startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: registration(service.port) }), (err) => {
      assert.ok(codes(err).includes('MIDDLEWARE_HANDSHAKE_FAILED network_middlewares.dlp.middleware'), codes(err).join());
      return true;
    });
  });

  it('reaches a service over TLS that chains to tls_ca_cert_path; one signed by another CA fails the handshake', async () => {
    const pki = await makeTestPki();
    const service = await startMiddlewareService({ tls: pki.server });
    const dir = await mkdtemp(join(tmpdir(), 'middleware-ca-'));
    const tls = (ca: string): string => `services:
  - name: acme/dlp
    grpc_endpoint: https://127.0.0.1:${service.port}
    tls_ca_cert_path: ${ca}
    max_payload_bytes: 65536
`;
    try {
      await writeFile(join(dir, 'ca.pem'), pki.ca.certPem);
      await writeFile(join(dir, 'other.pem'), pki.otherCa.certPem);
      const b = await startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: tls(join(dir, 'ca.pem')) });
      try {
        service.behaviour.evaluate = () => ({ decision: 'DECISION_DENY', reason_code: 'over_tls' });
        const reply = await post(b.proxyPort, `http://api.example.test:${plain.port}/tls`);
        assert.equal(reply.code, 403, reply.body);
        assert.equal((JSON.parse(reply.body) as { reason_code: string }).reason_code, 'over_tls');
      } finally {
        await b.close();
      }
      await assert.rejects(startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: tls(join(dir, 'other.pem')) }), (err) => {
        assert.ok(codes(err).includes('MIDDLEWARE_HANDSHAKE_FAILED network_middlewares.dlp.middleware'), codes(err).join());
        return true;
      });
    } finally {
      await service.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a service killed mid-run: 403 middleware_failed under fail_closed, passed under fail_open; a reload then is refused', async () => {
    const service = await startMiddlewareService();
    const b = await startBoundary({ policy: policy(ports), names: NAMES, middlewareConfig: registration(service.port) });
    try {
      assert.equal((await post(b.proxyPort, `http://api.example.test:${plain.port}/before`)).code, 200);
      service.kill();
      const closed = await post(b.proxyPort, `http://api.example.test:${plain.port}/after`);
      assert.equal(closed.code, 403, closed.body);
      assert.equal((JSON.parse(closed.body) as { error: string }).error, 'middleware_failed');
      const open = await post(b.proxyPort, `http://open.example.test:${plain.port}/after`);
      assert.equal(open.code, 200, open.body);
      const event = await b.log.waitFor((e) => e.dst_endpoint?.domain === 'open.example.test' && e.unmapped.middlewares !== undefined);
      assert.equal((event.unmapped.middlewares as { failure?: string }[])[0]?.failure, 'unavailable');
      // A policy change while the service is down cannot be validated: refused, the policy in force stays.
      const hash = b.boundary.store.current().hash;
      await b.writePolicy(policy(ports).replace('level: strict', 'level: lax'));
      await b.boundary.reloadPolicy();
      assert.equal(b.boundary.store.current().hash, hash);
      assert.match(b.log.text(), /MIDDLEWARE_UNAVAILABLE/);
    } finally {
      await b.close();
      await service.close();
    }
  });
});
