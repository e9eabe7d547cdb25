import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { decode } from 'dns-packet';
import { createPolicyDns } from '../../src/dns/policy-dns.js';
import { createDnsServer, type DnsHandler, MAX_UDP_IN_FLIGHT, NO_RESPONSE } from '../../src/dns/server.js';
import { cidrContains, parseCidr, parseIp } from '../../src/net/ip.js';
import type { ResolveResult, Resolver } from '../../src/net/resolver.js';
import { createSyntheticPool } from '../../src/net/synthetic.js';
import { buildQuery, rcodeOf, tcpQueries, udpExchange, udpQuery } from '../harness/dns-client.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { collectingSink, type DnsStack, startDnsStack } from '../harness/dns-stack.js';
import { testLookupGate } from '../harness/lookup-gate.js';
import { withinDeadline } from '../harness/waiters.js';

const run = promisify(execFile);
/** Answers nothing, ever. */
const IDLE: DnsHandler = { answer: () => NO_RESPONSE };

async function dig(port: number, ...args: string[]): Promise<{ status: string; answers: string[] }> {
  const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(port), '+tries=1', '+time=3', '+noall', '+comments', '+answer', ...args]);
  const status = /status: ([A-Z]+)/.exec(stdout)?.[1] ?? 'none';
  const answers = stdout
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith(';'))
    .map((l) => l.split(/\s+/).slice(3).join(' '));
  return { status, answers };
}

describe('policy DNS server with dig as the client', () => {
  let stack: DnsStack;
  before(async () => {
    stack = await startDnsStack({
      endpoints: [
        { host: 'api.example.test', ports: [443] },
        { host: 'gone.example.test', ports: [443] },
      ],
      upstream: { 'api.example.test': { a: ['127.0.0.2'], ttl: 20 } },
    });
  });
  after(() => stack.close());

  it('answers an allowed name with an address from the pool', async () => {
    const { status, answers } = await dig(stack.port, 'api.example.test', 'A');
    assert.equal(status, 'NOERROR');
    assert.equal(answers.length, 1);
    const [type, ip] = (answers[0] ?? '').split(' ');
    assert.equal(type, 'A');
    assert.ok(cidrContains(parseCidr(stack.pool.windows[4])!, parseIp(ip ?? '')!), `${ip} in ${stack.pool.windows[4]}`);
  });

  it('refuses a denied name and never asks upstream for it', async () => {
    assert.equal((await dig(stack.port, 'denied.example.test', 'A')).status, 'NXDOMAIN');
    assert.equal(stack.fixture.count('denied.example.test'), 0);
  });

  it('answers AAAA with NOERROR and no records, without asking upstream', async () => {
    const { status, answers } = await dig(stack.port, 'api.example.test', 'AAAA');
    assert.equal(status, 'NOERROR');
    assert.deepEqual(answers, []);
    assert.equal(stack.fixture.queries.filter((q) => q.type === 'AAAA').length, 0);
  });

  it('answers MX with NOTIMP', async () => {
    assert.equal((await dig(stack.port, 'api.example.test', 'MX')).status, 'NOTIMP');
  });

  it('answers over TCP (+tcp) with the same mapping', async () => {
    const udp = await dig(stack.port, 'api.example.test', 'A');
    const tcp = await dig(stack.port, '+tcp', 'api.example.test', 'A');
    assert.equal(tcp.status, 'NOERROR');
    assert.equal(tcp.answers[0]?.split(' ')[1], udp.answers[0]?.split(' ')[1]);
  });

  it('passes an upstream NXDOMAIN through', async () => {
    assert.equal((await dig(stack.port, 'gone.example.test', 'A')).status, 'NXDOMAIN');
    assert.equal(stack.fixture.count('gone.example.test'), 1);
  });

  it('answers a 0x20-cased name with the same mapping (DN-10)', async () => {
    const lower = await dig(stack.port, 'api.example.test', 'A');
    const mixed = await dig(stack.port, 'aPi.ExAmple.TEST', 'A');
    assert.deepEqual(mixed.answers, lower.answers);
    assert.ok(stack.fixture.queries.every((q) => q.name === q.name.toLowerCase()));
  });
});

