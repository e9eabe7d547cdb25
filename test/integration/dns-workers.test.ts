// `boundary run --dns-workers 2` on the image's Node (22): answers replayed by the workers are the main thread's own,
// a reload that removes a name stops every worker at once, and replays are counted in the DNS metrics and events.
// A mapping's expiry stops them at once too, and a repeat refusal is replayed on one refused-name bucket shared by
// every thread (test/harness/dns-workers-child.ts, on a test clock). On Node 20 the flag
// is refused with DNS_WORKERS_UNSUPPORTED. Real sockets on loopback, dns-packet clients.

import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DecodedPacket, decode } from 'dns-packet';
import { type LoggedChild, type LogLine, spawnLogged } from '../harness/child-lines.js';
import { dnsAddressOf, isDnsReady, MAIN, PROJECT_ROOT, spawnBoundaryCli, standaloneFlags } from '../harness/cli-boundary.js';
import { buildQuery, rcodeOf, tcpQueries, UDP_REPLY_HANG_BOUND_MS } from '../harness/dns-client.js';
import { startWorkersChild, type WorkersChild } from '../harness/dns-workers-driver.js';
import { imageNode } from '../harness/image-node.js';

/** Client sockets, each its own source port: SO_REUSEPORT spreads them over the main thread's socket and the workers'. */
const CLIENTS = 24;
/** Bounds the polls of /metrics for the merged counts (a hang bound, not a budget: merges run every 100 ms). */
const MERGE_WAIT_MS = 30_000;

function policy(names: readonly string[]): string {
  const entries = names.map((name) => `  ${name.split('.')[0]}:\n    endpoints:\n      - host: ${name}\n        port: 443\n        protocol: tcp\n    binaries: [{ path: "/**" }]\n`);
  return `version: 1\nnetwork_policies:\n${entries.join('')}`;
}

/** One query from each client, in turn; the replies in client order. */
/** CLIENTS UDP sockets on loopback, each its own source port (the kernel spreads them over the reusePort group). */
async function bindClients(): Promise<Socket[]> {
  const out: Socket[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const client = createSocket('udp4');
    await new Promise<void>((resolve) => client.bind(0, '127.0.0.1', resolve));
    out.push(client);
  }
  return out;
}

async function askEach(clients: readonly Socket[], port: number, message: Buffer): Promise<Buffer[]> {
  const replies: Buffer[] = [];
  for (const client of clients) {
    replies.push(
      await new Promise<Buffer>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no UDP reply')), UDP_REPLY_HANG_BOUND_MS);
        client.once('message', (reply) => {
          clearTimeout(timer);
          resolve(reply);
        });
        client.send(message, port, '127.0.0.1');
      }),
    );
  }
  return replies;
}

/** The reply with every TTL set to 0: a worker and the main thread may read the clock a second apart. */
function withoutTtl(packet: DecodedPacket): unknown {
  return { ...packet, answers: (packet.answers ?? []).map((a) => ({ ...a, ttl: 0 })), authorities: (packet.authorities ?? []).map((a) => ({ ...a, ttl: 0 })) };
}

function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const MAPPED = 'boundary_dns_queries_total{rcode="NOERROR",outcome="mapped"}';
const REFUSED = 'boundary_dns_queries_total{rcode="NXDOMAIN",outcome="refused"}';
const REPLAYS = 'boundary_dns_worker_replays_total';
/** The one name test/harness/dns-workers-child.ts's policy allows (not imported: importing the child would start it). */
const CHILD_NAME = 'api.example.test';
/** That child's refused-name bucket, which does not refill within a test. */
const CHILD_REFUSAL_BURST = 40;
/** Rounds of a refused name from every client: past the bucket. */
const REFUSAL_ROUNDS = 3;

