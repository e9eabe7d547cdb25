// RFC 9113 (HTTP/2) and RFC 7541 (HPACK) conformance of boundary's workload-facing HTTP/2 server
// (src/http2/server-session.ts and the request checks of src/http2/request-head.ts), black box: raw frames written
// into a CONNECT tunnel to a cleartext route (prior knowledge), and what comes back read as frames, the connection's
// close, and what the origin received.
//
// Why: boundary sits between a workload and the origins its policy allows, and re-encodes every request it forwards.
// A server that lets through what the RFC calls malformed can carry a request past the policy or into the next hop in
// a form the origin reads differently; one that keeps a connection the RFC says is broken keeps reading a peer whose
// state no longer matches its own (HPACK, flow control, stream ids); one that fails what the RFC says to ignore breaks
// well-behaved clients. The server is boundary's own and written to the RFC, so each test holds it to the exact rule
// it names: the error code, whether it is a stream error (RST_STREAM, the session lives on) or a connection error
// (GOAWAY, then the TCP connection closed, §5.4.1), and that nothing refused reaches the origin. Where the RFC leaves
// a choice (a stream error may always be made a connection error, §5.4.1; a few closed-stream cases have two
// grounded codes), the test says so and every allowed outcome passes; where it pins boundary's choice among allowed
// outcomes (a GOAWAY for an invalid preface, debug data, a self-dependent HEADERS as a connection error), its name
// says that too.

import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import {
  ERROR,
  errorOf,
  FLAG,
  FRAME,
  type Frame,
  type FrameReader,
  frame,
  type HpackDecoder,
  headerBlock,
  hpackDecoder,
  hpackInteger,
  PREFACE,
  ping,
  readFrames,
  requestHeaders,
  rstStream,
  settings,
  windowUpdate,
} from '../harness/h2-frames.js';
import { type H2Origin, type H2Seen, h2cOrigin } from '../harness/h2-origin.js';
import { openTunnel } from '../harness/proxy-client.js';
import { DEADLINE_MS } from '../harness/waiters.js';

/** What h2-frames.ts does not name: frame types and flags (RFC 9113 §6), error codes (§7), settings (§6.5.2). */
const PRIORITY = 0x2;
const PUSH_PROMISE = 0x5;
const PADDED = 0x8;
const PRIORITY_FLAG = 0x20;
const CODE = { ...ERROR, FLOW_CONTROL_ERROR: 0x3, STREAM_CLOSED: 0x5, FRAME_SIZE_ERROR: 0x6, COMPRESSION_ERROR: 0x9 } as const;
const SETTING = { HEADER_TABLE_SIZE: 0x1, ENABLE_PUSH: 0x2, MAX_CONCURRENT_STREAMS: 0x3, INITIAL_WINDOW_SIZE: 0x4, MAX_FRAME_SIZE: 0x5, MAX_HEADER_LIST_SIZE: 0x6 } as const;
/** RFC 9113 §6.5.2 and §6.9.2: the frame size and window every connection starts with, and the largest window. */
const MAX_FRAME_BYTES = 16_384;
const INITIAL_WINDOW = 65_535;
const MAX_WINDOW = 2 ** 31 - 1;
/** RFC 9113 §6.5.2: the largest SETTINGS_MAX_FRAME_SIZE. */
const MAX_MAX_FRAME_BYTES = 2 ** 24 - 1;
/** What boundary advertises (docs/destinations.md#http2). */
const MAX_CONCURRENT_STREAMS = 100;
const MAX_HEADER_LIST_BYTES = 16_384;
/** RFC 7541 Appendix C.4.1: "www.example.com" Huffman-coded. */
const HUFFMAN_WWW_EXAMPLE_COM = Buffer.from('f1e3c2e5f23a6ba0ab90f4ff', 'hex');

const TYPE_NAMES = ['DATA', 'HEADERS', 'PRIORITY', 'RST_STREAM', 'SETTINGS', 'PUSH_PROMISE', 'PING', 'GOAWAY', 'WINDOW_UPDATE', 'CONTINUATION'];
const CODE_NAMES = new Map<number, string>(Object.entries(CODE).map(([name, code]) => [code, name]));

function show(f: Frame): string {
  const type = TYPE_NAMES[f.type] ?? `0x${f.type.toString(16)}`;
  const code = f.type === FRAME.RST_STREAM || f.type === FRAME.GOAWAY ? ` ${CODE_NAMES.get(errorOf(f).code) ?? errorOf(f).code}` : '';
  return `${type}(${f.streamId}${code}${f.flags === 0 ? '' : ` flags 0x${f.flags.toString(16)}`})`;
}

type Field = readonly [string, string];

/** One client connection: its socket, the frames the server sent, and the HPACK state to read its field blocks. */
interface Conn {
  readonly socket: Socket;
  readonly frames: FrameReader;
  readonly hpack: HpackDecoder;
  /** Decoded field blocks by the HEADERS frame that began them; frames are decoded in order, up to `decodedUpTo`. */
  readonly blocks: Map<Frame, [string, string][]>;
  decodedUpTo: number;
  pings: number;
}

function seenFrames(c: Conn): string {
  return c.frames.frames.map(show).join(' ') || 'none';
}

/** The first frame (already read or to come) that matches; fails naming `what` after DEADLINE_MS or if the socket closed first. */
async function wait(c: Conn, match: (f: Frame) => boolean, what: string): Promise<Frame> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), DEADLINE_MS);
  });
  const found = await Promise.race([c.frames.next(match), deadline]);
  clearTimeout(timer);
  if (found === 'late') assert.fail(`no ${what} within ${DEADLINE_MS} ms; the server sent: ${seenFrames(c)}`);
  if (found === undefined) assert.fail(`the connection closed before ${what}; the server sent: ${seenFrames(c)}`);
  return found;
}

/** A PING round trip: whatever the server wrote in answer to bytes sent before it has arrived when this resolves. */
async function sync(c: Conn): Promise<void> {
  const probe = ping(0x5eed_0000 + c.pings++);
  const payload = probe.subarray(9);
  c.socket.write(probe);
  await wait(c, (f) => f.type === FRAME.PING && (f.flags & FLAG.ACK) !== 0 && f.payload.equals(payload), 'PING ACK');
}

/** The payload of a DATA or HEADERS frame without its padding (and, for HEADERS, its priority fields). */
function content(f: Frame): Buffer {
  let start = 0;
  let end = f.payload.length;
  if (f.flags & PADDED) {
    start = 1;
    end -= f.payload[0] ?? 0;
  }
  if (f.type === FRAME.HEADERS && f.flags & PRIORITY_FLAG) start += 5;
  return f.payload.subarray(start, end);
}

/** The fields of the block a HEADERS frame began, decoding every field block before it in order (HPACK is stateful). */
function fieldsOf(c: Conn, headers: Frame): [string, string][] {
  const list = c.frames.frames;
  let pending: { first: Frame; parts: Buffer[] } | undefined;
  for (let i = c.decodedUpTo; i < list.length; i++) {
    const f = list[i] as Frame;
    if (f.type === FRAME.HEADERS) pending = { first: f, parts: [content(f)] };
    else if (f.type === FRAME.CONTINUATION) pending?.parts.push(f.payload);
    if (pending !== undefined && (f.type === FRAME.HEADERS || f.type === FRAME.CONTINUATION) && f.flags & FLAG.END_HEADERS) {
      c.blocks.set(pending.first, c.hpack.decode(Buffer.concat(pending.parts)));
      pending = undefined;
    }
    // A block still open at the end of what arrived is decoded from its HEADERS on the next call.
    if (pending === undefined) c.decodedUpTo = i + 1;
  }
  const fields = c.blocks.get(headers);
  assert.ok(fields !== undefined, 'the field block is complete');
  return fields;
}

function isEnd(f: Frame, streamId: number): boolean {
  return f.streamId === streamId && (f.type === FRAME.DATA || f.type === FRAME.HEADERS) && (f.flags & FLAG.END_STREAM) !== 0;
}

/** A frame that ends the wait for an answer on `streamId` in failure: its reset, or a GOAWAY for an error. */
function isFailure(f: Frame, streamId: number): boolean {
  return (f.type === FRAME.RST_STREAM && f.streamId === streamId) || (f.type === FRAME.GOAWAY && errorOf(f).code !== CODE.NO_ERROR);
}

