// bench/proxy/request-path.mjs — in-process cost of the per-request decision path (no sockets, no events):
// framing, target/authority, decide (L4 and L7), credentials guard + canonical path, the destination check, upstream
// header build and credentialHead, the request chain as a whole (evaluateRequest in builds from before
// src/chain/), and forward.ts's request handler end to end
// (evaluation, relay, client response headers, the outcome event) against a fake upstream pool that answers a
// batch later, for an allowed forward GET against the same policy and hosts file bench/proxy.sh writes.
// Prints µs per call for each stage. Bounded loops.
//
// Usage: npx tsc -p tsconfig.json && node bench/proxy/request-path.mjs [iterations=200000]
//        BOUNDARY_DIST=bench/out/some-build node bench/proxy/request-path.mjs   (another compiled tree)

import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

// Compiled output, as production runs it (tsx's transform adds per-function helpers that skew the numbers).
const DIST = resolve(process.env.BOUNDARY_DIST ?? new URL('../../dist', import.meta.url).pathname);
const load = (file) => import(pathToFileURL(`${DIST}/${file}`).href);
// A module that moved between builds: the first of `files` this build has.
const loadFirst = async (...files) => {
  for (const file of files) {
    try {
      return await load(file);
    } catch {}
  }
  return {};
};
const { createStaticCredentialSource } = await load('credentials/source.js');
const { redactPlaceholders } = await load('credentials/placeholder.js');
const { createUpstreamResolver } = await load('dns/upstream.js');
const { memoisedAuthorityParser, parseAuthority } = await load('net/host.js');
const { parseHostsFile } = await load('net/hosts.js');
const { createCachingResolver } = await load('net/resolver-cache.js');
const { decide } = await load('policy/decide.js');
const { parsePolicy } = await load('policy/parse.js');
const { createPolicyStore } = await load('policy/store.js');
const { credentialHead, routeHasCredentials } = await loadFirst('chain/credential-injection.js', 'proxy/credential-injection.js');
const context = await load('proxy/context.js');
// Builds differ (BOUNDARY_DIST): the oldest have only the async resolveFor, then destinationFor (a value or a
// promise), now the async destination beside destinationCached (undefined on a miss).
const destinationSync = context.destinationCached ?? context.destinationFor;
const resolveFor = context.destination ?? context.resolveFor ?? (async (ctx, target) => context.destinationFor(ctx, target));
const { beginOutcome } = await loadFirst('chain/events.js', 'proxy/events.js');
const { checkFraming } = await load('http1/framing.js');
const { clientResponseHeaders, hostHeader, upstreamRequestHeaders } = await load('http1/headers.js');
const { evaluateRequest } = await loadFirst('proxy/l7.js');
// Builds with src/chain/: the request chain every adapter runs, and the per-request record it runs on.
const { createRequestChain } = await loadFirst('chain/request-chain.js');
const { ChainRequest } = await loadFirst('chain/request.js');
const { createRequestHandler } = await load('proxy/forward.js');
const { canonicalTarget } = await loadFirst('chain/path.js', 'proxy/path.js');
const { parseAbsoluteTarget } = await load('http1/target.js');

const MAX_ITERATIONS = 2_000_000;
const ITERATIONS = Math.min(Number(process.argv[2] ?? 200_000), MAX_ITERATIONS);
const HOST = 'origin.bench.test';
const L4_PORT = 18080;
const L7_PORT = 18081;

