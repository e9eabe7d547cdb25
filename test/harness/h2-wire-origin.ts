// A hostile HTTP/2 origin for the upstream client's wire tests: a plain net server on 127.0.0.1 that checks the
// client's preface, cuts what follows into frames, decodes its header blocks, and writes back whatever bytes a test
// hands it. It answers nothing by itself, not even SETTINGS: every byte the client reads is the test's choice.

import { createServer, type Socket } from 'node:net';
import { Flag, FrameReader, FrameType, frame, H2_FRAME_BYTES, H2Error, PREFACE, settingsFrame } from '../../src/http2/frames.js';
import { HpackDecoder } from '../../src/http2/hpack.js';
import { encodeHeaderBlock } from '../../src/http2/hpack-encode.js';
import { DEADLINE_MS, type WaiterList, waiterList } from './waiters.js';
import { hpackInteger } from './h2-frames.js';

/** Decoded header lists are not limited here: the harness reads what the client sends, whatever its size. */
const UNLIMITED_LIST_BYTES = 2 ** 30;

export interface WireFrame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  /** A copy: valid after the reader moved on. */
  readonly payload: Buffer;
}

/** One header block the client sent (HEADERS and its CONTINUATIONs), decoded. */
export interface WireBlock {
  readonly streamId: number;
  readonly fields: readonly string[];
  readonly endStream: boolean;
}

export type SettingsEntries = readonly (readonly [number, number])[];

export interface WireConnection {
  /** Accept order on its origin, from 0. */
  readonly index: number;
  /** The first 24 octets the client sent. */
  readonly preface: Promise<Buffer>;
  /** Every frame the client sent after its preface, in order. */
  readonly frames: WaiterList<WireFrame>;
  /** Every header block the client sent, decoded, in order. */
  readonly blocks: WaiterList<WireBlock>;
  /** What the harness itself could not read: a wrong preface, an oversized frame, a block HPACK refused. */
  readonly problems: string[];
  /** 'end' once the client half-closed (FIN), 'close' if the socket went without one. */
  readonly closing: Promise<'end' | 'close'>;
  write(...chunks: readonly Buffer[]): void;
  /** The first frame, already read or still to come, that matches; rejects after DEADLINE_MS or once the socket closed. */
  frame(match: (f: WireFrame) => boolean, what: string): Promise<WireFrame>;
  /** The first header block the client sent on `streamId` (its request head). */
  request(streamId: number): Promise<WireBlock>;
  /**
   * Waits for the client's SETTINGS, then (unless `entries` is null) sends the origin's SETTINGS and an ACK of the
   * client's, and waits for the client's ACK: from then on the client applies `entries`.
   */
  handshake(entries?: SettingsEntries | null): Promise<void>;
  /** A PING round trip: whatever the client wrote in answer to bytes sent before it has arrived when this resolves. */
  sync(): Promise<void>;
  /**
   * Writes `chunks` and a PING after them. Resolves with the first frame (of all read so far) matching `match`, or
   * undefined when the PING's ACK came first: the client took the chunks and carried on.
   */
  answer(chunks: readonly Buffer[], match: (f: WireFrame) => boolean): Promise<WireFrame | undefined>;
  /** Frames of `type` read so far, on `streamId` when given. */
  seen(type: number, streamId?: number): WireFrame[];
}

export interface WireOrigin {
  readonly port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** The `index`-th accepted connection (from 0), once it is accepted. */
  connection(index: number): Promise<WireConnection>;
  close(): Promise<void>;
}

function pingPayload(tag: string, n: number): Buffer {
  const payload = Buffer.alloc(8);
  payload.write(tag.slice(0, 4), 0, 'latin1');
  payload.writeUInt32BE(n, 4);
  return payload;
}

export function isPingAck(f: WireFrame, payload: Buffer): boolean {
  return f.type === FrameType.PING && (f.flags & Flag.ACK) !== 0 && f.payload.equals(payload);
}

