// forward.ts relays in the turn the request arrived in when its DNS answer is cached (perf round 3), and
// through a promise when a query is under way. Both paths must answer the client, write upstream and emit the
// decision event identically, for every outcome: allow, denial, SSRF, resolve failure, upstream failure,
// client close, refused response head, credential refusal, body scan and body rewrite.

import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { validateHeaderName, validateHeaderValue } from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { createMiddlewareRegistry } from '../../src/middleware/registry.js';
import { createRequestChain } from '../../src/chain/request-chain.js';
import { createResponseChain } from '../../src/chain/response-chain.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';
import { checkDestination, permanentRefusal } from '../../src/net/destination.js';
import { BoundaryError } from '../../src/shared/errors.js';
import { createCachingResolver } from '../../src/net/resolver-cache.js';
import type { Resolver } from '../../src/net/resolver.js';
import { NO_SELF_ADDRESSES } from '../../src/net/ssrf.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore } from '../../src/policy/store.js';
import { createAuthorityParsers, type ProxyContext, type TunnelScope } from '../../src/proxy/context.js';
import { createRequestHandler } from '../../src/proxy/forward.js';
import type { H1Exchange, H1Handler, H1Pool } from '../../src/http1/h1-client.js';
import type { H1Answer, H1IncomingRequest } from '../../src/http1/h1-server.js';
import type { H1Request } from '../../src/http1/h1-request.js';
import type { AuditEvent } from '../../src/telemetry/event.js';
import { testClock } from '../harness/clock.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { testLookupGate } from '../harness/lookup-gate.js';
import { createProxyMetrics } from '../../src/proxy/metrics.js';
import { MetricsOffRegistry } from '../../src/telemetry/metrics.js';

const PORT = 8080;
const POLICY = `version: 1
network_policies:
  fast:
    endpoints:
      - { host: api.example.test, port: ${PORT} }
      - { host: meta.example.test, port: ${PORT} }
      - { host: gone.example.test, port: ${PORT} }
      - host: rules.example.test
        port: ${PORT}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: /allowed }
      - host: rewrite.example.test
        port: ${PORT}
        protocol: rest
        enforcement: enforce
        access: full
        request_body_credential_rewrite: true
    binaries: [{ path: "/**" }]
`;
const NAMES = {
  'api.example.test': ['127.0.0.1'],
  'rules.example.test': ['127.0.0.1'],
  'rewrite.example.test': ['127.0.0.1'],
  'meta.example.test': ['169.254.169.254'],
} as const;
const MARKER = 'openshell:resolve:env:API_TOKEN';

type Upstream = 'whole' | 'stream' | 'refused' | 'broken' | 'bad-head' | 'bad-head-stream' | 'client-close' | 'throws';

interface Case {
  readonly name: string;
  readonly url: string;
  readonly method?: string;
  readonly headers?: readonly string[];
  readonly body?: string;
  readonly upstream?: Upstream;
  readonly expectContinue?: boolean;
  readonly tunnel?: boolean;
}

/** Everything observable of one request: client answer, upstream request, events, warnings. */
interface Observed {
  client: unknown[];
  upstream: unknown[];
  events: AuditEvent[];
  warnings: number;
  /** The upstream request was made before the handler returned (the same-turn path). */
  sameTurn: boolean;
}