const policy = parsePolicy(`version: 1
network_policies:
  bench_origin:
    name: bench-origin
    endpoints:
      - host: ${HOST}
        port: ${L4_PORT}
      - host: ${HOST}
        port: 18443
      - host: ${HOST}
        port: ${L7_PORT}
        protocol: rest
        enforcement: enforce
        access: full
      - host: ${HOST}
        port: 18444
        protocol: rest
        enforcement: enforce
        access: full
    binaries:
      - path: "/**"
`);
const store = createPolicyStore();
store.swap(policy);
const hosts = parseHostsFile(`127.0.0.1 localhost\n127.0.0.1 ${HOST}\n`);
// Port 9 (discard) on loopback: only the hosts file answers; nothing here sends a query (asserted below).
const resolver = createCachingResolver(createUpstreamResolver({ servers: [{ host: '127.0.0.1', port: 9 }], hosts }), { now: Date.now });
const credentials = createStaticCredentialSource({ providers: [] });
// As server.ts builds it: proxy, admin and DNS listeners, frozen, one list until a listener moves (newer
// trees parse it once with prepareSelfAddresses; older ones take the list itself).
const selfList = Object.freeze(
  [
    { ip: '127.0.0.1', port: 3128 },
    { ip: '127.0.0.1', port: 9090 },
    { ip: '127.0.0.1', port: 5353 },
  ].map(Object.freeze),
);
const selves = (await load('net/ssrf.js')).prepareSelfAddresses?.(selfList) ?? selfList;
// The relay stage's fakes: every request's handler is answered a batch later (as an upstream answers in a later
// I/O turn) with a whole small response; events are counted, not rendered to a log.
const RELAY_BATCH = 100;
// What bench/proxy/origin.mjs answers with (Node adds Date, Connection and Keep-Alive).
const UPSTREAM_HEADERS = ['content-type', 'text/plain', 'content-length', '64', 'Date', 'Thu, 01 Jan 2026 00:00:00 GMT', 'Connection', 'keep-alive', 'Keep-Alive', 'timeout=120'];
const UPSTREAM_BODY = Buffer.from('ok');
// A curl request through a forward proxy, for the header-filter stage.
const CURL_HEADERS = ['Host', `${HOST}:${L4_PORT}`, 'User-Agent', 'curl/8.5.0', 'Accept', '*/*', 'Proxy-Connection', 'Keep-Alive'];
const pending = [];
let emitted = 0;
const pool = {
  request(_request, handler) {
    pending.push(handler);
    return { abort() {}, pause() {}, resume() {} };
  },
};
// Newer trees resolve through the lookup gate the composition root shares with policy DNS; older ones take the resolver.
const lookups = await load('net/lookup-gate.js').then(
  (m) => m.createLookupGate({ resolver, now: Date.now, report() {} }),
  () => undefined,
);
const ctx = {
  store,
  resolver,
  lookups,
  // Newer trees: the authority memos the composition root hands in (older ones keep them in l7.js).
  authorities: context.createAuthorityParsers?.(),
  credentials,
  allowLoopback: true,
  selfAddresses: () => selves,
  sink: { emit: () => emitted++ },
  // The production metrics with no-op recorders (what --metrics-listen off builds).
  metrics: (await load('proxy/metrics.js')).createProxyMetrics(new (await load('telemetry/metrics.js')).MetricsOffRegistry()),
  logger: { warn: (o, m) => console.error(m, o) },
  upstreams: { pool: () => pool },
  scopes: new WeakMap(),
};
if (createRequestChain !== undefined) {
  // Newer trees: the always-blocked check and the middleware registry the proxy server hands in (older ones ignore them).
  const { permanentRefusal } = await load('net/destination.js');
  const { createMiddlewareRegistry } = await loadFirst('middleware/registry.js');
  const middleware = createMiddlewareRegistry?.({ credentials });
  const permanent = (host, port) => permanentRefusal(host, port, { allowLoopback: true, selfAddresses: selves });
  ctx.responses = (await load('chain/response-chain.js')).createResponseChain({ sink: ctx.sink, middleware });
  ctx.chain = createRequestChain({ store, authorities: ctx.authorities, metrics: ctx.metrics, identity: undefined, credentials, permanent, middleware, destination: (t) => context.destination(ctx, t) });
}
const fakeResponse = () => ({
  headersSent: false,
  writeHead(status, headers) {
    if (status !== 200 || headers.length !== 6) throw new Error(`unexpected head ${status} ${headers}`);
    this.headersSent = true;
  },
  write: () => true,
  end() {},
  on() {},
  once() {},
  removeListener() {},
  writeContinue() {},
  destroy() {},
});

// wrk's request through a forward proxy: absolute-form target plus a Host header.
function request(port) {
  return {
    httpVersion: '1.1',
    url: `http://${HOST}:${port}/`,
    method: 'GET',
    rawHeaders: ['Host', `${HOST}:${port}`],
    socket: { remoteAddress: '127.0.0.1', remotePort: 40000 },
  };
}

function time(label, fn) {
  for (let i = 0; i < Math.min(ITERATIONS, 20_000); i++) fn();
  const start = performance.now();
  for (let i = 0; i < ITERATIONS; i++) fn();
  return { label, us: ((performance.now() - start) * 1000) / ITERATIONS };
}

// Header names and values as a parser hands them over: fresh strings cut from a decoded head, whose hashes V8
// has not computed yet (literals would be internalized and hashed once). Copies are made outside the timing.
const FRESH_BATCH = 200;
function freshCopy(list) {
  const text = Buffer.from(list.join('\n'), 'latin1').toString('latin1');
  const out = [];
  let at = 0;
  for (const part of list) {
    out.push(text.slice(at, at + part.length));
    at += part.length + 1;
  }
  return out;
}

function timeFresh(label, list, fn) {
  const batches = Math.max(1, Math.ceil(ITERATIONS / FRESH_BATCH));
  let total = 0;
  for (let b = 0; b < batches + 10; b++) {
    const copies = Array.from({ length: FRESH_BATCH }, () => freshCopy(list));
    const start = performance.now();
    for (const copy of copies) fn(copy);
    if (b >= 10) total += performance.now() - start;
  }
  return { label, us: (total * 1000) / (batches * FRESH_BATCH) };
}

async function timeAsync(label, fn) {
  for (let i = 0; i < Math.min(ITERATIONS, 20_000); i++) await fn();
  const start = performance.now();
  for (let i = 0; i < ITERATIONS; i++) await fn();
  return { label, us: ((performance.now() - start) * 1000) / ITERATIONS };
}

