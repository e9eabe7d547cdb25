// bench/proxy/chain-ab.mjs — two compiled trees side by side in one process, for the per-request work HTTP/1.1 and
// HTTP/2 share, too small to see through a noisy host's end-to-end runs: a forward GET (the policy bench/proxy.sh
// writes, an L4 endpoint) run through each tree's real request chain, its outcome counted by the proxy's metrics
// (a real registry) and written as an audit line through the production sink (denial ring included) to a file, as
// bench/proxy.sh's boundary writes its log (a regular file is written from the loop), emptied after every block.
// Blocks of each tree alternate, a tick of requests at a time as a proxy serves them; prints the CPU per request of
// each and the median per-block ratio B/A. Bounded loops; no sockets (the destination is answered by the hosts file).
//
// Usage: node bench/proxy/chain-ab.mjs <dist A> <dist B> [blocks=30]
//        e.g. bench/out/build-<sha>/dist (what BOUNDARY_REF builds) against dist
//        L7=1 node bench/proxy/chain-ab.mjs ...   the endpoint bench/h2.sh's policy has (protocol: rest, access: full):
//        every request decided by method and path as well
//        ALLOC=1 node bench/proxy/chain-ab.mjs <dist> <dist> [blocks]   bytes allocated per request by tree A alone
//        (V8's sampling heap profiler, collected objects included; ALLOC_OUT=<file> keeps the profile): the harness's
//        own request (its decoded text, split strings, wire and source objects) is about 0.8 KB of it
import { ftruncateSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dirA, dirB, blocksArg] = process.argv.slice(2);
if (dirA === undefined || dirB === undefined) throw new Error('usage: node bench/proxy/chain-ab.mjs <dist A> <dist B> [blocks]');
const BLOCKS = Math.min(Number(blocksArg ?? 30), 200);
const HOST = 'origin.bench.test';
const PORT = 18080;
const PER_TICK = 100;
const PER_BLOCK = 20_000;
const L7_ENDPOINT = process.env.L7 === '1' ? '\n        protocol: rest\n        enforcement: enforce\n        access: full' : '';
const logDir = mkdtempSync(join(tmpdir(), 'boundary-chain-ab-'));
process.on('exit', () => rmSync(logDir, { recursive: true, force: true }));
let logs = 0;