class FakeResponse extends EventEmitter {
  headersSent = false;
  readonly log: unknown[];
  /** Resolves once the relay is through with the client: the response ended or was destroyed, or the client closed it. */
  readonly done: Promise<void>;
  private markDone: () => void = () => {};
  constructor(log: unknown[]) {
    super();
    this.log = log;
    this.done = new Promise((resolve) => {
      this.markDone = resolve;
    });
    this.once('close', () => this.markDone());
  }
  writeHead(status: number, headers: readonly string[] | Readonly<Record<string, string | number>>): this {
    const flat = Array.isArray(headers) ? headers : Object.entries(headers).flat();
    // As Node does: a name or value it would not write throws before anything is sent.
    for (let i = 0; i < flat.length; i += 2) {
      validateHeaderName(String(flat[i]));
      validateHeaderValue(String(flat[i]), flat[i + 1]);
    }
    this.headersSent = true;
    this.log.push(['head', status, flat.map(String)]);
    return this;
  }
  writeContinue(): void {
    this.log.push(['continue']);
  }
  write(chunk: Buffer | string): boolean {
    this.log.push(['data', String(chunk)]);
    return true;
  }
  end(chunk?: Buffer | string): this {
    this.log.push(['end', chunk === undefined ? undefined : String(chunk)]);
    this.markDone();
    return this;
  }
  destroy(): this {
    this.log.push(['destroy']);
    this.markDone();
    return this;
  }
}

async function bodyText(body: H1Request['body']): Promise<string | null> {
  if (body === null || body === undefined) return null;
  if (Buffer.isBuffer(body)) return `buffer:${body.toString()}`;
  const chunks: Buffer[] = [];
  for await (const chunk of body as AsyncIterable<Buffer>) chunks.push(chunk);
  return `stream:${Buffer.concat(chunks).toString()}`;
}

function fakePool(kind: Upstream, record: Observed, res: FakeResponse, handled: () => boolean): Pick<H1Pool, 'request'> {
  return {
    request(request: H1Request, handler: H1Handler): H1Exchange {
      record.sameTurn = !handled();
      if (kind === 'throws') throw new BoundaryError('UPSTREAM_BUSY', 'too many queued');
      let aborted: Error | undefined;
      const exchange: H1Exchange = {
        abort(err) {
          aborted = err;
        },
        pause() {},
        resume() {},
        sent: true,
      };
      // The answer comes in a later turn, as from a socket; the body is read first, as h1-client writes it.
      setImmediate(async () => {
        let body: string | null;
        try {
          body = await bodyText(request.body);
        } catch (err) {
          record.upstream.push([request.method, request.target, request.headers, 'body-failed']);
          handler.onError(err as Error);
          return;
        }
        record.upstream.push([request.method, request.target, request.headers, body]);
        if (kind === 'client-close') {
          res.emit('close');
          handler.onError(aborted ?? new Error('not aborted'));
        } else if (kind === 'whole') handler.onHead(200, ['Content-Type', 'text/plain', 'Content-Length', '2', 'Connection', 'keep-alive'], Buffer.from('ok'), true);
        else if (kind === 'stream') {
          handler.onHead(200, ['Transfer-Encoding', 'chunked', 'X-Boundary-Policy', 'spoof'], Buffer.from('a'), false);
          handler.onData(Buffer.from('b'));
          handler.onEnd();
        } else if (kind === 'refused') handler.onError(new BoundaryError('UPSTREAM_CONNECT_REFUSED', '127.0.0.1:8080 refused'));
        else if (kind === 'broken') handler.onError(new BoundaryError('UPSTREAM_CLOSED', 'upstream reset'));
        else {
          handler.onHead(200, ['X-Bad', 'a\u0000b'], Buffer.from('x'), kind === 'bad-head');
          if (aborted !== undefined) handler.onError(aborted);
        }
      });
      return exchange;
    },
  };
}

const credentials = createStaticCredentialSource({
  providers: [{ name: 'acme', env: { API_TOKEN: 'tok-123' }, endpoints: [{ host: 'rewrite.example.test', port: PORT }] }],
});

