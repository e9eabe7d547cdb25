// HPACK codec (src/http2/hpack.ts): RFC 7541 Appendix C, nghttp2 (node:http2) as the peer in both directions over
// loopback with hand-written frames, one case per decoding error, and a bounded seeded fuzz with round trips.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { BoundaryError } from '../../src/shared/errors.js';
import { HPACK_MAX_INTEGER, HPACK_MAX_TABLE_BYTES, HpackDecoder } from '../../src/http2/hpack.js';
import { encodeHeaderBlock, encodeHeaderBlockAfter } from '../../src/http2/hpack-encode.js';
import { HUFFMAN_CODES, HUFFMAN_EOS } from '../../src/http2/hpack-huffman.js';
import { seeded } from '../harness/seeded.js';

const LIST_BYTES = 1 << 20;
const PROTOCOL_ERROR = { code: 'UPSTREAM_PROTOCOL_ERROR' };

function hex(text: string): Buffer {
  return Buffer.from(text.replace(/\s+/g, ''), 'hex');
}

/** §5.1, written independently of the codec: `first` holds the pattern bits above the prefix. */
function int(first: number, prefixBits: number, value: number): number[] {
  const max = 2 ** prefixBits - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let rest = value - max;
  for (; rest >= 128; rest = Math.floor(rest / 128)) out.push((rest % 128) | 0x80);
  out.push(rest);
  return out;
}

/** Appendix B, bit by bit (slow and obviously right), padded with 1s. */
function huffman(text: string): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < text.length; i++) {
    const symbol = text.charCodeAt(i);
    const code = HUFFMAN_CODES[2 * symbol]!;
    for (let bit = HUFFMAN_CODES[2 * symbol + 1]! - 1; bit >= 0; bit--) {
      acc = (acc << 1) | ((code >>> bit) & 1);
      if (++bits === 8) {
        out.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits > 0) out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) & 0xff);
  return Buffer.from(out);
}

/** A literal without indexing, literal name 'a', whose value is the given Huffman-coded octets. */
function huffmanValue(octets: Buffer): Buffer {
  return Buffer.concat([Buffer.from([0x00, 0x01, 0x61, ...int(0x80, 7, octets.length)]), octets]);
}

/** Decodes each block in turn on one decoder, checking the list and the table size after each. */
function decodeSequence(decoder: HpackDecoder, steps: readonly (readonly [string, readonly string[], number])[]): void {
  for (const [block, list, tableSize] of steps) {
    assert.deepEqual(decoder.decode(hex(block), LIST_BYTES), list);
    assert.equal(decoder.tableSize, tableSize);
  }
}

describe('HPACK Huffman table (RFC 7541 Appendix B)', () => {
  it('is canonical and complete, so each code follows from the lengths and every bit string parses', () => {
    const symbols = Array.from({ length: HUFFMAN_EOS + 1 }, (_, s) => s);
    symbols.sort((a, b) => HUFFMAN_CODES[2 * a + 1]! - HUFFMAN_CODES[2 * b + 1]! || a - b);
    let code = 0;
    let length = HUFFMAN_CODES[2 * symbols[0]! + 1]!;
    let kraft = 0;
    for (const s of symbols) {
      const bits = HUFFMAN_CODES[2 * s + 1]!;
      code *= 2 ** (bits - length);
      length = bits;
      assert.equal(HUFFMAN_CODES[2 * s]!, code, `symbol ${s}`);
      code += 1;
      kraft += 2 ** (30 - bits);
    }
    assert.equal(kraft, 2 ** 30);
    assert.equal(HUFFMAN_CODES[2 * HUFFMAN_EOS]!, 0x3fff_ffff);
  });
});