/** The response head on `streamId`, decoded: fails on a reset of the stream or a GOAWAY for an error. */
async function responseHead(c: Conn, streamId: number): Promise<Map<string, string>> {
  const f = await wait(c, (x) => (x.type === FRAME.HEADERS && x.streamId === streamId) || isFailure(x, streamId), `a response on stream ${streamId}`);
  assert.equal(f.type, FRAME.HEADERS, `stream ${streamId} is answered, not ${show(f)}; the server sent: ${seenFrames(c)}`);
  if ((f.flags & FLAG.END_HEADERS) === 0) await wait(c, (x) => x.type === FRAME.CONTINUATION && x.streamId === streamId && (x.flags & FLAG.END_HEADERS) !== 0, 'the CONTINUATION ending the field block');
  return new Map(fieldsOf(c, f));
}

async function status(c: Conn, streamId: number): Promise<number> {
  return Number((await responseHead(c, streamId)).get(':status'));
}

/** Octets of DATA payload (padding included: flow control counts it) on `streamId`, or on every stream. */
function flowed(c: Conn, streamId?: number): number {
  let total = 0;
  for (const f of c.frames.frames) if (f.type === FRAME.DATA && (streamId === undefined || f.streamId === streamId)) total += f.payload.length;
  return total;
}

/** The response body on `streamId` once the stream ends: fails on a reset of the stream or a GOAWAY for an error. */
async function responseBody(c: Conn, streamId: number): Promise<string> {
  const f = await wait(c, (x) => isEnd(x, streamId) || isFailure(x, streamId), `the end of stream ${streamId}`);
  assert.ok(isEnd(f, streamId), `stream ${streamId} ends, not ${show(f)}; the server sent: ${seenFrames(c)}`);
  const parts = c.frames.frames.filter((x) => x.type === FRAME.DATA && x.streamId === streamId).map(content);
  return Buffer.concat(parts).toString('utf8');
}

/** A complete answer on `streamId`: its :status and body. */
async function answer(c: Conn, streamId: number): Promise<{ status: number; body: string }> {
  const code = await status(c, streamId);
  return { status: code, body: await responseBody(c, streamId) };
}

/** The TCP connection closes (the server's FIN: the client socket, not half-open, then closes too). */
async function expectClosed(c: Conn): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const closed = await Promise.race([c.frames.closed.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), DEADLINE_MS)))]);
  clearTimeout(timer);
  assert.ok(closed, `the connection closed within ${DEADLINE_MS} ms; the server sent: ${seenFrames(c)}`);
}

/**
 * A connection error of type `code`, or of any of `codes` where the RFC allows more than one (RFC 9113 §5.4.1):
 * GOAWAY with that code, not a stream's RST_STREAM, and then the TCP connection closed ("After sending the GOAWAY
 * frame for an error condition, the endpoint MUST close the TCP connection"). Returns the GOAWAY.
 */
async function expectConnectionError(c: Conn, codes: number | readonly number[]): Promise<Frame> {
  const allowed = typeof codes === 'number' ? [codes] : codes;
  const f = await wait(c, (x) => x.type === FRAME.GOAWAY || x.type === FRAME.RST_STREAM, 'GOAWAY');
  assert.equal(f.type, FRAME.GOAWAY, `a connection error, not ${show(f)}; the server sent: ${seenFrames(c)}`);
  const name = (code: number): string | number => CODE_NAMES.get(code) ?? code;
  assert.ok(allowed.includes(errorOf(f).code), `GOAWAY ${name(errorOf(f).code)}, not ${allowed.map(name).join(' or ')}; the server sent: ${seenFrames(c)}`);
  await expectClosed(c);
  return f;
}

/** No GOAWAY and no RST_STREAM so far: nothing the client sent was taken for an error. */
function noErrors(c: Conn): void {
  assert.deepEqual(c.frames.frames.filter((f) => f.type === FRAME.GOAWAY || f.type === FRAME.RST_STREAM).map(show), [], 'no GOAWAY, no RST_STREAM');
}

/**
 * A stream error of type `code` on `streamId`: RST_STREAM with that code, or, as RFC 9113 §5.4.1 lets any stream
 * error be, a connection error of that type (GOAWAY, then the close). An answer on the stream before the reset is
 * allowed (§8.1.1: "a server MAY send an HTTP response prior to closing or resetting the stream"); an answer that
 * ends the stream with no reset by the time a PING sent after it is acknowledged is a failure.
 */
async function expectStreamOrConnectionError(c: Conn, streamId: number, code: number): Promise<'stream' | 'connection'> {
  const isError = (x: Frame): boolean => (x.type === FRAME.RST_STREAM && x.streamId === streamId) || x.type === FRAME.GOAWAY;
  let f = await wait(c, (x) => isError(x) || isEnd(x, streamId), `RST_STREAM on stream ${streamId} or GOAWAY`);
  if (!isError(f)) {
    await sync(c);
    f = c.frames.frames.find(isError) ?? assert.fail(`stream ${streamId} is refused, not answered and ended; the server sent: ${seenFrames(c)}`);
  }
  assert.equal(CODE_NAMES.get(errorOf(f).code) ?? errorOf(f).code, CODE_NAMES.get(code), `${show(f)}; the server sent: ${seenFrames(c)}`);
  if (f.type === FRAME.RST_STREAM) return 'stream';
  await expectClosed(c);
  return 'connection';
}

/** A stream error only (RST_STREAM `code` on `streamId`), the connection kept: what a malformed request must cost. */
async function expectStreamError(c: Conn, streamId: number, code: number): Promise<void> {
  assert.equal(await expectStreamOrConnectionError(c, streamId, code), 'stream', `a stream error, the session kept; the server sent: ${seenFrames(c)}`);
}

