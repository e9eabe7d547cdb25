import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request } from 'node:http';
import { connect } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { Counter, Gauge, Registry } from 'prom-client';
import { type AdminServer, createAdminServer, type Readiness } from '../../src/telemetry/admin.js';
import { collectDefaultProcessMetrics } from '../../src/telemetry/metrics.js';
import { logSink } from '../harness/log-sink.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function get(port: number, path: string, method = 'GET'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function startAdmin(t: TestContext, overrides: { registry?: Registry; readiness?: () => Readiness } = {}) {
  const registry = overrides.registry ?? new Registry();
  const log = logSink();
  const admin: AdminServer = createAdminServer({
    host: '127.0.0.1',
    port: 0,
    registry,
    readiness: overrides.readiness ?? (() => ({ ready: true, reasons: [] })),
    logger: log.logger,
  });
  await admin.start();
  t.after(() => admin.close());
  return { admin, port: admin.address().port, registry, log };
}

describe('admin server', () => {
  it('answers /healthz with 200 and status ok', async (t) => {
    const { port } = await startAdmin(t);
    const reply = await get(port, '/healthz');
    assert.equal(reply.status, 200);
    assert.deepEqual(JSON.parse(reply.body), { status: 'ok' });
    assert.equal(reply.headers['content-type'], 'application/json');
  });

  it('answers /readyz with 200 when ready and 503 with the reasons when not', async (t) => {
    let state: Readiness = { ready: false, reasons: ['no-policy'], lastError: { kind: 'tls' } };
    const { port } = await startAdmin(t, { readiness: () => state });
    const notReady = await get(port, '/readyz');
    assert.equal(notReady.status, 503);
    assert.deepEqual(JSON.parse(notReady.body), { ready: false, reasons: ['no-policy'], lastError: { kind: 'tls' } });
    state = { ready: true, reasons: [], generation: 3 };
    const ready = await get(port, '/readyz?verbose=1');
    assert.equal(ready.status, 200);
    assert.deepEqual(JSON.parse(ready.body), { ready: true, reasons: [], generation: 3 });
  });

  it('answers 503 when the readiness check throws', async (t) => {
    const { port } = await startAdmin(t, {
      readiness: () => {
        throw new Error('broken');
      },
    });
    const reply = await get(port, '/readyz');
    assert.equal(reply.status, 503);
    assert.deepEqual(JSON.parse(reply.body), { ready: false, reasons: ['readiness-check-failed'] });
  });

  it('serves /metrics from the registry it was given, with that registry content type', async (t) => {
    const registry = new Registry();
    collectDefaultProcessMetrics(registry);
    new Counter({ name: 'boundary_test_total', help: 'a test counter', registers: [registry] }).inc(2);
    const { port } = await startAdmin(t, { registry });
    const reply = await get(port, '/metrics');
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['content-type'], registry.contentType);
    assert.match(reply.body, /^boundary_test_total 2$/m);
    assert.match(reply.body, /process_cpu_user_seconds_total/);
  });

  it('answers HEAD with headers and no body, other paths with 404 and other methods with 405', async (t) => {
    const { port } = await startAdmin(t);
    const head = await get(port, '/healthz', 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    assert.equal(head.headers['content-length'], String(Buffer.byteLength(JSON.stringify({ status: 'ok' }))));
    assert.equal((await get(port, '/')).status, 404);
    assert.equal((await get(port, '/metrics/extra')).status, 404);
    const post = await get(port, '/healthz', 'POST');
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET, HEAD');
  });

  it('reports not-ready from the moment closing is marked while health and metrics keep serving', async (t) => {
    const { admin, port } = await startAdmin(t);
    assert.equal((await get(port, '/readyz')).status, 200);
    admin.markClosing();
    const reply = await get(port, '/readyz');
    assert.equal(reply.status, 503);
    assert.deepEqual(JSON.parse(reply.body), { ready: false, reasons: ['closing'] });
    assert.equal(reply.headers.connection, 'close');
    assert.equal((await get(port, '/healthz')).status, 200);
  });

  it('lets a request in flight finish, closes its connection, and is idempotent', async (t) => {
    const registry = new Registry();
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let collecting: () => void = () => {};
    const collectStarted = new Promise<void>((resolve) => {
      collecting = resolve;
    });
    new Gauge({
      name: 'boundary_slow',
      help: 'a gauge whose collection waits for the test',
      registers: [registry],
      async collect() {
        collecting();
        await released;
        this.set(1);
      },
    });
    const { admin, port } = await startAdmin(t, { registry });
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    let raw = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      raw += chunk;
    });
    socket.write('GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n');
    await collectStarted;
    const first = admin.close();
    const second = admin.close();
    assert.equal(first, second);
    await assert.rejects(get(port, '/healthz'), { code: 'ECONNREFUSED' });
    release();
    // No keep-alive wait: the answer carries connection: close and the socket ends with it.
    await Promise.all([first, once(socket, 'close')]);
    assert.match(raw, /^HTTP\/1\.1 200 OK[\s\S]*connection: close[\s\S]*boundary_slow 1/i);
    await admin.close();
  });

  it('rejects start when the port is taken', async (t) => {
    const { port, log } = await startAdmin(t);
    const clash = createAdminServer({
      host: '127.0.0.1',
      port,
      registry: new Registry(),
      readiness: () => ({ ready: true, reasons: [] }),
      logger: log.logger,
    });
    await assert.rejects(clash.start(), { code: 'EADDRINUSE' });
    await clash.close();
  });
});