async function run(port) {
  const req = request(port);
  const rows = [];
  rows.push(time('checkFraming', () => checkFraming(req.httpVersion, req.rawHeaders)));
  rows.push(
    time('parseAbsoluteTarget+parseAuthority', () => {
      const abs = parseAbsoluteTarget(req.url);
      return parseAuthority(abs.authority, { defaultPort: 80 });
    }),
  );
  // Newer trees: the per-authority memo evaluateRequest uses on the forward path.
  if (memoisedAuthorityParser !== undefined) {
    const parseHttpAuthority = memoisedAuthorityParser(80);
    rows.push(time('parseAbsoluteTarget+authority memo', () => parseHttpAuthority(parseAbsoluteTarget(req.url).authority)));
  }
  const l4 = decide(store.current(), { adapter: 'forward', host: HOST, port });
  rows.push(time('decide L4', () => decide(store.current(), { adapter: 'forward', host: HOST, port })));
  if (port === L7_PORT) {
    rows.push(time('decide L7', () => decide(store.current(), { adapter: 'forward', host: HOST, port, method: 'GET', path: '/', query: '' })));
    rows.push(time('canonicalTarget+redact', () => redactPlaceholders(canonicalTarget('/', {}).path)));
  }
  rows.push(time('routeHasCredentials', () => routeHasCredentials(credentials, l4, HOST, port)));
  const endpoint = l4.endpoint;
  // Newer trees: the decision's endpoints for the lookup gate (older ones ignore the field).
  const target = { host: HOST, kind: 'name', port, endpoint, endpoints: l4.endpoints };
  const probe = await resolveFor(ctx, target);
  if (!probe.ok || probe.addresses[0] !== '127.0.0.1') throw new Error(`unexpected destination ${JSON.stringify(probe)}`);
  rows.push(await timeAsync('resolveFor (await)', () => resolveFor(ctx, target)));
  // Newer trees: the promise-free form evaluateRequest uses on a cache hit.
  if (destinationSync !== undefined) rows.push(time('destinationFor (cache hit, sync)', () => destinationSync(ctx, target)));
  rows.push(time('upstreamRequestHeaders', () => upstreamRequestHeaders(req.rawHeaders, { host: hostHeader(HOST, port, false) })));
  rows.push(timeFresh('upstreamRequestHeaders (curl head, fresh)', CURL_HEADERS, (raw) => upstreamRequestHeaders(raw, { host: HOST })));
  rows.push(timeFresh('clientResponseHeaders (origin head, fresh)', UPSTREAM_HEADERS, clientResponseHeaders));
  const headers = upstreamRequestHeaders(req.rawHeaders, { host: hostHeader(HOST, port, false) });
  rows.push(
    time('credentialHead', () => credentialHead({ source: credentials, host: HOST, port, method: 'GET', target: '/', headers, endpoint })),
  );
  if (ctx.chain !== undefined) {
    const hooks = { continueBody() {}, goingUpstream: () => false };
    const init = { adapter: 'forward', wire: { ...req, headers: {} }, hooks, tunnel: undefined, src: req.socket, method: 'GET', h2: false, upgradable: false, body: [] };
    rows.push(
      time('request chain (all stages)', () => {
        const r = new ChainRequest(init);
        const refused = ctx.chain.run(r);
        if (refused !== undefined) throw new Error(`not relayed: ${refused instanceof Promise ? 'waited' : refused.reason}`);
      }),
    );
  } else {
    rows.push(
      await timeAsync('evaluateRequest (await)', async () => {
        const o = beginOutcome('forward', 'http', req.socket);
        o.method = 'GET';
        const e = await evaluateRequest(ctx, req, undefined, o);
        if (e.kind !== 'relay') throw new Error(`not relayed: ${o.reason} ${o.detail}`);
      }),
    );
  }
  if (createRequestHandler !== undefined) {
    const handle = createRequestHandler(ctx);
    const responses = Array.from({ length: RELAY_BATCH }, fakeResponse);
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    const batch = async () => {
      for (const res of responses) {
        res.headersSent = false;
        handle(req, res, false);
      }
      await turn();
      if (pending.length !== RELAY_BATCH) throw new Error(`${pending.length} requests reached the pool`);
      for (const handler of pending.splice(0)) handler.onHead(200, UPSTREAM_HEADERS.slice(), UPSTREAM_BODY, true);
      await turn();
    };
    const batches = Math.ceil(ITERATIONS / RELAY_BATCH);
    for (let i = 0; i < Math.min(batches, 200); i++) await batch();
    const before = emitted;
    const start = performance.now();
    for (let i = 0; i < batches; i++) await batch();
    const us = ((performance.now() - start) * 1000) / (batches * RELAY_BATCH);
    if (emitted - before !== batches * RELAY_BATCH) throw new Error('an event went missing');
    rows.push({ label: `handleProxyRequest (batches of ${RELAY_BATCH})`, us });
  }
  rows.push(await timeAsync('empty await (baseline)', async () => {}));
  return rows;
}

for (const [name, port] of [['L4 endpoint', L4_PORT], ['L7 endpoint (rest, access: full)', L7_PORT]]) {
  console.log(`\n${name}: forward GET http://${HOST}:${port}/ (${ITERATIONS} iterations)`);
  for (const { label, us } of await run(port)) console.log(`  ${label.padEnd(44)} ${us.toFixed(3).padStart(8)} µs`);
}