/** Window the server granted on `streamId` (0: the connection): its initial window and its WINDOW_UPDATEs so far. */
function granted(c: Conn, streamId: number): number {
  let total = INITIAL_WINDOW;
  const preface = c.frames.frames.find((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0);
  for (let at = 0; streamId !== 0 && preface !== undefined && at + 6 <= preface.payload.length; at += 6) {
    if (preface.payload.readUInt16BE(at) === SETTING.INITIAL_WINDOW_SIZE) total = preface.payload.readUInt32BE(at + 2);
  }
  for (const f of c.frames.frames) if (f.type === FRAME.WINDOW_UPDATE && f.streamId === streamId) total += f.payload.readUInt32BE(0) & MAX_WINDOW;
  return total;
}

/** Sends `body` on `streamId`, the only body of the connection, within the windows the server granted; END_STREAM last. */
async function sendBody(c: Conn, streamId: number, body: Buffer): Promise<void> {
  let sent = 0;
  while (sent < body.length) {
    const room = Math.min(granted(c, 0), granted(c, streamId)) - sent;
    if (room <= 0) {
      const updates = c.frames.frames.filter((f) => f.type === FRAME.WINDOW_UPDATE).length;
      await wait(c, () => c.frames.frames.filter((f) => f.type === FRAME.WINDOW_UPDATE).length > updates, 'a WINDOW_UPDATE for the request body');
      continue;
    }
    const chunk = body.subarray(sent, sent + Math.min(room, MAX_FRAME_BYTES));
    sent += chunk.length;
    c.socket.write(frame(FRAME.DATA, sent === body.length ? FLAG.END_STREAM : 0, streamId, chunk));
  }
}

function padded(content: Buffer, padLength: number): Buffer {
  return Buffer.concat([Buffer.from([padLength]), content, Buffer.alloc(Math.max(0, padLength))]);
}

describe('boundary HTTP/2 server on the wire (RFC 9113, RFC 7541)', () => {
  let b: RunningBoundary;
  let origin: H2Origin;
  let authority = '';
  const sockets: Socket[] = [];
  let paths = 0;

  before(async () => {
    origin = await h2cOrigin();
    authority = `plain.example.test:${origin.port}`;
    b = await startBoundary({
      names: { 'plain.example.test': ['127.0.0.1'] },
      policy: `version: 1
network_policies:
  plain:
    endpoints:
      - host: plain.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        access: full
        deny_rules:
          - { method: POST, path: "/denied/**" }
    binaries: [{ path: "/**" }]
`,
    });
  });

  after(async () => {
    for (const s of sockets) s.destroy();
    await b?.close();
    await origin?.close();
  });

  async function tunnel(): Promise<Socket> {
    const opened = await openTunnel(b.proxyPort, authority);
    assert.equal(opened.status, 200);
    sockets.push(opened.socket);
    return opened.socket;
  }

  /** A tunnel speaking HTTP/2 by prior knowledge, past the SETTINGS exchange: `entries` sent, the server's acknowledged. */
  async function session(entries: readonly (readonly [number, number])[] = []): Promise<Conn> {
    const socket = await tunnel();
    const tableSize = entries.find(([id]) => id === SETTING.HEADER_TABLE_SIZE)?.[1];
    const c: Conn = { socket, frames: readFrames(socket), hpack: hpackDecoder(tableSize), blocks: new Map(), decodedUpTo: 0, pings: 0 };
    socket.write(Buffer.concat([PREFACE, settings(entries)]));
    await wait(c, (f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0, "the server's SETTINGS");
    socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
    return c;
  }

  /** A path no other test uses: what the origin saw of it is this test's alone. */
  function path(name: string): string {
    return `/wire/${++paths}/${name}`;
  }

  /** A path whose POST the policy denies (403), used to have the server answer before the request body ended. */
  function deniedPath(name: string): string {
    return `/denied/${++paths}/${name}`;
  }

  function seen(p: string): H2Seen | undefined {
    return origin.seen.find((s) => s.path === p);
  }

  function get(streamId: number, p: string, extra: readonly Field[] = []): Buffer {
    return requestHeaders(streamId, { authority, path: p, extra });
  }

  function post(streamId: number, p: string, extra: readonly Field[] = []): Buffer {
    return requestHeaders(streamId, { authority, path: p, method: 'POST', endStream: false, extra });
  }

  function fields(p: string, extra: readonly Field[] = []): Field[] {
    return [[':method', 'GET'], [':scheme', 'http'], [':authority', authority], [':path', p], ...extra];
  }

  /** Stream 3 still gets its answer: the session outlived whatever happened on stream 1. */
  async function livesOn(c: Conn, p: string): Promise<void> {
    const a = await answer(c, 3);
    assert.equal(a.status, 200);
    assert.ok(seen(p) !== undefined, 'the follow-up request reached the origin');
  }

  describe('connection preface and SETTINGS', () => {
    it('sends SETTINGS first (MAX_CONCURRENT_STREAMS 100, MAX_HEADER_LIST_SIZE 16384, ENABLE_PUSH 0) and acknowledges the client SETTINGS with an empty ACK (§3.4, §6.5.3)', async () => {
      const c = await session([[SETTING.MAX_CONCURRENT_STREAMS, 50]]);
      const first = c.frames.frames[0];
      assert.ok(first !== undefined);
      assert.equal(first.type, FRAME.SETTINGS, 'the server preface is a SETTINGS frame');
      assert.equal(first.flags & FLAG.ACK, 0);
      assert.equal(first.streamId, 0);
      assert.equal(first.payload.length % 6, 0);
      const advertised = new Map<number, number>();
      for (let at = 0; at < first.payload.length; at += 6) advertised.set(first.payload.readUInt16BE(at), first.payload.readUInt32BE(at + 2));
      assert.equal(advertised.get(SETTING.MAX_CONCURRENT_STREAMS), MAX_CONCURRENT_STREAMS);
      assert.equal(advertised.get(SETTING.MAX_HEADER_LIST_SIZE), MAX_HEADER_LIST_BYTES);
      // §6.5.2: a server MUST NOT send ENABLE_PUSH with any value other than 0.
      assert.equal(advertised.get(SETTING.ENABLE_PUSH), 0);
      const ack = await wait(c, (f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) !== 0, 'SETTINGS ACK');
      assert.equal(ack.streamId, 0);
      assert.equal(ack.payload.length, 0, 'a SETTINGS ACK is empty');
    });

    it('an invalid client preface is a connection error PROTOCOL_ERROR: GOAWAY, the connection closed, nothing forwarded (§3.4)', async () => {
      const socket = await tunnel();
      const c: Conn = { socket, frames: readFrames(socket), hpack: hpackDecoder(), blocks: new Map(), decodedUpTo: 0, pings: 0 };
      const p = path('bad-preface');
      // The first 14 octets are the preface's, so the route takes it for HTTP/2; the rest is not.
      socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n', 'latin1'), settings(), get(1, p)]));
      // §3.4 lets the GOAWAY be omitted; boundary sends one, and its code must then be PROTOCOL_ERROR.
      const goaway = await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      assert.equal(goaway.payload.readUInt32BE(0) & MAX_WINDOW, 0, 'GOAWAY last-stream-id 0: no stream was opened');
      // Only connection frames (its preface, the GOAWAY): no stream was answered.
      assert.deepEqual(c.frames.frames.filter((f) => f.streamId !== 0).map(show), []);
      assert.equal(seen(p), undefined, 'nothing reached the origin');
    });

    it('acknowledges every SETTINGS frame and ignores an unknown setting (§6.5.2, §6.5.3)', async () => {
      const c = await session();
      const p = path('unknown-setting');
      c.socket.write(Buffer.concat([settings([[0x99, 7]]), get(1, p)]));
      assert.equal((await answer(c, 1)).status, 200);
      const acks = c.frames.frames.filter((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) !== 0);
      assert.equal(acks.length, 2, 'the preface SETTINGS and the later one are each acknowledged');
    });

    it('SETTINGS of a length not a multiple of 6 is a connection error FRAME_SIZE_ERROR (§6.5)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.SETTINGS, 0, 0, Buffer.alloc(5)));
      await expectConnectionError(c, CODE.FRAME_SIZE_ERROR);
    });

    it('SETTINGS ACK with a payload is a connection error FRAME_SIZE_ERROR (§6.5)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0, Buffer.alloc(6)));
      await expectConnectionError(c, CODE.FRAME_SIZE_ERROR);
    });

    it('SETTINGS on a stream (stream 1) is a connection error PROTOCOL_ERROR (§6.5)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.SETTINGS, 0, 1, settings([[SETTING.MAX_CONCURRENT_STREAMS, 10]]).subarray(9)));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
    });

    for (const [name, entry, code] of [
      ['SETTINGS_INITIAL_WINDOW_SIZE 2^31, past the largest window, is a connection error FLOW_CONTROL_ERROR', [SETTING.INITIAL_WINDOW_SIZE, 2 ** 31], CODE.FLOW_CONTROL_ERROR],
      ['SETTINGS_ENABLE_PUSH 2, neither 0 nor 1, is a connection error PROTOCOL_ERROR', [SETTING.ENABLE_PUSH, 2], CODE.PROTOCOL_ERROR],
      ['SETTINGS_MAX_FRAME_SIZE 100, below 16384, is a connection error PROTOCOL_ERROR', [SETTING.MAX_FRAME_SIZE, 100], CODE.PROTOCOL_ERROR],
      ['SETTINGS_MAX_FRAME_SIZE 16383, just below 16384, is a connection error PROTOCOL_ERROR', [SETTING.MAX_FRAME_SIZE, MAX_FRAME_BYTES - 1], CODE.PROTOCOL_ERROR],
      ['SETTINGS_MAX_FRAME_SIZE 2^24, past 2^24-1, is a connection error PROTOCOL_ERROR', [SETTING.MAX_FRAME_SIZE, MAX_MAX_FRAME_BYTES + 1], CODE.PROTOCOL_ERROR],
    ] as const) {
      it(`${name} (§6.5.2)`, async () => {
        const c = await session();
        const p = path('bad-setting');
        c.socket.write(Buffer.concat([settings([entry]), get(1, p)]));
        await expectConnectionError(c, code);
        assert.equal(seen(p), undefined, 'a request after the bad SETTINGS is not forwarded');
      });
    }

    it('accepts the edges of each setting: ENABLE_PUSH 1, INITIAL_WINDOW_SIZE 2^31-1, MAX_FRAME_SIZE 16384 and 2^24-1 (§6.5.2)', async () => {
      const c = await session();
      const p = path('edge-settings');
      c.socket.write(Buffer.concat([
        settings([[SETTING.ENABLE_PUSH, 1], [SETTING.INITIAL_WINDOW_SIZE, MAX_WINDOW], [SETTING.MAX_FRAME_SIZE, MAX_FRAME_BYTES]]),
        settings([[SETTING.ENABLE_PUSH, 0], [SETTING.MAX_FRAME_SIZE, MAX_MAX_FRAME_BYTES]]),
        get(1, p),
      ]));
      assert.equal((await answer(c, 1)).status, 200);
      noErrors(c);
      assert.equal(c.frames.frames.filter((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) !== 0).length, 3, 'the preface SETTINGS and both later ones acknowledged');
    });

    it("a SETTINGS_INITIAL_WINDOW_SIZE change that takes an open stream's send window past 2^31-1 is a connection error FLOW_CONTROL_ERROR (§6.9.2)", async () => {
      const c = await session();
      // Stream 1 stays open (its body never ends), so the server has not answered it: its send window is 65535 + the update.
      c.socket.write(Buffer.concat([post(1, path('settings-window-overflow')), windowUpdate(1, MAX_WINDOW - INITIAL_WINDOW)]));
      await sync(c);
      noErrors(c);
      c.socket.write(settings([[SETTING.INITIAL_WINDOW_SIZE, INITIAL_WINDOW + 1]]));
      await expectConnectionError(c, CODE.FLOW_CONTROL_ERROR);
    });
  });

  describe('connection errors (§5.4.1)', () => {
    it("a connection error's GOAWAY names the last stream the server took and says why in its debug data (§5.4.1, §6.8)", async () => {
      const c = await session();
      c.socket.write(get(1, path('before-connection-error')));
      assert.equal((await answer(c, 1)).status, 200);
      c.socket.write(frame(FRAME.PING, 0, 1, Buffer.alloc(8)));
      const goaway = await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      assert.equal(goaway.streamId, 0, 'GOAWAY is on stream 0');
      assert.equal(goaway.payload.readUInt32BE(0) & MAX_WINDOW, 1, 'last-stream-id: stream 1, the highest the client opened');
      // §6.8 makes debug data optional; boundary always gives the reason, for whoever reads the client's error.
      assert.ok(errorOf(goaway).debug.length > 0, 'GOAWAY carries debug data');
      assert.match(errorOf(goaway).debug, /^[ -~]+$/, 'the debug data is printable text');
    });
  });

  describe('PING and frame size', () => {
    it('answers PING with a PING ACK on stream 0 carrying the same 8 octets (§6.7)', async () => {
      const c = await session();
      const payload = Buffer.from('wire-png', 'latin1');
      c.socket.write(frame(FRAME.PING, 0, 0, payload));
      const pong = await wait(c, (f) => f.type === FRAME.PING, 'PING ACK');
      assert.equal(pong.flags & FLAG.ACK, FLAG.ACK);
      assert.equal(pong.streamId, 0);
      assert.deepEqual(pong.payload, payload);
    });

    it('PING of 7 octets is a connection error FRAME_SIZE_ERROR (§6.7)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.PING, 0, 0, Buffer.alloc(7)));
      await expectConnectionError(c, CODE.FRAME_SIZE_ERROR);
    });

    it('PING on a stream (stream 1) is a connection error PROTOCOL_ERROR, and is not answered (§6.7)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.PING, 0, 1, Buffer.from('stream-1', 'latin1')));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      assert.ok(!c.frames.frames.some((f) => f.type === FRAME.PING), 'no PING ACK');
    });

    it('an unsolicited PING with ACK set is no error and gets no answer: the session goes on (§6.7)', async () => {
      const c = await session();
      const payload = Buffer.from('unasked!', 'latin1');
      const p = path('after-ping-ack');
      c.socket.write(Buffer.concat([frame(FRAME.PING, FLAG.ACK, 0, payload), get(1, p)]));
      assert.equal((await answer(c, 1)).status, 200);
      // Whatever the server would have sent for the PING ACK went out before the ACK of this PING.
      await sync(c);
      noErrors(c);
      assert.ok(!c.frames.frames.some((f) => f.type === FRAME.PING && f.payload.equals(payload)), '"Receivers of a PING frame that has the ACK flag set MUST NOT respond"');
    });

    // §4.2: a frame over SETTINGS_MAX_FRAME_SIZE (16384: the server never raised it) that carries a field block or is
    // on stream 0 MUST be a connection error.
    for (const [name, make] of [
      ['PING on stream 0', (): Buffer => frame(FRAME.PING, 0, 0, Buffer.alloc(MAX_FRAME_BYTES + 1))],
      ['HEADERS', (): Buffer => frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock([...fields(path('big-headers')), ['x-pad', 'a'.repeat(MAX_FRAME_BYTES)]]))],
    ] as const) {
      it(`a ${name} frame over 16384 octets is a connection error FRAME_SIZE_ERROR (§4.2)`, async () => {
        const c = await session();
        c.socket.write(make());
        await expectConnectionError(c, CODE.FRAME_SIZE_ERROR);
      });
    }

    it('a DATA frame over 16384 octets is a FRAME_SIZE_ERROR, of its stream or the connection (§4.2)', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([post(1, path('big-data')), frame(FRAME.DATA, 0, 1, Buffer.alloc(MAX_FRAME_BYTES + 1))]));
      await expectStreamOrConnectionError(c, 1, CODE.FRAME_SIZE_ERROR);
    });
  });

  describe('stream states', () => {
    it('DATA on an idle stream is a connection error PROTOCOL_ERROR (§5.1)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.DATA, 0, 1, Buffer.from('idle')));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
    });

    it('DATA on stream 0 is a connection error PROTOCOL_ERROR (§6.1)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.DATA, 0, 0, Buffer.from('zero')));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
    });

    it('DATA after the client ended the stream, its answer pending, is a STREAM_CLOSED error of the stream or the connection (§5.1 half-closed (remote))', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([get(1, path('data-after-end')), frame(FRAME.DATA, 0, 1, Buffer.from('late'))]));
      await expectStreamOrConnectionError(c, 1, CODE.STREAM_CLOSED);
    });

    it('a second HEADERS without END_STREAM (trailers that leave the stream open) is a PROTOCOL_ERROR of the stream or the connection (§8.1)', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([post(1, path('trailers-open')), frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, headerBlock([['x-trailer', 'open']]))]));
      await expectStreamOrConnectionError(c, 1, CODE.PROTOCOL_ERROR);
    });

    it('a PRIORITY frame on an idle stream is no error and does not open the stream: lower ids still open after it (§5.1)', async () => {
      const c = await session();
      const priority = Buffer.from([0, 0, 0, 0, 15]);
      const [p1, p3, p5] = [path('priority-idle-1'), path('priority-idle-3'), path('priority-idle-5')];
      c.socket.write(Buffer.concat([frame(PRIORITY, 0, 5, priority), get(1, p1), get(3, p3), get(5, p5)]));
      for (const id of [1, 3, 5]) assert.equal((await answer(c, id)).status, 200, `stream ${id}`);
    });

    it('WINDOW_UPDATE on a half-closed (remote) stream is allowed: the answer still comes (§5.1)', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([get(1, path('window-half-closed')), windowUpdate(1, 100)]));
      assert.equal((await answer(c, 1)).status, 200);
    });

    it("a client's RST_STREAM is never answered with RST_STREAM, and other streams go on (§5.4.2)", async () => {
      const c = await session();
      const p = path('after-reset');
      c.socket.write(Buffer.concat([post(1, path('reset-by-client')), rstStream(1, CODE.CANCEL), get(3, p)]));
      await livesOn(c, p);
      assert.deepEqual(c.frames.frames.filter((f) => f.type === FRAME.RST_STREAM || f.type === FRAME.GOAWAY).map(show), []);
    });

    it('RST_STREAM of 3 octets is a connection error FRAME_SIZE_ERROR (§6.4)', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([post(1, path('short-reset')), frame(FRAME.RST_STREAM, 0, 1, Buffer.alloc(3))]));
      await expectConnectionError(c, CODE.FRAME_SIZE_ERROR);
    });

    it('PRIORITY making a stream depend on itself is a PROTOCOL_ERROR of the stream or the connection (§5.3.1)', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([post(1, path('self-dependency')), frame(PRIORITY, 0, 1, Buffer.from([0, 0, 0, 1, 15]))]));
      await expectStreamOrConnectionError(c, 1, CODE.PROTOCOL_ERROR);
    });

    it('PRIORITY of 4 octets is a FRAME_SIZE_ERROR of the stream or the connection (§6.3)', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([post(1, path('short-priority')), frame(PRIORITY, 0, 1, Buffer.alloc(4))]));
      await expectStreamOrConnectionError(c, 1, CODE.FRAME_SIZE_ERROR);
    });

    it("the client's GOAWAY (NO_ERROR, last stream 0) does not cut a stream already open: its body still goes up and its answer comes (§6.8)", async () => {
      const c = await session();
      const p = path('after-goaway');
      // A client's last-stream-id counts streams the server opened; boundary opens none (no push), so it is 0.
      c.socket.write(Buffer.concat([post(1, p), frame(FRAME.GOAWAY, 0, 0, Buffer.alloc(8)), frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('sent after GOAWAY'))]));
      const a = await answer(c, 1);
      assert.equal(a.status, 200);
      assert.equal(seen(p)?.body, 'sent after GOAWAY');
      for (const f of c.frames.frames.filter((x) => x.type === FRAME.GOAWAY)) assert.equal(errorOf(f).code, CODE.NO_ERROR, 'a graceful GOAWAY only');
    });

    for (const [name, section, id] of [
      ['an even stream id (2), which only a server may open', '§5.1.1', 2],
      ['stream 0', '§6.2', 0],
    ] as const) {
      it(`HEADERS on ${name} is a connection error PROTOCOL_ERROR, and the request is not forwarded (${section})`, async () => {
        const c = await session();
        const p = path(`headers-on-${id}`);
        c.socket.write(get(id, p));
        await expectConnectionError(c, CODE.PROTOCOL_ERROR);
        assert.equal(seen(p), undefined);
      });
    }

    it('HEADERS opening a stream with an id lower than one already opened is a connection error PROTOCOL_ERROR, and the request is not forwarded (§5.1.1)', async () => {
      const c = await session();
      const [p3, p1] = [path('opened-3'), path('then-1')];
      // Opening stream 3 closed idle stream 1 (§5.1.1): "An endpoint that receives an unexpected stream identifier MUST
      // respond with a connection error of type PROTOCOL_ERROR".
      c.socket.write(Buffer.concat([get(3, p3), get(1, p1)]));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      assert.equal(seen(p1), undefined);
    });

    it('HEADERS on a stream already answered and closed (both sides ended) is a connection error STREAM_CLOSED (§5.1 closed) or PROTOCOL_ERROR (§5.1.1: ids are not reused)', async () => {
      const c = await session();
      const again = path('reopened');
      c.socket.write(get(1, path('answered-once')));
      assert.equal((await answer(c, 1)).status, 200);
      c.socket.write(get(1, again));
      await expectConnectionError(c, [CODE.STREAM_CLOSED, CODE.PROTOCOL_ERROR]);
      assert.equal(seen(again), undefined);
    });

    it('DATA on a stream the client ended and the server answered (closed) is a connection error STREAM_CLOSED (§5.1 closed)', async () => {
      const c = await session();
      c.socket.write(get(1, path('data-after-close')));
      assert.equal((await answer(c, 1)).status, 200);
      c.socket.write(frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('too late')));
      await expectConnectionError(c, CODE.STREAM_CLOSED);
    });

    it("DATA and trailers the client had in flight on a stream the server reset (a malformed request whose body was still coming) are ignored, the trailers' HPACK still decoded: the session goes on (§5.1 closed, §5.4.2)", async () => {
      const c = await session();
      const [p, next] = [path('reset-mid-upload'), path('after-server-reset')];
      c.socket.write(Buffer.concat([post(1, p, [['X-Upper', '1']]), frame(FRAME.DATA, 0, 1, Buffer.from('first part'))]));
      await expectStreamError(c, 1, CODE.PROTOCOL_ERROR);
      // What the client sent before it saw the reset: more body, then trailers that add x-idx to the HPACK dynamic
      // table, which stream 3 references by index 62. §5.1: "An endpoint MUST ignore frames that it receives on closed
      // streams after it has sent a RST_STREAM frame"; §5.4.2: except for the connection state they change, the field
      // compression state among it.
      const trailers = Buffer.concat([Buffer.from([0x40, 5]), Buffer.from('x-idx'), Buffer.from([4]), Buffer.from('kept')]);
      c.socket.write(Buffer.concat([
        frame(FRAME.DATA, 0, 1, Buffer.from('second part')),
        frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, trailers),
        frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 3, Buffer.concat([headerBlock(fields(next)), hpackInteger(62, 7, 0x80)])),
      ]));
      await livesOn(c, next);
      assert.equal(seen(next)?.headers['x-idx'], 'kept');
      assert.deepEqual(c.frames.frames.filter((f) => f.type === FRAME.GOAWAY || f.type === FRAME.RST_STREAM).map(show), ['RST_STREAM(1 PROTOCOL_ERROR)'], 'the one RST_STREAM, no GOAWAY');
      assert.equal(seen(p), undefined, 'the malformed request never reached the origin');
    });

    it('the rest of a request body after the server answered it in full (403 from the policy, the upload still going) is no error: the session goes on (§8.1)', async () => {
      const c = await session();
      const next = path('after-early-answer');
      c.socket.write(Buffer.concat([post(1, deniedPath('upload')), frame(FRAME.DATA, 0, 1, Buffer.from('first part'))]));
      assert.equal((await answer(c, 1)).status, 403);
      // §8.1 lets the server then reset the stream NO_ERROR, or not; either way what the client still sends on it is
      // no error (on a reset stream it is ignored, §5.1 closed).
      c.socket.write(Buffer.concat([frame(FRAME.DATA, 0, 1, Buffer.from('second part')), frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from('end')), get(3, next)]));
      await livesOn(c, next);
      await sync(c);
      const errors = c.frames.frames.filter((f) => f.type === FRAME.GOAWAY || f.type === FRAME.RST_STREAM).map(show);
      assert.ok(errors.every((e) => e === 'RST_STREAM(1 NO_ERROR)'), `at most a RST_STREAM NO_ERROR after the answer, no GOAWAY: ${errors.join(' ')}`);
    });

    it("DATA on a stream after the client's own RST_STREAM is a STREAM_CLOSED error, of the stream or the connection (§5.1 closed)", async () => {
      const c = await session();
      c.socket.write(Buffer.concat([post(1, path('data-after-own-reset')), rstStream(1, CODE.CANCEL), frame(FRAME.DATA, 0, 1, Buffer.from('after reset'))]));
      await expectStreamOrConnectionError(c, 1, CODE.STREAM_CLOSED);
    });

    it('WINDOW_UPDATE, PRIORITY and RST_STREAM on a stream just closed (answered, both sides ended) are no error: the session goes on (§5.1 closed, §6.9)', async () => {
      const c = await session();
      const next = path('after-closed-frames');
      c.socket.write(get(1, path('closed-frames')));
      assert.equal((await answer(c, 1)).status, 200);
      c.socket.write(Buffer.concat([windowUpdate(1, 100), frame(PRIORITY, 0, 1, Buffer.from([0, 0, 0, 0, 15])), rstStream(1, CODE.CANCEL), get(3, next)]));
      await livesOn(c, next);
      await sync(c);
      noErrors(c);
    });

    for (const [name, section, make] of [
      ['RST_STREAM on an idle stream', '§5.1 idle, §6.4', (): Buffer => rstStream(1, CODE.CANCEL)],
      ['RST_STREAM on stream 0', '§6.4', (): Buffer => rstStream(0, CODE.CANCEL)],
      ['WINDOW_UPDATE on an idle stream', '§5.1 idle', (): Buffer => windowUpdate(1, 100)],
      ['PRIORITY on stream 0', '§6.3', (): Buffer => frame(PRIORITY, 0, 0, Buffer.from([0, 0, 0, 1, 15]))],
      ['GOAWAY on a stream (stream 1)', '§6.8', (): Buffer => frame(FRAME.GOAWAY, 0, 1, Buffer.alloc(8))],
      // A client cannot push (§8.4). The promise (of stream 2, with a request's fields) comes on an open stream, so
      // only its being a PUSH_PROMISE is wrong.
      ['PUSH_PROMISE from the client', '§6.6, §8.4', (): Buffer => Buffer.concat([post(1, path('push-on')), frame(PUSH_PROMISE, FLAG.END_HEADERS, 1, Buffer.concat([Buffer.from([0, 0, 0, 2]), headerBlock(fields(path('pushed')))]))])],
    ] as const) {
      it(`${name} is a connection error PROTOCOL_ERROR (${section})`, async () => {
        const c = await session();
        c.socket.write(make());
        await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      });
    }

    it('HEADERS whose priority makes its stream depend on itself is a PROTOCOL_ERROR (§5.3.1); boundary makes it a connection error, as §5.4.1 allows, and forwards nothing', async () => {
      const c = await session();
      const p = path('headers-self-dependency');
      // Priority fields: exclusive 0, stream dependency 1 (itself), weight 16.
      c.socket.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM | PRIORITY_FLAG, 1, Buffer.concat([Buffer.from([0, 0, 0, 1, 15]), headerBlock(fields(p))])));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      assert.equal(seen(p), undefined);
    });
  });

  describe('padding, field blocks and unknown frames', () => {
    it('removes padding: padded HEADERS and DATA are accepted and the origin sees the body without it (§6.1, §6.2)', async () => {
      const c = await session();
      const p = path('padded');
      const block = headerBlock([[':method', 'POST'], [':scheme', 'http'], [':authority', authority], [':path', p]]);
      c.socket.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS | PADDED, 1, padded(block, 7)), frame(FRAME.DATA, FLAG.END_STREAM | PADDED, 1, padded(Buffer.from('body'), 4))]));
      assert.equal((await answer(c, 1)).status, 200);
      assert.equal(seen(p)?.body, 'body');
    });

    it('padding as long as the HEADERS payload is a connection error PROTOCOL_ERROR (§6.2)', async () => {
      const c = await session();
      const block = headerBlock(fields(path('bad-headers-padding')));
      c.socket.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM | PADDED, 1, Buffer.concat([Buffer.from([block.length + 1]), block])));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
    });

    it('padding as long as the DATA payload is a connection error PROTOCOL_ERROR (§6.1)', async () => {
      const c = await session();
      // 9 octets of payload: the Pad Length octet, "body", 4 octets of padding; a Pad Length of 9 covers all of it.
      const payload = Buffer.concat([Buffer.from([9]), Buffer.from('body'), Buffer.alloc(4)]);
      c.socket.write(Buffer.concat([post(1, path('bad-data-padding')), frame(FRAME.DATA, FLAG.END_STREAM | PADDED, 1, payload)]));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
    });

    it('a frame of another type inside a field block (between HEADERS and its CONTINUATION) is a connection error PROTOCOL_ERROR (§4.3)', async () => {
      const c = await session();
      const p = path('interleaved');
      c.socket.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_STREAM, 1, headerBlock(fields(p))), ping(1), frame(FRAME.CONTINUATION, FLAG.END_HEADERS, 1, headerBlock([['x-late', '1']]))]));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      assert.equal(seen(p), undefined);
    });

    for (const [name, before] of [
      ['on a fresh connection', (): Buffer => Buffer.alloc(0)],
      ['after a complete field block', (): Buffer => get(1, path('continuation-after'))],
    ] as const) {
      it(`a CONTINUATION with no open field block (${name}) is a connection error PROTOCOL_ERROR (§6.10)`, async () => {
        const c = await session();
        c.socket.write(Buffer.concat([before(), frame(FRAME.CONTINUATION, FLAG.END_HEADERS, 1, headerBlock([['x-stray', '1']]))]));
        await expectConnectionError(c, CODE.PROTOCOL_ERROR);
      });
    }

    it('ignores frames of an unknown type, on stream 0 and on an idle stream: a request after them is answered (§4.1, §5.5)', async () => {
      const c = await session();
      c.socket.write(Buffer.concat([frame(0x20, 0, 0, Buffer.from('ext')), frame(0x20, 0xff, 1, Buffer.from('ext')), get(1, path('after-unknown-type'))]));
      assert.equal((await answer(c, 1)).status, 200);
      assert.equal(c.frames.frames.filter((f) => f.type === FRAME.GOAWAY || f.type === FRAME.RST_STREAM).length, 0);
    });

    it('ignores flags a frame type does not define (§4.1)', async () => {
      const c = await session();
      const payload = Buffer.from('flagged!', 'latin1');
      // PING with every flag but ACK; HEADERS with 0x02, 0x40 and 0x80, none of them defined for it.
      c.socket.write(Buffer.concat([frame(FRAME.PING, 0xfe, 0, payload), frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM | 0xc2, 1, headerBlock(fields(path('unknown-flags'))))]));
      const pong = await wait(c, (f) => f.type === FRAME.PING, 'PING ACK');
      assert.deepEqual(pong.payload, payload);
      assert.equal((await answer(c, 1)).status, 200);
    });
  });

  describe('HPACK (RFC 7541)', () => {
    const afterFields = (block: Buffer): ((p: string) => Buffer) => (p) => Buffer.concat([headerBlock(fields(p)), block]);
    // x-h as a literal without indexing (new name, §6.2.2) whose value is `coded`, marked Huffman (§5.2).
    const huffmanValue = (coded: Buffer): ((p: string) => Buffer) => (p) => Buffer.concat([headerBlock(fields(p)), Buffer.from([0x00, 3]), Buffer.from('x-h'), hpackInteger(coded.length, 7, 0x80), coded]);
    for (const [name, block] of [
      ['an indexed field with index 0 (§6.1)', afterFields(Buffer.from([0x80]))],
      ['an index beyond the static and dynamic tables (§2.3.3)', afterFields(hpackInteger(200, 7, 0x80))],
      ['a dynamic table size update over SETTINGS_HEADER_TABLE_SIZE, 4096 by default (§6.3)', (p: string) => Buffer.concat([hpackInteger(4_097, 5, 0x20), headerBlock(fields(p))])],
      ['a dynamic table size update after a field (§4.2)', afterFields(Buffer.from([0x20]))],
      ['Huffman padding longer than 7 bits (§5.2)', huffmanValue(Buffer.concat([HUFFMAN_WWW_EXAMPLE_COM, Buffer.from([0xff])]))],
      // "a" is 00011: padded with 000 instead of the EOS prefix 111.
      ['Huffman padding that is not the EOS prefix (§5.2)', huffmanValue(Buffer.from([0x18]))],
      ['a Huffman string holding EOS (§5.2)', huffmanValue(Buffer.from([0xff, 0xff, 0xff, 0xff]))],
    ] as const) {
      it(`a field block with ${name} is a connection error COMPRESSION_ERROR (RFC 9113 §4.3)`, async () => {
        const c = await session();
        const p = path('hpack-error');
        c.socket.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, block(p)));
        await expectConnectionError(c, CODE.COMPRESSION_ERROR);
        assert.equal(seen(p), undefined);
      });
    }

    it('keeps its dynamic table across field blocks: a field indexed in one request is referenced by index in the next (§2.3.2, §6.2.1)', async () => {
      const c = await session();
      const [p1, p3] = [path('indexed-1'), path('indexed-3')];
      const incremental = Buffer.concat([Buffer.from([0x40, 5]), Buffer.from('x-idx'), Buffer.from([10]), Buffer.from('remembered')]);
      // Index 62: the newest dynamic entry, the one field the first block added (its others are not indexed).
      c.socket.write(Buffer.concat([
        frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, Buffer.concat([headerBlock(fields(p1)), incremental])),
        frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 3, Buffer.concat([headerBlock(fields(p3)), hpackInteger(62, 7, 0x80)])),
      ]));
      assert.equal((await answer(c, 1)).status, 200);
      assert.equal((await answer(c, 3)).status, 200);
      assert.equal(seen(p1)?.headers['x-idx'], 'remembered');
      assert.equal(seen(p3)?.headers['x-idx'], 'remembered');
    });

    it('decodes a Huffman-coded literal (§5.2, Appendix C.4.1)', async () => {
      const c = await session();
      const p = path('huffman');
      c.socket.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, huffmanValue(HUFFMAN_WWW_EXAMPLE_COM)(p)));
      assert.equal((await answer(c, 1)).status, 200);
      assert.equal(seen(p)?.headers['x-h'], 'www.example.com');
    });

    it('after the client lowers SETTINGS_HEADER_TABLE_SIZE to 0, its next field block begins with a table size update to 0 (§4.2, RFC 9113 §4.3.1)', async () => {
      // session() reads the server's blocks with a table of 0 octets: a reference to a dynamic entry fails there.
      const c = await session([[SETTING.HEADER_TABLE_SIZE, 0]]);
      c.socket.write(Buffer.concat([get(1, path('table-size-0')), get(3, path('table-size-0-again'))]));
      const first = await wait(c, (f) => f.type === FRAME.HEADERS, 'a response HEADERS');
      assert.equal(content(first)[0], 0x20, 'a dynamic table size update to 0 first');
      assert.equal((await answer(c, 1)).status, 200);
      assert.equal((await answer(c, 3)).status, 200);
    });
  });

  describe('malformed requests (§8.1.1): a stream error PROTOCOL_ERROR, never forwarded, the session kept', () => {
    // Each request carries x-case: its own path, so the origin would show it even without a usable :path.
    for (const [name, tag, block] of [
      ['an uppercase field name (§8.2.1)', 'uppercase', (p: string, t: Field) => fields(p, [t, ['X-Upper', '1']])],
      ['connection: keep-alive (§8.2.2)', 'connection', (p: string, t: Field) => fields(p, [t, ['connection', 'keep-alive']])],
      ['te: gzip (§8.2.2)', 'te-gzip', (p: string, t: Field) => fields(p, [t, ['te', 'gzip']])],
      ['no :path (§8.3.1)', 'no-path', (_: string, t: Field) => [[':method', 'GET'], [':scheme', 'http'], [':authority', authority], t]],
      ['no :method (§8.3.1)', 'no-method', (p: string, t: Field) => [[':scheme', 'http'], [':authority', authority], [':path', p], t]],
      ['no :scheme (§8.3.1)', 'no-scheme', (p: string, t: Field) => [[':method', 'GET'], [':authority', authority], [':path', p], t]],
      ['a pseudo-header after a regular field (§8.3)', 'late-pseudo', (p: string, t: Field) => [[':method', 'GET'], [':scheme', 'http'], t, [':authority', authority], [':path', p]]],
      ['an unknown pseudo-header :foo (§8.3)', 'unknown-pseudo', (p: string, t: Field) => [...fields(p), [':foo', 'bar'], t]],
      ['a repeated :path (§8.3.1)', 'repeated-path', (p: string, t: Field) => [...fields(p), [':path', `${p}/again`], t]],
      ['an empty :path (§8.3.1)', 'empty-path', (_: string, t: Field) => [[':method', 'GET'], [':scheme', 'http'], [':authority', authority], [':path', ''], t]],
      ['a :path not starting with / (§8.3.1)', 'relative-path', (p: string, t: Field) => [[':method', 'GET'], [':scheme', 'http'], [':authority', authority], [':path', p.slice(1)], t]],
      ['an absolute-form :path (§8.3.1)', 'absolute-path', (p: string, t: Field) => [[':method', 'GET'], [':scheme', 'http'], [':authority', authority], [':path', `http://${authority}${p}`], t]],
      ['a :path of * on a GET, which only OPTIONS may have (§8.3.1)', 'asterisk-get', (_: string, t: Field) => [[':method', 'GET'], [':scheme', 'http'], [':authority', authority], [':path', '*'], t]],
      ['a field value holding CR LF (§8.2.1)', 'value-crlf', (p: string, t: Field) => fields(p, [t, ['x-injected', 'a\r\nx-evil: 1']])],
      ['a field value holding a lone CR (§8.2.1)', 'value-cr', (p: string, t: Field) => fields(p, [t, ['x-injected', 'a\rb']])],
      ['a field value holding a lone LF (§8.2.1)', 'value-lf', (p: string, t: Field) => fields(p, [t, ['x-injected', 'a\nb']])],
      ['a field value holding NUL (§8.2.1)', 'value-nul', (p: string, t: Field) => fields(p, [t, ['x-injected', 'a\0b']])],
      ['a pseudo-header value holding CR LF (§8.2.1)', 'path-crlf', (p: string, t: Field) => fields(`${p}\r\nx-evil: 1`, [t])],
      ['a field name holding a space (§8.2.1)', 'name-space', (p: string, t: Field) => fields(p, [t, ['x injected', '1']])],
      ['a field name holding a colon past its first octet (§8.2.1)', 'name-colon', (p: string, t: Field) => fields(p, [t, ['x:injected', '1']])],
      ['an empty field name (§8.2.1)', 'name-empty', (p: string, t: Field) => fields(p, [t, ['', '1']])],
      ['a field value with a leading space (§8.2.1)', 'value-leading-space', (p: string, t: Field) => fields(p, [t, ['x-padded', ' a']])],
      ['a field value with a trailing space (§8.2.1)', 'value-trailing-space', (p: string, t: Field) => fields(p, [t, ['x-padded', 'a ']])],
      ['a field value with a leading tab (§8.2.1)', 'value-leading-tab', (p: string, t: Field) => fields(p, [t, ['x-padded', '\ta']])],
      ['a field value with a trailing tab (§8.2.1)', 'value-trailing-tab', (p: string, t: Field) => fields(p, [t, ['x-padded', 'a\t']])],
    ] as const satisfies readonly (readonly [string, string, (p: string, t: Field) => readonly Field[]])[]) {
      it(`a request with ${name} is malformed`, async () => {
        const c = await session();
        const [p, next] = [path(tag), path(`after-${tag}`)];
        const t: Field = ['x-case', p];
        c.socket.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock(block(p, t))), get(3, next)]));
        await expectStreamError(c, 1, CODE.PROTOCOL_ERROR);
        await livesOn(c, next);
        assert.ok(!origin.seen.some((s) => s.headers['x-case'] === t[1] || s.path.startsWith(p)), 'the malformed request never reached the origin');
      });
    }

    it('takes OPTIONS with a :path of * for a well-formed request: answered, not reset (§8.3.1)', async () => {
      // The one :path not starting with /. What boundary answers it (its policy wants a path) is HTTP, not framing:
      // only a stream error would make it malformed.
      const c = await session();
      c.socket.write(requestHeaders(1, { authority, path: '*', method: 'OPTIONS' }));
      const code = await status(c, 1);
      assert.ok(code >= 200 && code <= 599, `a final status, not ${code}`);
      await responseBody(c, 1);
      noErrors(c);
    });

    it('accepts te: trailers, the one te value allowed (§8.2.2)', async () => {
      const c = await session();
      const p = path('te-trailers');
      c.socket.write(get(1, p, [['te', 'trailers']]));
      assert.equal((await answer(c, 1)).status, 200);
      assert.equal(seen(p)?.headers.te, 'trailers');
    });

    it('trailers carrying a pseudo-header make the request malformed (§8.1)', async () => {
      const c = await session();
      const next = path('after-pseudo-trailer');
      c.socket.write(Buffer.concat([post(1, path('pseudo-trailer')), frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock([[':path', '/t']])), get(3, next)]));
      await expectStreamError(c, 1, CODE.PROTOCOL_ERROR);
      await livesOn(c, next);
    });

    for (const [name, declared, sent] of [
      ['less DATA than its content-length', 10, 'fives'],
      ['more DATA than its content-length', 3, 'fives'],
      ['no DATA at all (END_STREAM on HEADERS) and a content-length of 3', 3, ''],
    ] as const) {
      it(`a request with ${name} is malformed (§8.1.1)`, async () => {
        const c = await session();
        const next = path('after-content-length');
        const head = requestHeaders(1, { authority, path: path('content-length'), method: 'POST', endStream: sent === '', extra: [['content-length', String(declared)]] });
        const body = sent === '' ? Buffer.alloc(0) : frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from(sent));
        c.socket.write(Buffer.concat([head, body, get(3, next)]));
        await expectStreamError(c, 1, CODE.PROTOCOL_ERROR);
        await livesOn(c, next);
      });
    }

    for (const [name, trailer] of [
      ['an uppercase name (§8.2.1)', ['X-Upper', '1']],
      ['a value holding CR LF (§8.2.1)', ['x-injected', 'a\r\nx-evil: 1']],
      ['a name holding a space (§8.2.1)', ['x injected', '1']],
      ['connection: close (§8.2.2)', ['connection', 'close']],
    ] as const) {
      it(`trailers carrying ${name} make the request malformed (§8.1)`, async () => {
        const c = await session();
        const [p, next] = [path('bad-trailer'), path('after-bad-trailer')];
        c.socket.write(Buffer.concat([post(1, p), frame(FRAME.DATA, 0, 1, Buffer.from('body')), frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock([trailer])), get(3, next)]));
        await expectStreamError(c, 1, CODE.PROTOCOL_ERROR);
        await livesOn(c, next);
        // The head may have gone upstream before the trailers came (bodies stream); the trailer itself never may.
        const forwarded = seen(p)?.trailers ?? {};
        assert.equal(forwarded[trailer[0].toLowerCase()], undefined, 'the offending trailer never reached the origin');
        assert.equal(forwarded['x-evil'], undefined);
      });
    }
  });

  describe('flow control (§5.2, §6.9)', () => {
    it('WINDOW_UPDATE taking a stream send window past 2^31-1 is a stream error FLOW_CONTROL_ERROR (RST_STREAM): the session goes on (§6.9.1)', async () => {
      const c = await session();
      const next = path('after-window-overflow');
      c.socket.write(Buffer.concat([post(1, path('window-overflow')), windowUpdate(1, MAX_WINDOW), get(3, next)]));
      await expectStreamError(c, 1, CODE.FLOW_CONTROL_ERROR);
      await livesOn(c, next);
    });

    it('WINDOW_UPDATE taking the connection send window past 2^31-1 is a connection error FLOW_CONTROL_ERROR (§6.9.1)', async () => {
      const c = await session();
      // 65535 + (2^31-1 - 65535) is the largest window, and no error; one more octet is past it.
      c.socket.write(windowUpdate(0, MAX_WINDOW - INITIAL_WINDOW));
      await sync(c);
      noErrors(c);
      c.socket.write(windowUpdate(0, 1));
      await expectConnectionError(c, CODE.FLOW_CONTROL_ERROR);
    });

    it('WINDOW_UPDATE of 0 on stream 0 is a connection error PROTOCOL_ERROR (§6.9)', async () => {
      const c = await session();
      c.socket.write(windowUpdate(0, 0));
      await expectConnectionError(c, CODE.PROTOCOL_ERROR);
    });

    it('WINDOW_UPDATE of 0 on an open stream is a stream error PROTOCOL_ERROR (RST_STREAM): the session goes on (§6.9)', async () => {
      const c = await session();
      const next = path('after-zero-window-update');
      c.socket.write(Buffer.concat([post(1, path('zero-window-update')), windowUpdate(1, 0), get(3, next)]));
      await expectStreamError(c, 1, CODE.PROTOCOL_ERROR);
      await livesOn(c, next);
    });

    it('WINDOW_UPDATE of 3 octets is a connection error FRAME_SIZE_ERROR (§6.9)', async () => {
      const c = await session();
      c.socket.write(frame(FRAME.WINDOW_UPDATE, 0, 0, Buffer.alloc(3)));
      await expectConnectionError(c, CODE.FRAME_SIZE_ERROR);
    });

    it('sends no more DATA on a stream than the window the client gave (SETTINGS_INITIAL_WINDOW_SIZE 16), the rest after its WINDOW_UPDATE (§6.9.1, §6.9.2)', async () => {
      const window = 16;
      const c = await session([[SETTING.INITIAL_WINDOW_SIZE, window]]);
      const p = path('stream-window');
      c.socket.write(get(1, p));
      assert.equal(await status(c, 1), 200);
      await wait(c, () => flowed(c, 1) >= window, `${window} octets of DATA`);
      // Whatever the server had ready beyond the window would have been written before the PING's ACK.
      await sync(c);
      assert.equal(flowed(c, 1), window, `no more than the window before a WINDOW_UPDATE; the server sent: ${seenFrames(c)}`);
      assert.ok(!c.frames.frames.some((f) => isEnd(f, 1)), 'the body is longer than the window');
      c.socket.write(windowUpdate(1, 1 << 20));
      const body = await responseBody(c, 1);
      assert.equal(body, JSON.stringify(seen(p)), 'the whole echo, in order');
    });

    it('sends no more than 65535 octets on the connection before a connection WINDOW_UPDATE, whatever the stream windows (§6.9.1)', async () => {
      // Streams may take 2^31-1 octets: the connection window, which SETTINGS never changes, is the only limit.
      const c = await session([[SETTING.INITIAL_WINDOW_SIZE, MAX_WINDOW]]);
      const p = path('connection-window');
      // The echo of a 65535-octet body is longer than the connection window.
      c.socket.write(post(1, p));
      await sendBody(c, 1, Buffer.alloc(INITIAL_WINDOW, 'a'));
      assert.equal(await status(c, 1), 200);
      await wait(c, () => flowed(c) >= INITIAL_WINDOW, `${INITIAL_WINDOW} octets of DATA`);
      await sync(c);
      assert.equal(flowed(c), INITIAL_WINDOW, 'no more than the connection window before a WINDOW_UPDATE');
      assert.ok(!c.frames.frames.some((f) => isEnd(f, 1)), 'the body is longer than the window');
      c.socket.write(windowUpdate(0, 1 << 20));
      const body = await responseBody(c, 1);
      assert.equal(body, JSON.stringify(seen(p)), 'the whole echo, in order');
    });
  });

  describe('requests', () => {
    it('answers a request: HEADERS with :status 200, lowercase fields and no connection-specific field, then END_STREAM (§8.1, §8.2)', async () => {
      const c = await session();
      const p = path('plain');
      c.socket.write(get(1, p));
      const head = await responseHead(c, 1);
      assert.equal(head.get(':status'), '200');
      for (const name of head.keys()) {
        assert.equal(name, name.toLowerCase(), `${name} is lowercase`);
        assert.ok(!['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'].includes(name), `${name} is not connection-specific`);
      }
      assert.equal(await responseBody(c, 1), JSON.stringify(seen(p)));
    });

    it('answers concurrent streams of one connection, each with its own answer (§5)', async () => {
      const c = await session();
      const ps = [path('concurrent-1'), path('concurrent-3'), path('concurrent-5')];
      c.socket.write(Buffer.concat(ps.map((p, i) => get(1 + 2 * i, p))));
      for (const [i, p] of ps.entries()) {
        const a = await answer(c, 1 + 2 * i);
        assert.equal(a.status, 200);
        assert.equal(a.body, JSON.stringify(seen(p)));
      }
    });

    it('forwards a request body and its trailers (HEADERS with END_STREAM after DATA), and answers (§8.1)', async () => {
      const c = await session();
      const p = path('trailers');
      c.socket.write(Buffer.concat([post(1, p), frame(FRAME.DATA, 0, 1, Buffer.from('wire body')), frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock([['x-trailer', 'sent']]))]));
      assert.equal((await answer(c, 1)).status, 200);
      assert.equal(seen(p)?.body, 'wire body');
      assert.equal(seen(p)?.trailers['x-trailer'], 'sent');
    });

    it('answers HEAD with no DATA payload (§8.1.1, RFC 9110 §9.3.2)', async () => {
      const c = await session();
      c.socket.write(requestHeaders(1, { authority, path: path('head'), method: 'HEAD' }));
      const a = await answer(c, 1);
      assert.equal(a.status, 200);
      assert.equal(flowed(c, 1), 0);
    });
  });
});
