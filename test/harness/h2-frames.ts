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