describe('policy DNS server on the wire', () => {
  let stack: DnsStack;
  before(async () => {
    stack = await startDnsStack({
      endpoints: [{ host: 'api.example.test', ports: [443] }],
      upstream: { 'api.example.test': { a: ['127.0.0.2'] } },
      tcpIdleTimeoutMs: 300,
    });
  });
  after(() => stack.close());

  it('answers FORMERR to two questions over UDP (DN-06)', async () => {
    const wire = buildQuery('api.example.test');
    wire.writeUInt16BE(2, 4);
    assert.equal(rcodeOf(await udpQuery(stack.port, wire)), 'FORMERR');
  });

  it('drops runts without a reply and keeps answering (DN-07)', async () => {
    const socket = createSocket('udp4');
    socket.send(Buffer.from([1, 2, 3, 4, 5]), stack.port, '127.0.0.1');
    socket.send(buildQuery('api.example.test', 'A', { id: 4242 }), stack.port, '127.0.0.1');
    const [reply] = (await once(socket, 'message')) as [Buffer];
    socket.close();
    assert.equal(decode(reply).id, 4242);
  });

  it('answers two queries on one TCP connection, in order: A then AAAA as libc does (DN-18, DN-34)', async () => {
    const replies = await tcpQueries(stack.port, [buildQuery('api.example.test', 'A', { id: 1 }), buildQuery('api.example.test', 'AAAA', { id: 2 })]);
    assert.deepEqual(replies.map((r) => [r.id, rcodeOf(r), r.answers?.length]), [
      [1, 'NOERROR', 1],
      [2, 'NOERROR', 0],
    ]);
  });

  it('closes a TCP connection whose length prefix is 0 (DN-19)', async () => {
    const socket = connect(stack.port, '127.0.0.1');
    socket.on('error', () => {});
    await once(socket, 'connect');
    socket.write(Buffer.from([0, 0]));
    await once(socket, 'close');
  });

  it('idles out a TCP connection that promised more bytes than it sent, while others are served (DN-19)', async () => {
    const socket = connect(stack.port, '127.0.0.1');
    socket.on('error', () => {});
    await once(socket, 'connect');
    const closed = once(socket, 'close');
    socket.write(Buffer.from([0x01, 0x00, 0x12, 0x34]));
    assert.equal(rcodeOf(await udpQuery(stack.port, buildQuery('api.example.test'))), 'NOERROR');
    assert.equal((await tcpQueries(stack.port, [buildQuery('api.example.test')]))[0]?.answers?.length, 1);
    await closed;
  });

  it('starts and closes idempotently', async () => {
    const server = createDnsServer({ host: '127.0.0.1', port: 0, handler: IDLE });
    await Promise.all([server.start(), server.start()]);
    await server.close();
    await server.close();
    assert.throws(() => createDnsServer({ host: 'localhost', port: 0, handler: IDLE }), { code: 'ADDRESS_INVALID' });
  });
});

describe('policy DNS server under concurrency', () => {
  it(`keeps at most ${MAX_UDP_IN_FLIGHT} UDP queries in flight and answers all 200 in the end (DN-20)`, async (t) => {
    const waiting: ((r: ResolveResult) => void)[] = [];
    let open = false;
    let reachedLimit: () => void = () => {};
    const limitReached = new Promise<void>((resolve) => (reachedLimit = resolve));
    const resolver: Resolver = {
      resolve: () => {
        if (open) return Promise.resolve({ ok: true, addresses: ['127.0.0.2'], ttlSeconds: 30 });
        return new Promise((resolve) => {
          waiting.push(resolve);
          if (waiting.length === MAX_UDP_IN_FLIGHT) reachedLimit();
        });
      },
    };
    const pool = createSyntheticPool({ epoch: 0, now: Date.now });
    // Four wildcards and a raised new-name burst: the queue under test sits below the per-sandbox and
    // per-endpoint mapping limits (issue 16), which would otherwise refuse part of a 200-name burst.
    const wildcards = ['a', 'b', 'c', 'd'].map((w) => ({ host: `*.${w}.example.test`, ports: [443] }));
    const dns = createPolicyDns({
      policy: () => stubPolicy(wildcards),
      lookups: testLookupGate(resolver, { newNames: { perSecond: 10, burst: 1_000 } }),
      pool,
      sink: collectingSink(false),
      now: Date.now,
      allowLoopback: true,
    });
    // Counts the datagrams as the server takes them in: the test waits on the 200th arriving, not on time.
    let received = 0;
    let allReceived: () => void = () => {};
    const allArrived = new Promise<void>((resolve) => (allReceived = resolve));
    const onUdpReceived = (): void => {
      if (++received === 200) allReceived();
    };
    const server = createDnsServer({ host: '127.0.0.1', port: 0, handler: dns.handler, onUdpReceived });
    await server.start();
    t.after(() => server.close());
    const port = server.address().port;
    const replies = Array.from({ length: 200 }, (_, i) => udpExchange(port, buildQuery(`n${i}.${'abcd'[i % 4]}.example.test`, 'A', { id: i }), 10_000));
    await limitReached;
    // Let the remaining datagrams arrive: they must queue, not start more upstream work.
    await withinDeadline(allArrived, 'the 200th datagram at the server');
    assert.equal(server.stats().udpReceived, 200);
    assert.equal(server.stats().udpInFlight, MAX_UDP_IN_FLIGHT);
    assert.equal(waiting.length, MAX_UDP_IN_FLIGHT);
    open = true;
    for (const release of waiting) release({ ok: true, addresses: ['127.0.0.2'], ttlSeconds: 30 });
    const answered = await Promise.all(replies);
    assert.equal(answered.filter((r) => r !== undefined && rcodeOf(decode(r)) === 'NOERROR').length, 200);
    assert.equal(server.stats().udpInFlight, 0);
  });
});
