import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decode } from 'dns-packet';
import {
  createQueryParser,
  type DnsQuery,
  encodeAnswer,
  MAX_UDP_RESPONSE_BYTES,
  parseQuery,
  respondFrom,
  responseLimit,
} from '../../src/dns/answer.js';
import { buildQuery, rcodeOf } from '../harness/dns-client.js';

function query(wire: Buffer): DnsQuery {
  const parsed = parseQuery(wire);
  assert.equal(parsed.kind, 'query', parsed.kind === 'query' ? '' : parsed.why);
  return (parsed as { query: DnsQuery }).query;
}

function formerr(wire: Buffer): string {
  const parsed = parseQuery(wire);
  assert.equal(parsed.kind, 'formerr');
  const response = decode((parsed as { response: Buffer }).response);
  assert.equal(rcodeOf(response), 'FORMERR');
  assert.equal(response.id, wire.readUInt16BE(0));
  assert.equal(response.questions?.length, 0);
  return (parsed as { why: string }).why;
}

/** Header (id 0xbeef, RD, QDCOUNT 1) followed by the given question bytes. */
function raw(question: number[], flags = 0x0100, counts = [1, 0, 0, 0]): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(0xbeef, 0);
  header.writeUInt16BE(flags, 2);
  for (const [i, c] of counts.entries()) header.writeUInt16BE(c, 4 + i * 2);
  return Buffer.concat([header, Buffer.from(question)]);
}

const API = [3, ...Buffer.from('api'), 7, ...Buffer.from('example'), 4, ...Buffer.from('test'), 0];

describe('parseQuery', () => {
  it('reads id, RD, a lower-cased name, type, class and the EDNS payload size', () => {
    const q = query(buildQuery('ApI.ExAmPlE.TeSt', 'AAAA', { id: 77, edns: 4096 }));
    assert.equal(q.id, 77);
    assert.equal(q.rd, true);
    assert.equal(q.name, 'api.example.test');
    assert.equal(q.type, 28);
    assert.equal(q.qclass, 1);
    assert.equal(q.edns, 4096);
    assert.equal(query(buildQuery('api.example.test', 'A', { rd: false })).rd, false);
    assert.equal(query(buildQuery('api.example.test')).edns, undefined);
  });

  it('drops anything shorter than the 12-byte header (DN-07)', () => {
    for (let n = 0; n < 12; n++) assert.equal(parseQuery(Buffer.alloc(n)).kind, 'drop');
  });

  it('answers FORMERR to QDCOUNT 0 or 2, a response, and an opcode other than QUERY (DN-06)', () => {
    assert.match(formerr(raw([], 0x0100, [0, 0, 0, 0])), /QDCOUNT/);
    assert.match(formerr(raw([...API, 0, 1, 0, 1, ...API, 0, 1, 0, 1], 0x0100, [2, 0, 0, 0])), /QDCOUNT/);
    assert.match(formerr(raw([...API, 0, 1, 0, 1], 0x8100)), /QR/);
    assert.match(formerr(raw([...API, 0, 1, 0, 1], 0x2100)), /opcode/);
  });

  it('copies id, opcode and RD into the FORMERR header and sets RA', () => {
    const parsed = parseQuery(raw([...API, 0, 1, 0, 1], 0x2100));
    const wire = (parsed as { response: Buffer }).response;
    assert.equal(wire.readUInt16BE(2), 0x8000 | 0x2000 | 0x0100 | 0x0080 | 1);
  });

  it('answers FORMERR to long labels, long names, compression pointers and names past the end (DN-08)', () => {
    assert.match(formerr(raw([64, ...Buffer.alloc(64, 0x61), 0, 0, 1, 0, 1])), /63/);
    const long: number[] = [];
    for (let i = 0; i < 5; i++) long.push(60, ...Buffer.alloc(60, 0x61));
    assert.match(formerr(raw([...long, 0, 0, 1, 0, 1])), /255/);
    assert.match(formerr(raw([0xc0, 12, 0, 1, 0, 1])), /pointer/);
    assert.match(formerr(raw([0xc0, 0x0c])), /pointer/);
    assert.match(formerr(raw([3, 0x61])), /past the end/);
    assert.match(formerr(raw([3, 0x61, 0x61, 0x61])), /past the end/);
    assert.match(formerr(raw([...API, 0, 1])), /QTYPE/);
  });

  it('answers FORMERR to name bytes other than letters, digits, - and _', () => {
    for (const bad of [0x2e, 0x00, 0x20, 0x2a, 0xc3, 0x7f]) assert.match(formerr(raw([1, bad, 0, 0, 1, 0, 1])), /byte/);
    assert.equal(query(raw([5, ...Buffer.from('_a-9Z'), 0, 0, 1, 0, 1])).name, '_a-9z');
  });

  it('accepts a 255-byte name and the root name', () => {
    const name: number[] = [];
    for (let i = 0; i < 4; i++) name.push(62, ...Buffer.alloc(62, 0x61));
    name.push(1, 0x62, 0);
    assert.equal(name.length, 255);
    assert.equal(query(raw([...name, 0, 1, 0, 1])).name.length, 253);
    assert.equal(query(raw([0, 0, 1, 0, 1])).name, '');
  });
});