describe('policy DNS replay workers (--dns-workers 2, Node 22)', () => {
  let node: string | undefined;
  let dir: string;
  let b: LoggedChild | undefined;
  let dnsPort = 0;
  let adminPort = 0;
  const clients: Socket[] = [];

  before(async () => {
    try {
      node = (await imageNode(join(PROJECT_ROOT, 'Dockerfile'))).path;
    } catch {
      node = undefined;
      return;
    }
    dir = await mkdtemp(join(tmpdir(), 'boundary-dns-workers-'));
    await writeFile(join(dir, 'policy.yaml'), policy(['echo.example.test', 'gone.example.test']));
    await writeFile(join(dir, 'hosts'), '127.0.0.1 echo.example.test gone.example.test\n');
    b = spawnLogged([node, '--import', 'tsx', MAIN, 'run', ...standaloneFlags(dir), '--capture', 'off', '--dns-workers', '2'], { cwd: PROJECT_ROOT, label: 'boundary' });
    dnsPort = dnsAddressOf(await b.waitFor(isDnsReady)).port;
    const admin = (await b.waitFor((line) => line.msg === 'admin listening')) as LogLine & { admin: { port: number } };
    adminPort = admin.admin.port;
    clients.push(...(await bindClients()));
  });

  after(async () => {
    for (const client of clients) client.close();
    await b?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  async function metrics(): Promise<string> {
    return (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  }

  /** Polls /metrics until `done` holds (the workers' counts are merged every 100 ms); bounded. */
  async function metricsWhen(done: (text: string) => boolean): Promise<string> {
    const until = performance.now() + MERGE_WAIT_MS;
    for (;;) {
      const text = await metrics();
      if (done(text) || performance.now() > until) return text;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('reports ready only with every worker listening', async (t) => {
    if (node === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
    assert.equal(metricValue(await metrics(), 'boundary_dns_workers{state="running"}'), 2);
    assert.equal((await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status, 200);
  });

  it('answers from the workers byte for byte as the main thread does, and counts every one', async (t) => {
    if (node === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
    const query = buildQuery('echo.example.test', 'A', { id: 0x4242 });
    // TCP is the main thread's alone: its answer is the reference.
    const [reference] = await tcpQueries(dnsPort, [query]);
    assert.equal(rcodeOf(reference!), 'NOERROR');
    const rounds = 3;
    const replies: Buffer[] = [];
    for (let round = 0; round < rounds; round++) replies.push(...(await askEach(clients, dnsPort, query)));
    for (const reply of replies) assert.deepEqual(withoutTtl(decode(reply)), withoutTtl(reference!));
    const sent = 1 + rounds * CLIENTS;
    const text = await metricsWhen((m) => metricValue(m, MAPPED) >= sent && metricValue(m, REPLAYS) > 0);
    assert.equal(metricValue(text, MAPPED), sent, 'every query counted once, whichever thread answered');
    assert.ok(metricValue(text, REPLAYS) > 0, 'some answers came from the workers');
  });

  it('stops every worker replaying a name the moment a reload removes it', async (t) => {
    if (node === undefined || b === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
    const child = b;
    const query = buildQuery('gone.example.test', 'A', { id: 0x0707 });
    const before = metricValue(await metrics(), REPLAYS);
    for (let round = 0; round < 3; round++) for (const reply of await askEach(clients, dnsPort, query)) assert.equal(rcodeOf(decode(reply)), 'NOERROR');
    await metricsWhen((m) => metricValue(m, REPLAYS) > before);
    const isLoaded = (line: LogLine): boolean => (line.ocsf?.message ?? '').startsWith('policy loaded from ');
    const first = child.lines.find(isLoaded);
    await writeFile(join(dir, 'policy.yaml'), policy(['echo.example.test']));
    await child.waitFor((line) => isLoaded(line) && line !== first);
    // No wait: the reload is in force, so no thread may answer from what the old policy made.
    for (const reply of await askEach(clients, dnsPort, query)) assert.equal(rcodeOf(decode(reply)), 'NXDOMAIN');
    const text = await metricsWhen((m) => metricValue(m, REFUSED) >= CLIENTS);
    assert.equal(metricValue(text, REFUSED), CLIENTS);
  });

  it('writes one DNS event per replayed query into the aggregate, flushed at shutdown', async (t) => {
    if (node === undefined || b === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
    const child = b;
    const mapped = metricValue(await metrics(), MAPPED);
    await child.stop();
    b = undefined;
    let echoQueries = 0;
    for (const line of child.lines) {
      const ocsf = line.ocsf as { message?: string; unmapped?: { count?: number; rcode?: string } } | undefined;
      if (!(ocsf?.message ?? '').startsWith('DNS A echo.example.test NOERROR')) continue;
      echoQueries += typeof ocsf?.unmapped?.count === 'number' ? ocsf.unmapped.count : 1;
    }
    // Every echo query was answered NOERROR mapped; the gone.example.test ones before the reload were too.
    assert.equal(echoQueries, 1 + 3 * CLIENTS);
    assert.ok(mapped >= echoQueries);
  });
});

describe('replay workers on a test clock (test/harness/dns-workers-child.ts, Node 22)', () => {
  let child: WorkersChild | undefined;
  let port = 0;
  const clients: Socket[] = [];
  const query = buildQuery(CHILD_NAME, 'A');

  function ask(command: string): Promise<Record<string, unknown>> {
    if (child === undefined) throw new Error('no child');
    return child.ask(command);
  }
  /** Rounds of queries from every client until the workers have replayed some (merged every 100 ms); bounded. */
  async function untilReplayed(): Promise<void> {
    const before = Number((await ask('stats')).replayed);
    const until = performance.now() + MERGE_WAIT_MS;
    while (Number((await ask('stats')).replayed) === before && performance.now() < until) {
      for (const reply of await askEach(clients, port, query)) assert.equal(rcodeOf(decode(reply)), 'NOERROR');
    }
    assert.ok(Number((await ask('stats')).replayed) > before, 'the workers replayed the answer');
  }

  before(async () => {
    child = await startWorkersChild();
    if (child === undefined) return;
    port = child.port;
    clients.push(...(await bindClients()));
  });

  after(async () => {
    for (const client of clients) client.close();
    await child?.kill();
  });

  it('starts a worker that dies again, 3 times a minute, and every query is answered meanwhile', async (t) => {
    if (child === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
    await untilReplayed();
    for (let death = 1; death <= 3; death++) {
      assert.deepEqual(await ask('kill'), { restarted: true, running: 2 });
      for (const reply of await askEach(clients, port, query)) assert.equal(rcodeOf(decode(reply)), 'NOERROR');
    }
    // The fourth death in the window: it stays down, and the other sockets take its share of the port.
    assert.deepEqual(await ask('kill'), { restarted: false, running: 1 });
    for (const reply of await askEach(clients, port, query)) assert.equal(rcodeOf(decode(reply)), 'NOERROR');
    await untilReplayed();
  });

  it('stops every worker replaying the answer once the mapping expires', async (t) => {
    if (child === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
    await untilReplayed();
    assert.equal((await ask('expire')).expired, 1);
    // The upstream now says NXDOMAIN: any NOERROR would be a worker replaying the expired mapping.
    for (const reply of await askEach(clients, port, query)) assert.equal(rcodeOf(decode(reply)), 'NXDOMAIN');
  });

  it('replays a repeat refusal from the workers too, charged to one refused-name bucket for every thread', async (t) => {
    if (child === undefined) return t.skip('the image Node (npm package node@22) is not installable here');
    const before = await ask('stats');
    const refused = buildQuery('refused.example.test', 'A');
    const rcodes: string[] = [];
    for (let round = 0; round < REFUSAL_ROUNDS; round++) for (const reply of await askEach(clients, port, refused)) rcodes.push(rcodeOf(decode(reply)));
    const sent = REFUSAL_ROUNDS * CLIENTS;
    // The bucket does not refill within the test: its burst answered in full, whichever thread answered, then REFUSED.
    assert.equal(rcodes.filter((rcode) => rcode === 'NXDOMAIN').length, CHILD_REFUSAL_BURST);
    assert.equal(rcodes.filter((rcode) => rcode === 'REFUSED').length, sent - CHILD_REFUSAL_BURST);
    // The workers' counts are merged every 100 ms, and the limit's report goes out on a tick: bounded polls.
    const until = performance.now() + MERGE_WAIT_MS;
    let stats = await ask('stats');
    while ((Number(stats.refusalsOverLimit) < sent - CHILD_REFUSAL_BURST || Number(stats.limitedQueries) < sent - CHILD_REFUSAL_BURST) && performance.now() < until) {
      await ask('tick');
      stats = await ask('stats');
    }
    assert.equal(Number(stats.refusalsOverLimit) - Number(before.refusalsOverLimit), sent - CHILD_REFUSAL_BURST, 'every REFUSED counted once');
    assert.equal(Number(stats.limitedQueries) - Number(before.limitedQueries), sent - CHILD_REFUSAL_BURST, 'and reported in the limit events');
    assert.equal(Number(stats.refuseEvents) - Number(before.refuseEvents), CHILD_REFUSAL_BURST, 'one NET:REFUSE per refusal answered in full');
    assert.ok(Number(stats.replayed) > Number(before.replayed), 'the workers replayed the refusal');
    assert.equal((await ask('close')).closed, true);
  });
});

describe('--dns-workers on a Node without dgram reusePort', () => {
  it('is refused at start with DNS_WORKERS_UNSUPPORTED, never run on one thread', async (t) => {
    if (Number(process.versions.node.split('.')[0]) >= 22) return t.skip(`this test runs on Node 20; this is ${process.version}`);
    const dir = await mkdtemp(join(tmpdir(), 'boundary-dns-workers-20-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'policy.yaml'), policy(['echo.example.test']));
    await writeFile(join(dir, 'hosts'), '127.0.0.1 echo.example.test\n');
    const child = spawnBoundaryCli([...standaloneFlags(dir), '--dns-workers', '2']);
    assert.equal(await child.exited(), 1);
    assert.match(child.stderr(), /\(DNS_WORKERS_UNSUPPORTED\)/);
    assert.equal(
      child.lines.some((line) => line.msg === 'admin listening' || isDnsReady(line)),
      false,
      'nothing listened',
    );
  });
});