async function load(dir) {
  const l = (f) => import(pathToFileURL(`${resolve(dir)}/${f}`).href);
  const { parsePolicy } = await l('policy/parse.js');
  const { createPolicyStore } = await l('policy/store.js');
  const { createStaticCredentialSource } = await l('credentials/source.js');
  const { createUpstreamResolver } = await l('dns/upstream.js');
  const { parseHostsFile } = await l('net/hosts.js');
  const { createCachingResolver } = await l('net/resolver-cache.js');
  const { createLookupGate } = await l('net/lookup-gate.js');
  const { prepareSelfAddresses } = await l('net/ssrf.js');
  const { permanentRefusal } = await l('net/destination.js');
  const { createHostCache } = await l('net/host.js');
  const context = await l('proxy/context.js');
  const { createProxyMetrics } = await l('proxy/metrics.js');
  const { createMiddlewareRegistry } = await l('middleware/registry.js');
  const { createRequestChain } = await l('chain/request-chain.js');
  const { ChainRequest } = await l('chain/request.js');
  const { requestOutcome } = await l('chain/event.js');
  const { emitOutcome } = await l('chain/events.js');
  const { createAuditSink } = await l('telemetry/audit.js');
  const { createLogger } = await l('telemetry/logger.js');
  const { createBufferedDestination } = await l('telemetry/log-destination.js');
  const { createDenialRing, recordingDenials } = await l('telemetry/denials.js');
  const { Registry } = await import('prom-client');

  const store = createPolicyStore();
  store.swap(parsePolicy(`version: 1
network_policies:
  bench_origin:
    name: bench-origin
    endpoints:
      - host: ${HOST}
        port: ${PORT}${L7_ENDPOINT}
    binaries:
      - path: "/**"
`));
  const hosts = parseHostsFile(`127.0.0.1 localhost\n127.0.0.1 ${HOST}\n`);
  // Port 9 on loopback: only the hosts file answers; nothing here sends a query.
  const resolver = createCachingResolver(createUpstreamResolver({ servers: [{ host: '127.0.0.1', port: 9 }], hosts }), { now: Date.now });
  const credentials = createStaticCredentialSource({ providers: [] });
  const selves = prepareSelfAddresses(Object.freeze([{ ip: '127.0.0.1', port: 3128 }].map(Object.freeze)));
  // Appending, so emptying the file between blocks (ftruncate) starts it over.
  const logFd = openSync(join(logDir, `audit-${logs++}.log`), 'a');
  const logger = createLogger({ format: 'json', destination: createBufferedDestination(logFd) });
  const sink = recordingDenials(createAuditSink({ logger, now: Date.now, format: 'json' }), createDenialRing(), Date.now);
  // The composition root's memo of normalised hosts, handed to the destination and always-blocked checks.
  const hostCache = createHostCache();
  const ctx = {
    store,
    hosts: hostCache,
    resolver,
    lookups: createLookupGate({ resolver, now: Date.now, report() {} }),
    authorities: context.createAuthorityParsers(),
    credentials,
    allowLoopback: true,
    selfAddresses: () => selves,
    sink,
    metrics: createProxyMetrics(new Registry()),
    logger: { warn: (o, m) => console.error(m, o) },
  };
  const middleware = createMiddlewareRegistry({ credentials });
  const chain = createRequestChain({
    store,
    authorities: ctx.authorities,
    metrics: ctx.metrics,
    identity: undefined,
    credentials,
    permanent: (host, port) => permanentRefusal(host, port, { allowLoopback: true, selfAddresses: selves, hosts: hostCache }),
    middleware,
    destination: (t) => context.destination(ctx, t),
  });
  const hooks = { continueBody() {}, goingUpstream: () => false };
  // The parser's strings are fresh (not internalized) per request: cut from one decoded text, as llhttp's are.
  const text = Buffer.from(`GET\nhttp://${HOST}:${PORT}/\nHost\n${HOST}:${PORT}`, 'latin1');
  const request = (port) => {
    const [method, url, name, value] = text.toString('latin1').split('\n');
    const wire = { httpVersion: '1.1', url, rawHeaders: [name, value], headers: {} };
    const src = { ip: '127.0.0.1', port };
    return new ChainRequest({ adapter: 'forward', wire, hooks, tunnel: undefined, src, method, h2: false, upgradable: false, body: [] });
  };
  // The first request looks the name up (a promise); every later one finds it cached, as under steady load.
  const first = await chain.run(request(40000));
  if (first !== undefined) throw new Error(`not relayed: ${first.reason}`);
  const finish = (r, refused) => {
    if (refused !== undefined) throw new Error(`not relayed: ${refused.reason}`);
    r.upstream.status = 200;
    emitOutcome(sink, ctx.metrics, requestOutcome(r));
  };
  // A request that waits (the cached answer expired: a lookup through the hosts file) finishes a turn later.
  const tick = (from) => {
    for (let i = 0; i < PER_TICK; i++) {
      const r = request(40000 + ((from + i) & 8191));
      const refused = chain.run(r);
      if (refused instanceof Promise) refused.then((waited) => finish(r, waited));
      else finish(r, refused);
    }
  };
  return { tick, empty: () => ftruncateSync(logFd, 0) };
}

const trees = [await load(dirA), await load(dirB)];
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const block = async (tree) => {
  for (let t = 0; t < PER_BLOCK / PER_TICK; t++) {
    tree.tick(t * PER_TICK);
    await new Promise((r) => setImmediate(r));
  }
};
if (process.env.ALLOC === '1') await allocations(trees[0]);
for (const tree of trees) for (let w = 0; w < 3; w++) await block(tree);
const per = [[], []];
for (let k = 0; k < BLOCKS; k++) {
  for (const i of k % 2 ? [1, 0] : [0, 1]) {
    const t = cpu();
    await block(trees[i]);
    per[i].push(((cpu() - t) * 1000) / PER_BLOCK);
    trees[i].empty();
  }
}
const med = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
const ratios = per[1].map((x, i) => x / per[0][i]).sort((x, y) => x - y);
console.log(
  `A ${med(per[0]).toFixed(0)} ns/request, B ${med(per[1]).toFixed(0)} ns/request, B/A per block median ${med(ratios).toFixed(3)} (${ratios[0].toFixed(2)}-${ratios.at(-1).toFixed(2)})`,
);

/** Bytes allocated per request by one tree, after 10 blocks of warm-up; then exits. */
async function allocations(tree) {
  const { Session } = await import('node:inspector');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  const post = (method, params) => new Promise((ok, fail) => session.post(method, params, (err, r) => (err ? fail(err) : ok(r))));
  const run = async () => {
    await block(tree);
    tree.empty();
  };
  for (let w = 0; w < 10; w++) await run();
  await post('HeapProfiler.startSampling', { samplingInterval: 32, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  for (let k = 0; k < BLOCKS; k++) await run();
  const { profile } = await post('HeapProfiler.stopSampling');
  if (process.env.ALLOC_OUT) writeFileSync(process.env.ALLOC_OUT, JSON.stringify(profile));
  const sum = (node) => node.children.reduce((n, child) => n + sum(child), node.selfSize);
  console.log(`A ${(sum(profile.head) / (BLOCKS * PER_BLOCK)).toFixed(0)} bytes allocated per request`);
  process.exit(0);
}
