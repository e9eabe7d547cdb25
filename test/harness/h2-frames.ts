// Raw HTTP/2 frames for the attack tests: a writer for the frames an attacker sends (RFC 9113 §4 and §6, HPACK
// literals without indexing per RFC 7541 §6.2.2) and a reader that collects what comes back. No node:http2: the
// point is to send what a well-behaved client never would.

import type { Socket } from 'node:net';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
export const ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2, REFUSED_STREAM: 7, CANCEL: 8, ENHANCE_YOUR_CALM: 11 } as const;

export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** RFC 7541 §5.1: an integer in a `prefixBits` prefix, `firstByte` holding the representation's bits above it. */
export function hpackInteger(value: number, prefixBits: number, firstByte: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([firstByte | value]);
  const out = [firstByte | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

/** A header block of literals without indexing, new names, no Huffman: what any HPACK decoder must accept. */
export function headerBlock(headers: readonly (readonly [string, string])[]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of headers) {
    parts.push(Buffer.from([0x00]), hpackInteger(name.length, 7, 0), Buffer.from(name, 'latin1'), hpackInteger(Buffer.byteLength(value), 7, 0), Buffer.from(value));
  }
  return Buffer.concat(parts);
}

/** A request's HEADERS frame for `path` on `authority`; `endStream` false leaves the body to come. */
export function requestHeaders(streamId: number, options: { authority: string; path: string; method?: string; scheme?: string; endStream?: boolean; extra?: readonly (readonly [string, string])[] }): Buffer {
  const block = headerBlock([
    [':method', options.method ?? 'GET'],
    [':scheme', options.scheme ?? 'http'],
    [':authority', options.authority],
    [':path', options.path],
    ...(options.extra ?? []),
  ]);
  return frame(FRAME.HEADERS, FLAG.END_HEADERS | (options.endStream === false ? 0 : FLAG.END_STREAM), streamId, block);
}

export function settings(entries: readonly (readonly [number, number])[] = []): Buffer {
  const payload = Buffer.alloc(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FRAME.SETTINGS, 0, 0, payload);
}

export function rstStream(streamId: number, code: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(FRAME.RST_STREAM, 0, streamId, payload);
}

export function ping(n: number): Buffer {
  const payload = Buffer.alloc(8);
  payload.writeUInt32BE(n, 4);
  return frame(FRAME.PING, 0, 0, payload);
}

export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly payload: Buffer;
}

export interface FrameReader {
  readonly frames: Frame[];
  /** Resolves with the first frame (already read or still to come) that matches, or undefined once the socket closed. */
  next(match: (f: Frame) => boolean): Promise<Frame | undefined>;
  readonly closed: Promise<void>;
}

/** Reads frames off `socket` (after the server preface arrives as its SETTINGS frame). */
export function readFrames(socket: Socket): FrameReader {
  const frames: Frame[] = [];
  const waiters: { match: (f: Frame) => boolean; resolve: (f: Frame | undefined) => void }[] = [];
  let buffered = Buffer.alloc(0);
  let ended = false;
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 9) {
      const length = buffered.readUIntBE(0, 3);
      if (buffered.length < 9 + length) break;
      const f: Frame = { type: buffered[3] ?? 0, flags: buffered[4] ?? 0, streamId: buffered.readUInt32BE(5) & 0x7fffffff, payload: buffered.subarray(9, 9 + length) };
      buffered = buffered.subarray(9 + length);
      frames.push(f);
      for (const w of [...waiters]) {
        if (w.match(f)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(f);
        }
      }
    }
  });
  const closed = new Promise<void>((resolve) => {
    const done = (): void => {
      ended = true;
      for (const w of waiters.splice(0)) w.resolve(undefined);
      resolve();
    };
    socket.once('close', done);
  });
  socket.on('error', () => undefined);
  // The CONNECT head was read with the socket paused: frames flow from here on.
  socket.resume();
  return {
    frames,
    closed,
    next(match) {
      const known = frames.find(match);
      if (known !== undefined || ended) return Promise.resolve(known);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

/** The error code of a GOAWAY or RST_STREAM frame, and a GOAWAY's debug data. */
export function errorOf(f: Frame): { code: number; debug: string } {
  if (f.type === FRAME.GOAWAY) return { code: f.payload.readUInt32BE(4), debug: f.payload.subarray(8).toString('latin1') };
  return { code: f.payload.readUInt32BE(0), debug: '' };
}

/** RFC 7541 Appendix A: the static table, index 1 first. */
const HPACK_STATIC: readonly (readonly [string, string])[] = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'], [':scheme', 'http'],
  [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'], [':status', '304'], [':status', '400'],
  [':status', '404'], [':status', '500'], ['accept-charset', ''], ['accept-encoding', 'gzip, deflate'], ['accept-language', ''],
  ['accept-ranges', ''], ['accept', ''], ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''],
  ['cache-control', ''], ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''], ['expect', ''],
  ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''], ['if-none-match', ''], ['if-range', ''],
  ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''], ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''],
  ['proxy-authorization', ''], ['range', ''], ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''], ['www-authenticate', ''],
];