describe('createQueryParser (the hot path, with its table of recent names)', () => {
  function nameOf(parse: ReturnType<typeof createQueryParser>, wire: Buffer): string {
    const parsed = parse(wire);
    assert.equal(parsed.kind, 'query');
    return (parsed as { query: DnsQuery }).query.name;
  }

  it('gives each question its own lower-cased name, with more names than the table holds and in any order', () => {
    const parse = createQueryParser();
    // More distinct names than table slots: some share a slot, and each must still come back as itself.
    const names = Array.from({ length: 10_000 }, (_, i) => `n${i}.x${i % 7}.test`);
    for (const name of names) assert.equal(nameOf(parse, buildQuery(name)), name);
    for (const name of [...names].reverse()) assert.equal(nameOf(parse, buildQuery(name.toUpperCase())), name);
    assert.equal(nameOf(parse, raw([0, 0, 1, 0, 1])), '');
    assert.equal(nameOf(parse, buildQuery('n1.x1.tesu')), 'n1.x1.tesu');
    assert.equal(nameOf(parse, buildQuery('n1.x1.tes')), 'n1.x1.tes');
  });

  it('decodes each of a few hundred names once, however their hashes fall, and reads repeats from the table', (t) => {
    const parse = createQueryParser();
    // bench/dns.sh's names: with one name per slot, half of the allowed ones shared a slot with another and were
    // decoded again on every query.
    const names = Array.from({ length: 400 }, (_, i) => (i < 200 ? `allowed-${i}.bench.test` : `refused-${i - 200}.other.test`));
    const wires = names.map((name) => buildQuery(name));
    for (const wire of wires) nameOf(parse, wire);
    const decodes = t.mock.method(Buffer.prototype, 'toString');
    for (let round = 0; round < 3; round++) {
      for (const [i, wire] of wires.entries()) assert.equal(nameOf(parse, wire), names[i]);
    }
    assert.equal(decodes.mock.callCount(), 0);
  });

  it('answers a malformed question as parseQuery does', () => {
    const parse = createQueryParser();
    const wire = raw([...API.slice(0, -1), 0xc0, 0x0c, 0, 1, 0, 1]);
    assert.deepEqual(parse(wire), parseQuery(wire));
  });
});

describe('encodeAnswer', () => {
  it('round-trips through dns-packet field by field', () => {
    const q = query(buildQuery('ApI.example.TEST', 'A', { id: 4321 }));
    const answer = encodeAnswer(q, { rcode: 'NOERROR', addresses: ['198.18.0.7'], ttlSeconds: 17 });
    const decoded = decode(answer.wire);
    assert.equal(decoded.id, 4321);
    assert.equal(decoded.type, 'response');
    assert.equal(decoded.flag_qr, true);
    assert.equal(decoded.flag_rd, true);
    assert.equal(decoded.flag_ra, true);
    assert.equal(decoded.flag_aa, false);
    assert.equal(decoded.flag_tc, false);
    assert.equal(rcodeOf(decoded), 'NOERROR');
    assert.deepEqual(decoded.questions, [{ name: 'ApI.example.TEST', type: 'A', class: 'IN' }]);
    assert.equal(decoded.answers?.length, 1);
    const [record] = decoded.answers ?? [];
    assert.deepEqual(record, { name: 'api.example.test', type: 'A', ttl: 17, class: 'IN', flush: false, data: '198.18.0.7' });
    assert.equal(decoded.additionals?.length, 0);
  });

  it('copies RD = 0, carries the RCODE, and echoes OPT under EDNS', () => {
    const q = query(buildQuery('api.example.test', 'A', { rd: false, edns: 65_535 }));
    const decoded = decode(encodeAnswer(q, { rcode: 'REFUSED' }).wire);
    assert.equal(decoded.flag_rd, false);
    assert.equal(decoded.flag_ra, true);
    assert.equal(rcodeOf(decoded), 'REFUSED');
    assert.equal(decoded.answers?.length, 0);
    const [opt] = decoded.additionals ?? [];
    assert.equal(opt?.type, 'OPT');
    assert.equal((opt as { udpPayloadSize: number }).udpPayloadSize, MAX_UDP_RESPONSE_BYTES);
  });

  it('adds a synthetic SOA for the parent zone to a negative answer, with the negative TTL as TTL and MINIMUM', () => {
    for (const [name, owner] of [['Nope.Example.test', 'example.test'], ['single', '.']] as const) {
      const q = query(buildQuery(name, 'AAAA', { id: 77 }));
      const answer = encodeAnswer(q, { rcode: 'NXDOMAIN', negativeTtlSeconds: 7 });
      assert.equal(answer.ttlOffset, -1);
      const decoded = decode(answer.wire);
      assert.equal(rcodeOf(decoded), 'NXDOMAIN');
      assert.deepEqual(decoded.questions, [{ name, type: 'AAAA', class: 'IN' }]);
      const [soa] = decoded.authorities ?? [];
      assert.equal(soa?.type, 'SOA');
      assert.equal(soa?.name, owner);
      assert.equal((soa as { ttl?: number }).ttl, 7);
      assert.deepEqual((soa as { data: unknown }).data, {
        mname: 'policy-dns.boundary.invalid', rname: 'hostmaster.boundary.invalid', serial: 1, refresh: 3_600, retry: 600, expire: 86_400, minimum: 7,
      });
      // A template reply for another asker keeps the SOA and takes the new id.
      assert.equal(decode(respondFrom(answer, query(buildQuery(name, 'AAAA', { id: 78 })), 512)).authorities?.length, 1);
    }
  });

  it('encodes AAAA answers for IPv6 text', () => {
    const q = query(buildQuery('api.example.test', 'AAAA'));
    const decoded = decode(encodeAnswer(q, { rcode: 'NOERROR', addresses: ['fd23:6f70:656e::1'], ttlSeconds: 5 }).wire);
    assert.equal(decoded.answers?.[0]?.type, 'AAAA');
  });
});