async function run(c: Case, resolver: Resolver): Promise<Observed> {
  const record: Observed = { client: [], upstream: [], events: [], warnings: 0, sameTurn: false };
  const res = new FakeResponse(record.client);
  let handled = false;
  const pool = fakePool(c.upstream ?? 'whole', record, res, () => handled);
  const store = createPolicyStore();
  store.swap(parsePolicy(POLICY));
  const socket = { remoteAddress: '127.0.0.1', remotePort: 40_000 } as unknown as Socket;
  const scopes = new WeakMap<Socket, TunnelScope>();
  if (c.tunnel === true) scopes.set(socket, { host: 'api.example.test', port: PORT, tls: false, addresses: ['127.0.0.1'], client: pool as H1Pool });
  let settle: () => void = () => {};
  const settled = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const metrics = createProxyMetrics(new MetricsOffRegistry());
  const authorities = createAuthorityParsers();
  const lookups = testLookupGate(resolver);
  const chain = createRequestChain({
    store,
    authorities,
    metrics,
    identity: undefined,
    credentials,
    permanent: (host, port) => permanentRefusal(host, port, { allowLoopback: true, selfAddresses: NO_SELF_ADDRESSES }),
    destination: (target) => checkDestination({ ...target, lookups, hosts: undefined, allowLoopback: true, selfAddresses: NO_SELF_ADDRESSES }),
    middleware: createMiddlewareRegistry(),
  });
  const sink = {
    emit(event: AuditEvent) {
      record.events.push(event);
      if (event.class !== 'FINDING') settle();
    },
  };
  const ctx = {
    store,
    lookups,
    chain,
    responses: createResponseChain({ sink }),
    authorities,
    credentials,
    allowLoopback: true,
    selfAddresses: () => NO_SELF_ADDRESSES,
    sink,
    metrics,
    logger: {
      warn() {
        record.warnings++;
      },
    },
    upstreams: { pool: () => pool },
    scopes,
  } as unknown as ProxyContext;
  const rawHeaders = [...(c.headers ?? ['Host', `api.example.test:${PORT}`])];
  if (c.body !== undefined) rawHeaders.push('Content-Length', String(Buffer.byteLength(c.body)));
  const body = Readable.from(c.body === undefined ? [] : [Buffer.from(c.body)]);
  const req = Object.assign(body, {
    httpVersion: '1.1',
    url: c.url,
    method: c.method ?? 'GET',
    rawHeaders,
    socket,
    peer: socket,
  }) as unknown as H1IncomingRequest;
  // H1IncomingRequest.complete: the whole body has been received (here: read).
  Object.defineProperty(req, 'complete', { get: () => body.readableEnded });
  createRequestHandler(ctx)(req, res as unknown as H1Answer, c.expectContinue === true);
  handled = true;
  await settled;
  // Whatever the relay still writes after the event (a streamed body) comes before it ends the response.
  await res.done;
  return record;
}