function readConnection(socket: Socket, index: number): WireConnection {
  const frames = waiterList<WireFrame>();
  const blocks = waiterList<WireBlock>();
  const problems: string[] = [];
  const decoder = new HpackDecoder();
  let open: { streamId: number; endStream: boolean; parts: Buffer[] } | undefined;
  let head = Buffer.alloc(0);
  let prefaceRead = false;
  let syncs = 0;
  let resolvePreface: (b: Buffer) => void = () => undefined;
  const preface = new Promise<Buffer>((resolve) => {
    resolvePreface = resolve;
  });

  function onBlockFragment(f: WireFrame): void {
    if (f.type === FrameType.HEADERS) {
      if ((f.flags & (Flag.PADDED | Flag.PRIORITY)) !== 0) problems.push(`HEADERS on stream ${f.streamId} padded or with priority`);
      open = { streamId: f.streamId, endStream: (f.flags & Flag.END_STREAM) !== 0, parts: [] };
    } else if (open === undefined || open.streamId !== f.streamId) {
      problems.push(`CONTINUATION on stream ${f.streamId} outside a header block`);
      return;
    }
    open.parts.push(f.payload);
    if ((f.flags & Flag.END_HEADERS) === 0) return;
    const { streamId, endStream, parts } = open;
    open = undefined;
    try {
      blocks.push({ streamId, endStream, fields: decoder.decode(Buffer.concat(parts), UNLIMITED_LIST_BYTES) ?? [] });
    } catch (err) {
      problems.push(`a header block on stream ${streamId} that HPACK refused: ${String(err)}`);
    }
  }

  const reader = new FrameReader(
    H2_FRAME_BYTES,
    (type, flags, streamId, view) => {
      const f: WireFrame = { type, flags, streamId, payload: Buffer.from(view) };
      frames.push(f);
      if (type === FrameType.HEADERS || type === FrameType.CONTINUATION) onBlockFragment(f);
    },
    (length) => problems.push(`a frame of ${length} octets`),
  );

  socket.on('data', (chunk: Buffer) => {
    if (prefaceRead) return reader.push(chunk);
    head = Buffer.concat([head, chunk]);
    if (head.length < PREFACE.length) return;
    prefaceRead = true;
    const sent = head.subarray(0, PREFACE.length);
    if (!sent.equals(PREFACE)) problems.push(`a preface of ${sent.toString('latin1')}`);
    resolvePreface(sent);
    reader.push(head.subarray(PREFACE.length));
  });
  socket.on('error', () => undefined);
  const closing = new Promise<'end' | 'close'>((resolve) => {
    socket.once('end', () => resolve('end'));
    socket.once('close', () => {
      resolve('close');
      const gone = new Error(`origin connection ${index} closed`);
      frames.end(gone);
      blocks.end(gone);
    });
  });

  const connection: WireConnection = {
    index,
    preface,
    frames,
    blocks,
    problems,
    closing,
    write(...chunks) {
      if (socket.destroyed) return;
      socket.cork();
      for (const chunk of chunks) socket.write(chunk);
      socket.uncork();
    },
    frame(match, what) {
      return frames.waitFor(match, DEADLINE_MS, what, () => `frames so far: ${frames.items.map(showFrame).join(' ')}`);
    },
    request(streamId) {
      return blocks.waitFor((b) => b.streamId === streamId, DEADLINE_MS, `header block on stream ${streamId}`);
    },
    async handshake(entries = []) {
      await connection.frame((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) === 0, "the client's SETTINGS");
      if (entries === null) return;
      connection.write(settingsFrame(entries), frame(FrameType.SETTINGS, Flag.ACK, 0));
      await connection.frame((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0, "the client's SETTINGS ACK");
    },
    async sync() {
      const payload = pingPayload('sync', ++syncs);
      connection.write(frame(FrameType.PING, 0, 0, payload));
      await connection.frame((f) => isPingAck(f, payload), `the ACK of barrier PING ${syncs}`);
    },
    async answer(chunks, match) {
      const payload = pingPayload('answ', ++syncs);
      connection.write(...chunks, frame(FrameType.PING, 0, 0, payload));
      const f = await connection.frame((x) => match(x) || isPingAck(x, payload), 'an answer or the barrier PING ACK');
      return isPingAck(f, payload) ? undefined : f;
    },
    seen(type, streamId) {
      return frames.items.filter((f) => f.type === type && (streamId === undefined || f.streamId === streamId));
    },
  };
  return connection;
}

/** A cleartext origin on 127.0.0.1, port 0, for prior-knowledge HTTP/2. */
export async function wireOrigin(): Promise<WireOrigin> {
  const sockets = new Set<Socket>();
  const connections = waiterList<WireConnection>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    connections.push(readConnection(socket, connections.items.length));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('the wire origin did not bind');
  return {
    port: address.port,
    accepted: () => connections.items.length,
    connection: (index) => connections.waitFor((c) => c.index === index, DEADLINE_MS, `origin connection ${index}`),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- What an origin writes ----

/** RFC 7541 §6.1: an indexed field (2 is `:method GET`, 8 `:status 200`, 62 the newest dynamic entry). */
export function indexedField(index: number): Buffer {
  return hpackInteger(index, 7, 0x80);
}

/** RFC 7541 §6.2: a literal with a new name, no Huffman; `indexed` inserts it in the dynamic table (§6.2.1). */
export function literalField(name: string, value: string, indexed = false): Buffer {
  return Buffer.concat([
    Buffer.from([indexed ? 0x40 : 0x00]),
    hpackInteger(name.length, 7, 0),
    Buffer.from(name, 'latin1'),
    hpackInteger(value.length, 7, 0),
    Buffer.from(value, 'latin1'),
  ]);
}

/** One HEADERS frame (END_HEADERS) with `fields` as boundary's own stateless encoder writes them. */
export function headersFrame(streamId: number, fields: readonly string[], endStream = false): Buffer {
  return frame(FrameType.HEADERS, Flag.END_HEADERS | (endStream ? Flag.END_STREAM : 0), streamId, encodeHeaderBlock(fields));
}

/** A header block cut into HEADERS and CONTINUATION frames of at most `size` octets, END_HEADERS on the last. */
export function headerFrames(streamId: number, block: Buffer, endStream = false, size = H2_FRAME_BYTES): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at === 0 || at < block.length; at += size) {
    const to = Math.min(block.length, at + size);
    const flags = (to === block.length ? Flag.END_HEADERS : 0) | (at === 0 && endStream ? Flag.END_STREAM : 0);
    out.push(frame(at === 0 ? FrameType.HEADERS : FrameType.CONTINUATION, flags, streamId, block, at, to));
  }
  return out;
}

/** DATA frames of at most H2_FRAME_BYTES carrying `data`, END_STREAM on the last when asked. */
export function dataFrames(streamId: number, data: string | Buffer, endStream = false): Buffer[] {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
  const out: Buffer[] = [];
  for (let at = 0; at === 0 || at < bytes.length; at += H2_FRAME_BYTES) {
    const to = Math.min(bytes.length, at + H2_FRAME_BYTES);
    out.push(frame(FrameType.DATA, to === bytes.length && endStream ? Flag.END_STREAM : 0, streamId, bytes, at, to));
  }
  return out;
}

/** RFC 9113 §6.1: Pad Length, then `fields` (a HEADERS priority block, say), the content and `padLength` zeros. */
export function padded(content: Buffer, padLength: number, fields: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([Buffer.from([padLength]), fields, content, Buffer.alloc(padLength)]);
}

export function pingFrame(payload: Buffer, ack = false): Buffer {
  return frame(FrameType.PING, ack ? Flag.ACK : 0, 0, payload);
}

// ---- Reading what the client sent ----

/** A SETTINGS frame's entries, by identifier. */
export function settingsOf(f: WireFrame): Map<number, number> {
  const out = new Map<number, number>();
  for (let at = 0; at + 6 <= f.payload.length; at += 6) out.set(f.payload.readUInt16BE(at), f.payload.readUInt32BE(at + 2));
  return out;
}

/** The DATA payloads the client sent on `streamId`, joined. */
export function dataOn(connection: WireConnection, streamId: number): Buffer {
  return Buffer.concat(connection.seen(FrameType.DATA, streamId).map((f) => f.payload));
}

const ERROR_NAMES = new Map<number, string>(Object.entries(H2Error).map(([name, code]) => [code, name]));
const TYPE_NAMES = new Map<number, string>(Object.entries(FrameType).map(([name, type]) => [type, name]));

export function errorName(code: number): string {
  return ERROR_NAMES.get(code) ?? `0x${code.toString(16)}`;
}

/** `RST_STREAM(1, PROTOCOL_ERROR)`, `GOAWAY(0, ENHANCE_YOUR_CALM)`, `WINDOW_UPDATE(0, 100)`, `PING+ACK(...)`: for assertions. */
export function showFrame(f: WireFrame | undefined): string {
  if (f === undefined) return 'nothing before the barrier PING ACK';
  switch (f.type) {
    case FrameType.RST_STREAM:
      return `RST_STREAM(${f.streamId}, ${errorName(f.payload.readUInt32BE(0))})`;
    case FrameType.GOAWAY:
      return `GOAWAY(${f.payload.readUInt32BE(0) & 0x7fff_ffff}, ${errorName(f.payload.readUInt32BE(4))})`;
    case FrameType.WINDOW_UPDATE:
      return `WINDOW_UPDATE(${f.streamId}, ${f.payload.readUInt32BE(0) & 0x7fff_ffff})`;
    default: {
      const ack = (f.type === FrameType.SETTINGS || f.type === FrameType.PING) && (f.flags & Flag.ACK) !== 0 ? '+ACK' : '';
      return `${TYPE_NAMES.get(f.type) ?? `type ${f.type}`}${ack}(${f.streamId}, ${f.payload.length} octets)`;
    }
  }
}
