// bench/h2/ab-parts.mjs — two compiled trees side by side in one process, for HTTP/2 per-stream work too small to see
// through a noisy host's end-to-end runs: each tree's own client (http2/h2-client.ts) sends requests over loopback TCP
// to its own server session (http2/server-session.ts), as boundary's two ends do, with what the proxy does to the heads
// in between (the request head read, the upstream fields built, the answer's head written, the response read).
// Blocks of each tree alternate; prints the CPU per request of each (process CPU, both threads) and the median
// per-block ratio B/A. With --alloc, each tree alone under the V8 heap sampler instead: bytes allocated per request.
// CLIENTS=a,b: each tree's requests spread over that many clients (sessions) in turn, as a tunnel past its share of a
// shared upstream session uses two (proxy/h2-lane.ts); IN_FLIGHT: requests kept open at once (default 64).
//
// Usage: node bench/h2/ab-parts.mjs <dist A> <dist B> [blocks=16] [requests per block=4000]
//        CLIENTS=1,2 IN_FLIGHT=100 node bench/h2/ab-parts.mjs <dist> <dist> [blocks] [requests per block]
//        node bench/h2/ab-parts.mjs --alloc <dist> [requests=40000]
import { Session } from 'node:inspector';
import { connect, createServer } from 'node:net';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 64);
const CLIENT_HEAD = [':method', 'GET', ':scheme', 'http', ':path', '/index.html', ':authority', 'origin.bench.test:40403', 'user-agent', 'h2load nghttp2/1.52.0', 'accept', '*/*'];
const ANSWER = ['content-type', 'text/plain', 'content-length', '2', 'date', 'Sat, 05 Dec 2026 10:00:00 GMT'];
const BODY = Buffer.from('ok');

async function load(dir, clientCount = 1) {
  const l = (f) => import(pathToFileURL(`${resolve(dir)}/${f}`).href);
  const [server, client, head, headers] = await Promise.all([l('http2/server-session.js'), l('http2/h2-client.js'), l('http2/request-head.js'), l('http2/headers.js')]);
  const listener = createServer((socket) => {
    socket.setNoDelay(true);
    new server.ServerSession(socket, {
      onStream(stream) {
        const read = head.readRequestHead(stream.fields, 'http', stream.remoteEnded);
        if (!read.ok) throw new Error(`bad head: ${read.problem}`);
        stream.contentLength = read.head.contentLength;
        // What proxy/h2-stream.ts does with an answer's head in each tree.
        if (typeof stream.respondHead === 'function') stream.respondHead(200, headers.h2ResponseRegular(ANSWER), false);
        else stream.respond(headers.h2ResponseFields(200, ANSWER), false);
        stream.write(BODY);
        stream.end();
      },
      onFlood: () => undefined,
      onClose: () => undefined,
    });
  });
  await new Promise((r) => listener.listen(0, '127.0.0.1', r));
  const { port } = listener.address();
  const clients = Array.from({ length: clientCount }, () =>
    client.createH2Client({
      connect: () =>
        new Promise((ok, fail) => {
          const s = connect(port, '127.0.0.1', () => ok(s));
          s.setNoDelay(true);
          s.once('error', fail);
        }),
    }),
  );
  let turn = 0;
  // One request as the proxy makes it: the client's head read and checked, its fields rewritten for upstream.
  function one(done) {
    const read = head.readRequestHead(CLIENT_HEAD, 'http', true);
    const raw = read.head.rawHeaders;
    const up = ['host', raw[1]];
    for (let i = 2; i < raw.length; i += 2) up.push(raw[i], raw[i + 1]);
    up.push('via', '2 boundary');
    const handler = {
      onHead(status, _fields, _body, complete) {
        if (status !== 200) throw new Error(`status ${status}`);
        if (complete) done();
      },
      onData() {},
      onTrailers() {},
      onEnd: done,
      onError(err) {
        throw err;
      },
    };
    clients[turn++ % clientCount].request({ method: 'GET', target: '/index.html', headers: up, body: null, scheme: 'http', teTrailers: false, checkedFields: raw }, handler);
  }
  function block(n) {
    return new Promise((ok) => {
      let started = 0;
      let finished = 0;
      const done = () => {
        finished++;
        if (started < n) {
          started++;
          one(done);
        } else if (finished === n) ok();
      };
      for (; started < Math.min(IN_FLIGHT, n); started++) one(done);
    });
  }
  const close = () => {
    for (const c of clients) c.destroy();
    listener.close();
  };
  return { block, close };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

const args = process.argv.slice(2);
if (args[0] === '--alloc') {
  const tree = await load(args[1]);
  const n = Number(args[2] ?? 40000);
  await tree.block(4000);
  const session = new Session();
  session.connect();
  const post = (method, params) => new Promise((ok, fail) => session.post(method, params, (err, r) => (err ? fail(err) : ok(r))));
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await tree.block(n);
  const { profile } = await post('HeapProfiler.stopSampling');
  if (process.env.HEAP_PROFILE_OUT) (await import('node:fs')).writeFileSync(process.env.HEAP_PROFILE_OUT, JSON.stringify(profile));
  let total = 0;
  const walk = (node) => {
    total += node.selfSize;
    for (const c of node.children) walk(c);
  };
  walk(profile.head);
  console.log(`${args[1]}: ${(total / n).toFixed(0)} bytes allocated per request (${n} requests)`);
  tree.close();
} else {
  const [dirA, dirB] = args;
  if (dirA === undefined || dirB === undefined) throw new Error('usage: node bench/h2/ab-parts.mjs <dist A> <dist B> [blocks] [requests per block]');
  const blocks = Number(args[2] ?? 16);
  const n = Number(args[3] ?? 4000);
  const [clientsA, clientsB] = (process.env.CLIENTS ?? '1,1').split(',').map(Number);
  const trees = [await load(dirA, clientsA), await load(dirB, clientsB)];
  for (const t of trees) await t.block(n);
  const per = [[], []];
  for (let b = 0; b < blocks; b++) {
    // A then B, then B then A: neither always runs after the other.
    for (const i of b % 2 === 0 ? [0, 1] : [1, 0]) {
      const before = cpuUs();
      await trees[i].block(n);
      per[i].push((cpuUs() - before) / n);
    }
  }
  const ratios = per[1].map((x, i) => x / per[0][i]);
  console.log(`A ${dirA}: ${median(per[0]).toFixed(2)} µs CPU per request; B ${dirB}: ${median(per[1]).toFixed(2)}`);
  console.log(`B/A per block: median ${median(ratios).toFixed(3)} (${ratios.map((r) => r.toFixed(2)).join(' ')})`);
  for (const t of trees) t.close();
}