/**
 * RFC 7541 Appendix B as the bit length of each symbol's code (0-255, then EOS): the code is canonical, so codes are
 * assigned in order of (length, symbol) and the lengths alone define it.
 */
const HUFFMAN_LENGTHS: readonly number[] = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];
const HUFFMAN_EOS = 256;

/** (length, code) → symbol, keyed `length * 2^30 + code`; built on first use. */
let huffmanSymbols: Map<number, number> | undefined;

function huffmanTable(): Map<number, number> {
  if (huffmanSymbols !== undefined) return huffmanSymbols;
  const table = new Map<number, number>();
  const order = HUFFMAN_LENGTHS.map((length, symbol) => [length, symbol] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let code = 0;
  let length = order[0]?.[0] ?? 0;
  for (const [l, symbol] of order) {
    code *= 2 ** (l - length);
    length = l;
    table.set(l * 2 ** 30 + code, symbol);
    code++;
  }
  huffmanSymbols = table;
  return table;
}

/** RFC 7541 §5.2: a Huffman string; EOS inside it, or padding longer than 7 bits or not all 1s, is a decoding error. */
export function huffmanDecode(bytes: Buffer): Buffer {
  const table = huffmanTable();
  const out: number[] = [];
  let code = 0;
  let length = 0;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      code = code * 2 + ((byte >> bit) & 1);
      length++;
      const symbol = table.get(length * 2 ** 30 + code);
      if (symbol === undefined) continue;
      if (symbol === HUFFMAN_EOS) throw new Error('HPACK: EOS in a Huffman string');
      out.push(symbol);
      code = 0;
      length = 0;
    }
  }
  if (length > 7 || code !== 2 ** length - 1) throw new Error('HPACK: bad Huffman padding');
  return Buffer.from(out);
}

export interface HpackDecoder {
  /** One complete header block (HEADERS and its CONTINUATIONs, padding and priority removed) as [name, value] pairs. */
  decode(block: Buffer): [string, string][];
}

/**
 * An HPACK decoder (RFC 7541) for reading what a server under test sends, independent of the code under test: its own
 * dynamic table, limited to `maxTableSize` (the SETTINGS_HEADER_TABLE_SIZE the reader advertised). Throws on what a
 * decoder must refuse (§2.3.3 index out of range, §4.2 a size update not at the block's start, §6.3 one over the limit).
 */
export function hpackDecoder(maxTableSize = 4_096): HpackDecoder {
  const dynamic: [string, string][] = [];
  let size = 0;
  let limit = maxTableSize;
  const evict = (): void => {
    while (size > limit) {
      const [name, value] = dynamic.pop() ?? ['', ''];
      size -= Buffer.byteLength(name) + Buffer.byteLength(value) + 32;
    }
  };
  const entry = (index: number): readonly [string, string] => {
    const found = index === 0 ? undefined : index <= HPACK_STATIC.length ? HPACK_STATIC[index - 1] : dynamic[index - HPACK_STATIC.length - 1];
    if (found === undefined) throw new Error(`HPACK: no entry at index ${index}`);
    return found;
  };
  return {
    decode(block) {
      let at = 0;
      const integer = (prefixBits: number): number => {
        const max = 2 ** prefixBits - 1;
        let value = (block[at++] ?? 0) & max;
        if (value < max) return value;
        for (let shift = 0; ; shift += 7) {
          if (at >= block.length || shift > 28) throw new Error('HPACK: bad integer');
          const byte = block[at++] ?? 0;
          value += (byte & 0x7f) * 2 ** shift;
          if ((byte & 0x80) === 0) return value;
        }
      };
      const string = (): string => {
        const huffman = ((block[at] ?? 0) & 0x80) !== 0;
        const length = integer(7);
        if (at + length > block.length) throw new Error('HPACK: string past the block');
        const raw = block.subarray(at, at + length);
        at += length;
        return (huffman ? huffmanDecode(raw) : raw).toString('latin1');
      };
      const fields: [string, string][] = [];
      while (at < block.length) {
        const first = block[at] ?? 0;
        if (first & 0x80) {
          const [name, value] = entry(integer(7));
          fields.push([name, value]);
        } else if ((first & 0xe0) === 0x20) {
          if (fields.length > 0) throw new Error('HPACK: table size update after a field');
          const next = integer(5);
          if (next > maxTableSize) throw new Error(`HPACK: table size ${next} over ${maxTableSize}`);
          limit = next;
          evict();
        } else {
          const indexing = (first & 0x40) !== 0;
          const nameIndex = integer(indexing ? 6 : 4);
          const name = nameIndex === 0 ? string() : entry(nameIndex)[0];
          const value = string();
          fields.push([name, value]);
          if (indexing) {
            dynamic.unshift([name, value]);
            size += Buffer.byteLength(name) + Buffer.byteLength(value) + 32;
            evict();
          }
        }
      }
      return fields;
    },
  };
}

export function windowUpdate(streamId: number, increment: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(increment);
  return frame(FRAME.WINDOW_UPDATE, 0, streamId, payload);
}