const CASES: Case[] = [
  { name: 'allowed GET answered whole', url: `http://api.example.test:${PORT}/x?q=1` },
  { name: 'allowed GET answered in pieces', url: `http://api.example.test:${PORT}/x`, upstream: 'stream' },
  { name: 'upstream refused the dial', url: `http://api.example.test:${PORT}/`, upstream: 'refused' },
  { name: 'upstream broke before the head', url: `http://api.example.test:${PORT}/`, upstream: 'broken' },
  { name: 'response head Node refuses, whole', url: `http://api.example.test:${PORT}/`, upstream: 'bad-head' },
  { name: 'response head Node refuses, streamed', url: `http://api.example.test:${PORT}/`, upstream: 'bad-head-stream' },
  { name: 'client closed before the answer', url: `http://api.example.test:${PORT}/`, upstream: 'client-close' },
  { name: 'pool refused the request', url: `http://api.example.test:${PORT}/`, upstream: 'throws' },
  { name: 'POST with a body, expecting 100', url: `http://api.example.test:${PORT}/up`, method: 'POST', body: 'hello', expectContinue: true },
  { name: 'marker in the body', url: `http://api.example.test:${PORT}/up`, method: 'POST', body: `{"k":"${MARKER}"}` },
  { name: 'marker in a header', url: `http://api.example.test:${PORT}/`, headers: ['Host', 'api.example.test', 'X-Token', MARKER] },
  { name: 'body rewritten', url: `http://rewrite.example.test:${PORT}/v1`, method: 'POST', body: `{"k":"${MARKER}"}`,
    headers: ['Host', `rewrite.example.test:${PORT}`, 'Content-Type', 'application/json'] },
  { name: 'L7 rule allows', url: `http://rules.example.test:${PORT}/allowed` },
  { name: 'L7 rule denies', url: `http://rules.example.test:${PORT}/other` },
  { name: 'no endpoint', url: `http://elsewhere.example.test:${PORT}/` },
  { name: 'metadata address', url: `http://meta.example.test:${PORT}/` },
  { name: 'name does not resolve', url: `http://gone.example.test:${PORT}/` },
  { name: 'origin-form target', url: '/x' },
  { name: 'https in absolute form', url: 'https://api.example.test/' },
  { name: 'bad authority', url: 'http://api.example.test:0/' },
  { name: 'h2c upgrade', url: `http://api.example.test:${PORT}/`, headers: ['Host', 'api.example.test', 'Connection', 'Upgrade', 'Upgrade', 'h2c'] },
  { name: 'websocket upgrade on the request path', url: `http://api.example.test:${PORT}/`, headers: ['Host', 'api.example.test', 'Connection', 'Upgrade', 'Upgrade', 'websocket'] },
  { name: 'request inside a tunnel', url: '/in-tunnel', headers: ['Host', `api.example.test:${PORT}`], tunnel: true },
  { name: 'tunnel authority mismatch', url: '/in-tunnel', headers: ['Host', `other.example.test:${PORT}`], tunnel: true },
];

/** A caching resolver that already holds every answer (and the NXDOMAIN): evaluation settles in this turn. */
async function warmResolver(): Promise<Resolver> {
  const cache = createCachingResolver(fakeResolver(NAMES), { now: testClock().now });
  for (const name of [...Object.keys(NAMES), 'gone.example.test']) await cache.resolve(name, 4);
  return cache;
}

describe('forward relay: same-turn path against the awaited path', () => {
  for (const c of CASES) {
    it(`answers, writes upstream and reports alike: ${c.name}`, async () => {
      const viaCache = await run(c, await warmResolver());
      const viaQuery = await run(c, fakeResolver(NAMES));
      const { sameTurn: cachedSameTurn, ...cached } = viaCache;
      const { sameTurn: queriedSameTurn, ...queried } = viaQuery;
      assert.deepEqual(cached, queried);
      assert.equal(cached.events.filter((e) => e.class !== 'FINDING').length, 1, 'exactly one decision event');
      if (cached.upstream.length > 0 && c.body === undefined) {
        assert.equal(cachedSameTurn, true, 'a cached answer relays in the turn the request arrived in');
        assert.equal(queriedSameTurn, c.tunnel === true, 'a DNS query is awaited first');
      }
    });
  }

  it('covers every outcome the table means to cover', async () => {
    const reasons = new Set<unknown>();
    const bodies = new Set<unknown>();
    for (const c of CASES) {
      const record = await run(c, await warmResolver());
      for (const e of record.events) reasons.add(e.unmapped?.reason_code);
      for (const u of record.upstream) bodies.add((u as unknown[])[3]);
    }
    assert.ok(bodies.has('buffer:{"k":"tok-123"}'), 'the rewrite case reached the upstream rewritten');
    assert.ok(bodies.has('stream:hello'), 'a plain body streamed through the marker scanner');
    for (const reason of ['endpoint-allowed', 'rule-allowed', 'dial-failed', 'upstream-failed', 'client-closed', 'credential-unavailable',
      'credential-endpoint-mismatch', 'no-rule-matched',
      'no-endpoint-matched', 'ssrf-denied', 'resolve-failed', 'bad-request', 'unsupported-scheme', 'unsupported-l7-protocol', 'authority-mismatch']) {
      assert.ok(reasons.has(reason), `${reason} among ${[...reasons].join(', ')}`);
    }
  });
});