describe('respondFrom (the wire-form fast path)', () => {
  it('rewrites only the id, RD, question case and TTL of a cached answer', () => {
    const first = query(buildQuery('api.example.test', 'A', { id: 1 }));
    const template = encodeAnswer(first, { rcode: 'NOERROR', addresses: ['198.18.0.9'], ttlSeconds: 30 });
    const second = query(buildQuery('API.EXAMPLE.test', 'A', { id: 2, rd: false }));
    const decoded = decode(respondFrom(template, second, 512, 12));
    assert.equal(decoded.id, 2);
    assert.equal(decoded.flag_rd, false);
    assert.deepEqual(decoded.questions, [{ name: 'API.EXAMPLE.test', type: 'A', class: 'IN' }]);
    assert.equal((decoded.answers?.[0] as { ttl?: number } | undefined)?.ttl, 12);
    assert.equal(decoded.answers?.[0]?.name, 'api.example.test');
    assert.equal(decode(template.wire).id, 1, 'the template itself is never modified');
  });

  it('writes an id and a TTL that use every byte of their fields', () => {
    const first = query(buildQuery('api.example.test', 'A', { id: 1 }));
    const template = encodeAnswer(first, { rcode: 'NOERROR', addresses: ['198.18.0.9'], ttlSeconds: 30 });
    const decoded = decode(respondFrom(template, query(buildQuery('api.example.test', 'A', { id: 0xfedc })), 512, 0x01020304));
    assert.equal(decoded.id, 0xfedc);
    assert.equal((decoded.answers?.[0] as { ttl?: number } | undefined)?.ttl, 0x01020304);
  });

  it('truncates with TC and no records when the response does not fit (DN-09)', () => {
    const name = `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}`;
    const q = query(buildQuery(name, 'A', { id: 9 }));
    const template = encodeAnswer(q, { rcode: 'NOERROR', addresses: ['198.18.0.1'], ttlSeconds: 30 });
    assert.ok(template.wire.length > 512);
    const decoded = decode(respondFrom(template, q, responseLimit(q, 'udp')));
    assert.equal(decoded.flag_tc, true);
    assert.equal(decoded.id, 9);
    assert.equal(decoded.answers?.length, 0);
    assert.equal(decoded.questions?.[0]?.name, name);
    assert.equal(decode(respondFrom(template, q, responseLimit(q, 'tcp'))).answers?.length, 1);
  });

  it('caps the UDP size whatever EDNS advertises (DN-09)', () => {
    assert.equal(responseLimit(query(buildQuery('a.test', 'A', { edns: 65_535 })), 'udp'), MAX_UDP_RESPONSE_BYTES);
    assert.equal(responseLimit(query(buildQuery('a.test', 'A', { edns: 100 })), 'udp'), 512);
    assert.equal(responseLimit(query(buildQuery('a.test', 'A')), 'udp'), 512);
  });
});