const C3 = [
  ['828684410f7777772e6578616d706c652e636f6d', [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com'], 57],
  ['828684be58086e6f2d6361636865', [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com', 'cache-control', 'no-cache'], 110],
  ['828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565', [':method', 'GET', ':scheme', 'https', ':path', '/index.html', ':authority', 'www.example.com', 'custom-key', 'custom-value'], 164],
] as const;
const C4 = [
  ['828684418cf1e3c2e5f23a6ba0ab90f4ff', C3[0][1], 57],
  ['828684be5886a8eb10649cbf', C3[1][1], 110],
  ['828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf', C3[2][1], 164],
] as const;
const DATE_21 = 'Mon, 21 Oct 2013 20:13:21 GMT';
const DATE_22 = 'Mon, 21 Oct 2013 20:13:22 GMT';
const COOKIE = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
const R1 = [':status', '302', 'cache-control', 'private', 'date', DATE_21, 'location', 'https://www.example.com'];
const R2 = [':status', '307', 'cache-control', 'private', 'date', DATE_21, 'location', 'https://www.example.com'];
const R3 = [':status', '200', 'cache-control', 'private', 'date', DATE_22, 'location', 'https://www.example.com', 'content-encoding', 'gzip', 'set-cookie', COOKIE];
const C5 = [
  ['4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d', R1, 222],
  ['4803333037c1c0bf', R2, 222],
  ['88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31', R3, 215],
] as const;
const C6 = [
  ['488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3', R1, 222],
  ['4883640effc1c0bf', R2, 222],
  ['88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007', R3, 215],
] as const;

describe('HPACK decoder: RFC 7541 Appendix C', () => {
  it('decodes the single-field examples of C.2.1 to C.2.4, inserting only the incrementally indexed one', () => {
    decodeSequence(new HpackDecoder(), [['400a637573746f6d2d6b65790d637573746f6d2d686561646572', ['custom-key', 'custom-header'], 55]]);
    decodeSequence(new HpackDecoder(), [['040c2f73616d706c652f70617468', [':path', '/sample/path'], 0]]);
    decodeSequence(new HpackDecoder(), [['100870617373776f726406736563726574', ['password', 'secret'], 0]]);
    decodeSequence(new HpackDecoder(), [['82', [':method', 'GET'], 0]]);
  });

  for (const [name, steps, last] of [
    ['C.3 (requests, no Huffman)', C3, ['custom-key', 'custom-value', 'cache-control', 'no-cache', ':authority', 'www.example.com']],
    ['C.4 (requests, Huffman)', C4, ['custom-key', 'custom-value', 'cache-control', 'no-cache', ':authority', 'www.example.com']],
  ] as const) {
    it(`decodes ${name} on one decoder and leaves the table the RFC shows`, () => {
      const decoder = new HpackDecoder();
      decodeSequence(decoder, steps);
      assert.deepEqual(decoder.decode(hex('bebfc0'), LIST_BYTES), last);
      assert.throws(() => decoder.decode(hex('c1'), LIST_BYTES), PROTOCOL_ERROR);
    });
  }

  for (const [name, steps] of [
    ['C.5 (responses, no Huffman)', C5],
    ['C.6 (responses, Huffman)', C6],
  ] as const) {
    it(`decodes ${name} with a 256-octet table, evicting as the RFC shows`, () => {
      const decoder = new HpackDecoder(256);
      decodeSequence(decoder, steps);
      assert.deepEqual(decoder.decode(hex('bebfc0'), LIST_BYTES), ['set-cookie', COOKIE, 'content-encoding', 'gzip', 'date', DATE_22]);
      assert.throws(() => decoder.decode(hex('c1'), LIST_BYTES), PROTOCOL_ERROR);
    });
  }
});

describe('HPACK encoder', () => {
  it('writes static matches as indexed fields and everything else without indexing or Huffman', () => {
    assert.equal(encodeHeaderBlock([':method', 'GET']).toString('hex'), '82');
    assert.equal(encodeHeaderBlock([':path', '/sample/path']).toString('hex'), '040c2f73616d706c652f70617468');
    assert.equal(encodeHeaderBlock(['custom-key', 'custom-header']).toString('hex'), '000a637573746f6d2d6b65790d637573746f6d2d686561646572');
    assert.equal(encodeHeaderBlock(['accept-encoding', 'gzip, deflate', ':scheme', 'https']).toString('hex'), '9087');
    assert.equal(encodeHeaderBlock(['x-api-key', 'k']).toString('hex'), '0009782d6170692d6b6579016b');
    assert.equal(encodeHeaderBlock([]).length, 0);
  });

  it('marks authorization, proxy-authorization and cookie never indexed, even with an empty value', () => {
    assert.equal(encodeHeaderBlock(['authorization', 'Bearer x']).toString('hex'), '1f0808' + Buffer.from('Bearer x').toString('hex'));
    assert.equal(encodeHeaderBlock(['authorization', '']).toString('hex'), '1f0800');
    assert.equal(encodeHeaderBlock(['proxy-authorization', 'k']).toString('hex'), '1f22016b');
    assert.equal(encodeHeaderBlock(['cookie', 'a=b']).toString('hex'), '1f1103613d62');
  });

  it('refuses a list with a name and no value', () => {
    assert.throws(() => encodeHeaderBlock(['x-a']), { code: 'UPSTREAM_REQUEST_INVALID' });
  });

  it('leaves room before the block for a frame header, and leads it with a table size update to 0 when asked', () => {
    const fields = [':method', 'GET', 'x-api-key', 'k'];
    const block = encodeHeaderBlock(fields).toString('hex');
    assert.equal(encodeHeaderBlockAfter(fields, 9, false).subarray(9).toString('hex'), block);
    assert.equal(encodeHeaderBlockAfter(fields, 9, false).length, 9 + block.length / 2);
    assert.equal(encodeHeaderBlockAfter(fields, 9, true).subarray(9).toString('hex'), `20${block}`);
    assert.equal(encodeHeaderBlockAfter([], 0, true).toString('hex'), '20');
  });
});

describe('HPACK decoder: errors and limits', () => {
  const rejects = (block: Buffer | string, decoder = new HpackDecoder()): void => {
    assert.throws(() => decoder.decode(typeof block === 'string' ? hex(block) : block, LIST_BYTES), PROTOCOL_ERROR);
  };

  it('refuses an indexed field with index 0', () => rejects('80'));

  it('checks its table size when built, and with a table of 0 inserts nothing', () => {
    for (const bad of [-1, 1.5, HPACK_MAX_INTEGER + 1, Number.NaN]) assert.throws(() => new HpackDecoder(bad), RangeError);
    const decoder = new HpackDecoder(0);
    assert.deepEqual(decoder.decode(hex('4001610162'), LIST_BYTES), ['a', 'b']);
    assert.equal(decoder.tableSize, 0);
    rejects('be', decoder);
    rejects('21', decoder);
  });

  it('refuses an index past the static and dynamic tables, in an indexed field or a name', () => {
    rejects('be');
    rejects('0f2f0161');
    const decoder = new HpackDecoder();
    decoder.decode(hex('4001610162'), LIST_BYTES);
    assert.deepEqual(decoder.decode(hex('be'), LIST_BYTES), ['a', 'b']);
    rejects('bf', decoder);
  });

  it('accepts size updates only before the first field and never above the advertised maximum', () => {
    const decoder = new HpackDecoder();
    decoder.decode(hex('4001610162'), LIST_BYTES);
    assert.deepEqual(decoder.decode(Buffer.from([0x20, ...int(0x20, 5, HPACK_MAX_TABLE_BYTES), 0x82]), LIST_BYTES), [':method', 'GET']);
    assert.equal(decoder.tableSize, 0, 'the dip to 0 evicted everything');
    rejects('8220');
    rejects(Buffer.from(int(0x20, 5, HPACK_MAX_TABLE_BYTES + 1)));
    rejects(Buffer.from(int(0x20, 5, 257)), new HpackDecoder(256));
  });

  it('evicts down to a smaller size set by an update, and inserts nothing larger than the table', () => {
    const decoder = new HpackDecoder();
    decoder.decode(hex('4001610162400163026465'), LIST_BYTES);
    assert.equal(decoder.tableSize, 34 + 35);
    assert.deepEqual(decoder.decode(Buffer.from([...int(0x20, 5, 40), 0xbe]), LIST_BYTES), ['c', 'de']);
    assert.equal(decoder.tableSize, 35);
    rejects('bf', decoder);
    decoder.decode(Buffer.from([0x40, 0x01, 0x78, ...int(0, 7, 40), ...Buffer.alloc(40, 0x79)]), LIST_BYTES);
    assert.equal(decoder.tableSize, 0);
    rejects('be', decoder);
  });

  it('refuses a block that ends inside an integer or before a string', () => {
    rejects('ff');
    rejects('ff80');
    rejects('40');
    rejects('4001');
    rejects('400161');
  });

  it('refuses integers above 2^31-1 or with too many continuation octets', () => {
    rejects(Buffer.from(int(0x80, 7, HPACK_MAX_INTEGER + 1)));
    rejects(Buffer.from(int(0x00, 4, 2 ** 40)));
    // Size updates of 31 padded with zero continuation octets: five are allowed, a sixth is not.
    assert.deepEqual(new HpackDecoder().decode(hex('3f8080808000'), LIST_BYTES), []);
    rejects('3f808080808000');
    // Five continuation octets are the most allowed: this is 2^31-1, read as a string length past the end.
    rejects(Buffer.from([0x00, 0x01, 0x61, 0x7f, 0x80, 0xff, 0xff, 0xff, 0x07]));
  });

  it('refuses a string that runs past the end of the block', () => {
    rejects('4005616263');
    rejects(Buffer.from([0x00, 0x01, 0x61, ...int(0x00, 7, HPACK_MAX_INTEGER)]));
  });

  it('decodes valid Huffman strings and refuses EOS, long padding and padding that is not all 1s', () => {
    const decoder = new HpackDecoder();
    assert.deepEqual(decoder.decode(huffmanValue(hex('1f')), LIST_BYTES), ['a', 'a']);
    assert.deepEqual(decoder.decode(huffmanValue(Buffer.alloc(0)), LIST_BYTES), ['a', '']);
    rejects(huffmanValue(hex('ffffffff')));
    rejects(huffmanValue(Buffer.concat([huffman('ab'), hex('ffffffff')])));
    rejects(huffmanValue(hex('18')));
    rejects(huffmanValue(hex('1e')));
    rejects(huffmanValue(hex('1fff')));
    rejects(huffmanValue(hex('ff')));
  });

  it('returns undefined past maxListBytes but still applies the block to the table', () => {
    const decoder = new HpackDecoder();
    const block = hex('400a637573746f6d2d6b65790c637573746f6d2d76616c756582');
    assert.equal(decoder.decode(block, 54 + 41), undefined);
    assert.equal(decoder.tableSize, 54);
    assert.deepEqual(decoder.decode(hex('be'), 54), ['custom-key', 'custom-value']);
    assert.equal(decoder.decode(hex('be'), 53), undefined);
    assert.deepEqual(decoder.decode(hex('be82'), 54 + 42), ['custom-key', 'custom-value', ':method', 'GET']);
  });
});

describe('HPACK fuzz and round trips (seeded)', () => {
  it('returns or throws UPSTREAM_PROTOCOL_ERROR for 20,000 random and mutated blocks on one decoder', () => {
    const random = seeded(7541);
    const byte = (): number => Math.floor(random() * 256);
    const seeds = [...C3, ...C4, ...C5, ...C6].map(([block]) => hex(block));
    seeds.push(huffmanValue(huffman('boundary fuzz \u00ff\u0000')), encodeHeaderBlock(['authorization', 'x', 'x-a', 'b']));
    const decoder = new HpackDecoder(256);
    let decoded = 0;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      let block: Buffer;
      if (i % 2 === 0) {
        block = Buffer.from(Array.from({ length: Math.floor(random() * 48) }, byte));
      } else {
        const seed = seeds[Math.floor(random() * seeds.length)]!;
        block = Buffer.from(seed.subarray(0, Math.ceil(random() * seed.length)));
        for (let flips = 1 + Math.floor(random() * 3); flips > 0 && block.length > 0; flips--) block[Math.floor(random() * block.length)] = byte();
      }
      try {
        const list = decoder.decode(block, Math.floor(random() * 512));
        if (list !== undefined) assert.ok(list.length % 2 === 0 && list.every((s) => typeof s === 'string'));
        decoded++;
      } catch (err) {
        assert.ok(err instanceof BoundaryError, String(err));
        assert.equal(err.code, 'UPSTREAM_PROTOCOL_ERROR');
        refused++;
      }
      assert.ok(decoder.tableSize <= 256);
    }
    assert.ok(decoded > 500 && refused > 5_000, `${decoded} decoded, ${refused} refused`);
  });

  it('round-trips random request lists through the encoder and decoder', () => {
    const random = seeded(9113);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const known = [':method', ':path', ':scheme', ':authority', 'accept-encoding', 'authorization', 'cookie', 'proxy-authorization', 'user-agent', 'www-authenticate'];
    const decoder = new HpackDecoder();
    for (let i = 0; i < 2_000; i++) {
      const flat: string[] = [];
      for (let fields = Math.floor(random() * 12); fields > 0; fields--) {
        const name = random() < 0.4 ? pick(known) : Array.from({ length: 1 + Math.floor(random() * 20) }, () => pick([...'abcdefghijklmnopqrstuvwxyz0123456789-_'])).join('');
        const length = random() < 0.1 ? 128 + Math.floor(random() * 400) : Math.floor(random() * 20);
        const value = random() < 0.2 ? pick(['GET', 'POST', '/', 'http', 'https', 'gzip, deflate', '']) : String.fromCharCode(...Array.from({ length }, () => Math.floor(random() * 256)));
        flat.push(name, value);
      }
      assert.deepEqual(decoder.decode(encodeHeaderBlock(flat), LIST_BYTES), flat);
      assert.equal(decoder.tableSize, 0, 'the encoder never inserts');
    }
  });

  it('decodes every octet and random strings Huffman-coded by an independent bit-by-bit encoder', () => {
    const random = seeded(5);
    const decoder = new HpackDecoder();
    const all = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));
    for (const text of [all, ...Array.from({ length: 2_000 }, () => String.fromCharCode(...Array.from({ length: Math.floor(random() * 64) }, () => Math.floor(random() * 256)))), 'x'.repeat(20_000)]) {
      assert.deepEqual(decoder.decode(huffmanValue(huffman(text)), LIST_BYTES), ['a', text]);
    }
  });
});

describe('HPACK against node:http2 (nghttp2) over loopback', () => {
  const SETTINGS = 0x4;
  const HEADERS = 0x1;
  const CONTINUATION = 0x9;
  const STREAMS = 16;

  function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head[3] = type;
    head[4] = flags;
    head.writeUInt32BE(streamId, 5);
    return Buffer.concat([head, payload]);
  }

  function request(port: number, i: number): string[] {
    return [':method', i % 2 === 0 ? 'GET' : 'POST', ':scheme', 'http', ':authority', `127.0.0.1:${port}`, ':path', i === 0 ? '/' : `/items/${i}?q=${'q'.repeat(i)}`,
      'accept', 'application/json', 'accept-encoding', 'gzip, deflate', 'user-agent', 'boundary-test/1', 'authorization', `Bearer token-${i}`,
      'x-boundary-request', `req-${i}`, 'cookie', `sid=${i}`];
  }

  function response(i: number): OutgoingHttpHeaders {
    return {
      ':status': i === 3 ? 404 : 200, 'content-type': 'application/json; charset=utf-8', 'cache-control': 'private, max-age=0',
      'x-origin-note': 'e'.repeat(300), 'x-per-stream': `${i}-${'v'.repeat(300)}`, 'set-cookie': ['session=abc; Path=/; HttpOnly', `pref=${i}; Max-Age=3600`],
      etag: `"${i}"`, vary: 'accept-encoding', ...(i === STREAMS - 1 ? { 'x-big': 'b'.repeat(24_000) } : {}),
    };
  }

  function expected(headers: OutgoingHttpHeaders): string[] {
    return Object.entries(headers).flatMap(([name, value]) => (Array.isArray(value) ? value.flatMap((v) => [name, String(v)]) : [name, String(value)]));
  }

  it('sends requests nghttp2 reads exactly, and decodes its responses (dynamic table, Huffman, CONTINUATION) on one decoder', async (t) => {
    const seen = new Map<number, string[]>();
    const server = createServer();
    server.on('stream', (stream: ServerHttp2Stream, _headers: IncomingHttpHeaders, _flags: number, raw: string[]) => {
      const id = stream.id ?? 0; // set once the stream is open, which it is in 'stream'
      seen.set(id, [...raw]);
      stream.respond(response((id - 1) / 2), { endStream: true });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    assert.ok(address !== null && typeof address === 'object');
    const socket = connect(address.port, '127.0.0.1');
    t.after(() => {
      socket.destroy();
      server.close();
    });
    await once(socket, 'connect');

    const blocks: { streamId: number; block: Buffer }[] = [];
    const done = new Promise<void>((resolve, reject) => {
      let pending = Buffer.alloc(0);
      let fragments: Buffer[] = [];
      socket.on('error', reject);
      socket.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 9 && pending.length >= 9 + pending.readUIntBE(0, 3)) {
          const [type, flags] = [pending[3]!, pending[4]!];
          const streamId = pending.readUInt32BE(5) & 0x7fff_ffff;
          let payload = pending.subarray(9, 9 + pending.readUIntBE(0, 3));
          pending = pending.subarray(9 + payload.length);
          if (type === SETTINGS && (flags & 0x1) === 0) socket.write(frame(SETTINGS, 0x1, 0, Buffer.alloc(0)));
          if (type !== HEADERS && type !== CONTINUATION) continue;
          if (type === HEADERS) {
            if (flags & 0x8) payload = payload.subarray(1, payload.length - payload[0]!);
            if (flags & 0x20) payload = payload.subarray(5);
            fragments = [];
          }
          fragments.push(payload);
          if (flags & 0x4) blocks.push({ streamId, block: Buffer.concat(fragments) });
          if (blocks.length === STREAMS) resolve();
        }
      });
    });
    const requests = Array.from({ length: STREAMS }, (_, i) => request(address.port, i));
    socket.write(
      Buffer.concat([
        Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
        frame(SETTINGS, 0, 0, Buffer.alloc(0)),
        ...requests.map((flat, i) => frame(HEADERS, 0x1 | 0x4, 2 * i + 1, encodeHeaderBlock(flat))),
      ]),
    );
    await done;

    for (let i = 0; i < STREAMS; i++) assert.deepEqual(seen.get(2 * i + 1), requests[i], `request on stream ${2 * i + 1}`);
    const decoder = new HpackDecoder();
    let firstList: string[] = [];
    for (const { streamId, block } of blocks) {
      const list = decoder.decode(block, 64 * 1024);
      assert.ok(list !== undefined);
      if (streamId === 1) firstList = [...list];
      const at = list.indexOf('date');
      assert.ok(at % 2 === 0 && /^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$/.test(list[at + 1] ?? ''), `date on stream ${streamId}`);
      list.splice(at, 2);
      assert.deepEqual(list, expected(response((streamId - 1) / 2)), `response on stream ${streamId}`);
    }
    // nghttp2 really used the dynamic table and Huffman, so both paths were exercised above.
    const first = blocks.find((b) => b.streamId === 1)!.block;
    assert.ok(blocks.find((b) => b.streamId === 3)!.block.length < first.length - 200, 'the next block indexes the 300-octet note');
    assert.ok(encodeHeaderBlock(firstList).length - first.length > 100, 'the first block is Huffman-coded');
    assert.ok(blocks.some((b) => b.block.length > 16_384), 'one block needed CONTINUATION');
  });
});
