// At least 100,000 random and mutated packets over UDP and TCP; afterwards valid queries must still answer.
// Deterministic (seeded) so a failure can be replayed; bounded by the packet count, not by a clock.

import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { decode } from 'dns-packet';
import { buildQuery, rcodeOf, tcpQueries, udpExchange, udpQuery } from '../harness/dns-client.js';
import { startDnsStack } from '../harness/dns-stack.js';
import { seeded } from '../harness/seeded.js';

const UDP_PACKETS = 80_000;
const TCP_PACKETS = 24_000;
const UDP_BATCH = 250;
const TCP_PER_CONNECTION = 40;
const TCP_PARALLEL = 8;

const SEEDS = [
  buildQuery('api.example.test'),
  buildQuery('api.example.test', 'AAAA', { edns: 4096 }),
  buildQuery('ApI.example.test', 'MX'),
  buildQuery('x.svc.test', 'A', { edns: 65_535 }),
  buildQuery('denied.test'),
  buildQuery('2852039166'),
];

function packet(random: () => number): Buffer {
  const int = (n: number) => Math.floor(random() * n);
  const kind = int(6);
  if (kind === 0) {
    const out = Buffer.alloc(int(600));
    for (let i = 0; i < out.length; i++) out[i] = int(256);
    return out;
  }
  const seed = SEEDS[int(SEEDS.length)] ?? SEEDS[0]!;
  const out = Buffer.from(seed);
  if (kind === 1) return out.subarray(0, int(out.length + 1));
  if (kind === 2) {
    for (let i = 0, n = 1 + int(4); i < n; i++) {
      const j = int(out.length);
      out[j] = (out[j] ?? 0) ^ (1 << int(8));
    }
    return out;
  }
  if (kind === 3) {
    // Header fields: counts, flags, opcode.
    out.writeUInt16BE(int(65_536), 2 + 2 * int(5));
    return out;
  }
  if (kind === 4) {
    // Label lengths and pointers where names are.
    out[12 + int(out.length - 12)] = [0x3f, 0x40, 0xc0, 0xc0 | int(64), 0xff, 0][int(6)] ?? 0;
    if (random() < 0.5) out[13 + int(out.length - 13)] = int(256);
    return out;
  }
  const extra = Buffer.alloc(int(64));
  for (let i = 0; i < extra.length; i++) extra[i] = int(256);
  return Buffer.concat([out.subarray(0, int(out.length)), extra, out.subarray(int(out.length))]);
}

describe('policy DNS fuzzing', () => {
  it(`survives ${UDP_PACKETS + TCP_PACKETS} random and mutated packets over UDP and TCP, then still answers`, { timeout: 120_000 }, async (t) => {
    const stack = await startDnsStack({
      endpoints: [{ host: 'api.example.test', ports: [443] }, { host: '*.svc.test', ports: [5432] }],
      upstream: { 'api.example.test': { a: ['127.0.0.2'] }, 'x.svc.test': { a: ['127.0.0.3'] } },
      keepEvents: false,
    });
    t.after(() => stack.close());
    const random = seeded(0x5eed);

    const socket = createSocket('udp4');
    socket.on('message', () => {});
    t.after(() => socket.close());
    let probes = 0;
    for (let sent = 0; sent < UDP_PACKETS; ) {
      for (let i = 0; i < UDP_BATCH; i++, sent++) socket.send(packet(random), stack.port, '127.0.0.1');
      // Backpressure: a valid probe after each batch; its answer means the batch before it was read.
      const reply = await udpExchange(stack.port, buildQuery('api.example.test', 'A', { id: probes++ & 0xffff }), 5_000);
      assert.ok(reply !== undefined, `probe ${probes} after ${sent} packets got no answer`);
    }

    let tcpSent = 0;
    async function tcpConnection(): Promise<void> {
      const c = connect(stack.port, '127.0.0.1');
      c.on('error', () => {});
      c.on('data', () => {});
      await once(c, 'connect');
      const frames: Buffer[] = [];
      for (let i = 0; i < TCP_PER_CONNECTION; i++, tcpSent++) {
        const body = packet(random);
        const prefix = Buffer.alloc(2);
        // Mostly honest prefixes, sometimes lies (0, too long, too short).
        const r = random();
        prefix.writeUInt16BE(r < 0.9 ? body.length : r < 0.93 ? 0 : r < 0.96 ? body.length + 7 : Math.max(0, body.length - 3));
        frames.push(prefix, body);
      }
      c.end(Buffer.concat(frames));
      if (!c.destroyed) await once(c, 'close');
    }
    while (tcpSent < TCP_PACKETS) await Promise.all(Array.from({ length: TCP_PARALLEL }, () => tcpConnection()));

    assert.equal(stack.server.stats().errors, 0, 'the handler never threw');
    assert.equal(rcodeOf(await udpQuery(stack.port, buildQuery('api.example.test'))), 'NOERROR');
    // Refused either way: NXDOMAIN, or REFUSED when the fuzz's valid-looking refused names used up the refusal
    // rate limit (docs/dns.md#rate-limits; how much refilled depends on how long the fuzz took).
    assert.ok(['NXDOMAIN', 'REFUSED'].includes(rcodeOf(await udpQuery(stack.port, buildQuery('denied.test')))));
    const [reply] = await tcpQueries(stack.port, [buildQuery('x.svc.test')]);
    assert.equal(reply?.answers?.length, 1);
    assert.equal(decode(buildQuery('api.example.test')).questions?.length, 1);
    t.diagnostic(`udp ${UDP_PACKETS} packets, tcp ${tcpSent} packets, server stats ${JSON.stringify(stack.server.stats())}`);
  });
});
