// Child of test/regressions/issue-33-h2-streams-after-idle.test.ts (run with --expose-gc): boundary's HTTP/2 client
// and server session over loopback TCP, as its two ends are. A few requests, then two full collections (what an idle
// period does: every long-lived object, the sessions' stream tables among them, reaches the old generation), then
// REQUESTS requests, IN_FLIGHT at a time. Prints JSON: how much the old generation grew during them and how many full
// collections ran. Streams live a few milliseconds, so nothing of theirs should be promoted.
import { connect, createServer, type Socket } from 'node:net';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { createH2Client, type H2Handler } from '../../src/http2/h2-client.js';
import { h2ResponseRegular } from '../../src/http2/headers.js';
import { readRequestHead } from '../../src/http2/request-head.js';
import { ServerSession } from '../../src/http2/server-session.js';

const REQUESTS = Number(process.argv[2] ?? 20_000);
const IN_FLIGHT = 10;
const WARM_REQUESTS = 200;
const HEAD = [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'origin.test:8080', 'user-agent', 'test', 'accept', '*/*'];
const BODY = Buffer.from('ok');
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');

const listener = createServer((socket: Socket) => {
  new ServerSession(socket, {
    onStream(stream) {
      const read = readRequestHead(stream.fields, 'http', stream.remoteEnded);
      if (!read.ok) throw new Error(`bad head: ${read.problem}`);
      stream.respondHead(200, h2ResponseRegular(['content-length', '2']), false);
      stream.write(BODY);
      stream.end();
    },
    onFlood: () => undefined,
    onClose: () => undefined,
  });
});
await new Promise<void>((ok) => listener.listen(0, '127.0.0.1', ok));
const { port } = listener.address() as { port: number };
const client = createH2Client({
  connect: () =>
    new Promise<Socket>((ok, fail) => {
      const s = connect(port, '127.0.0.1', () => ok(s));
      s.once('error', fail);
    }),
});

function run(n: number): Promise<void> {
  return new Promise((ok, fail) => {
    let started = 0;
    let finished = 0;
    const done = (): void => {
      finished++;
      if (started < n) start();
      else if (finished === n) ok();
    };
    const handler: H2Handler = {
      onHead: (status, _fields, _body, complete) => {
        if (status !== 200) fail(new Error(`status ${status}`));
        else if (complete) done();
      },
      onData: () => undefined,
      onTrailers: () => undefined,
      onEnd: done,
      onError: fail,
    };
    const start = (): void => {
      started++;
      const read = readRequestHead(HEAD, 'http', true);
      if (!read.ok) throw new Error(read.problem);
      const raw = read.head.rawHeaders;
      client.request({ method: 'GET', target: '/', headers: ['host', 'origin.test:8080', ...raw], body: null, scheme: 'http', teTrailers: false, checkedFields: raw }, handler);
    };
    while (started < Math.min(IN_FLIGHT, n)) start();
  });
}

await run(WARM_REQUESTS);
gc();
gc();
let fullCollections = 0;
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) if ((entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) fullCollections++;
});
observer.observe({ entryTypes: ['gc'] });
const oldSpace = (): number => getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')?.space_used_size ?? 0;
const before = oldSpace();
await run(REQUESTS);
const grew = oldSpace() - before;
// The observer reports on a later turn.
await new Promise((ok) => setTimeout(ok, 20));
observer.disconnect();
client.destroy();
listener.close();
process.stdout.write(`${JSON.stringify({ oldSpaceGrowth: grew, fullCollections })}\n`);
