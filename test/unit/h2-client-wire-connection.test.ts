// The upstream HTTP/2 client (src/http2/h2-client.ts and its session) against a hostile origin that speaks raw frames
// over loopback (test/harness/h2-wire-origin.ts), connection by connection: the errors that end a whole connection
// (GOAWAY, every stream fails, the socket ends), floods, the connection windows, and PING.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { H2_MAX_PINGS_BETWEEN_REQUESTS, H2_MAX_SETTINGS_BETWEEN_REQUESTS } from '../../src/http2/flood-guard.js';
import { Flag, FrameType, frame, frame32, H2_DEFAULT_WINDOW, H2_FRAME_BYTES, H2_MAX_31_BIT, H2Error, Setting, settingsFrame } from '../../src/http2/frames.js';
import { H2_UPSTREAM_CONNECTION_WINDOW } from '../../src/http2/flow-control.js';
import { H2_UPSTREAM_MAX_CONTINUATION_FRAMES, H2_UPSTREAM_MAX_HEADER_BLOCK_BYTES } from '../../src/http2/header-blocks.js';
import { encodeHeaderBlock } from '../../src/http2/hpack-encode.js';
import { AUTHORITY, type ConnectionErrorCase, complete, ERRORED, expectConnectionError, isError, isGoaway, OK, open, type Recorded, rstOrGoaway, send, setup } from '../harness/h2-wire-client.js';
import { dataFrames, errorName, headerFrames, headersFrame, indexedField, isPingAck, literalField, pingFrame, showFrame, type WireConnection } from '../harness/h2-wire-origin.js';

const SUITE = { timeout: 30_000 };

// ---- What the origin sends, what the client ACKed ----

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function payload8(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.write('ping', 0, 'latin1');
  b.writeUInt32BE(n, 4);
  return b;
}

function pingAcks(conn: WireConnection): number[] {
  return conn.seen(FrameType.PING).filter((f) => (f.flags & Flag.ACK) !== 0 && f.payload.subarray(0, 4).toString('latin1') === 'ping').map((f) => f.payload.readUInt32BE(4));
}

function settingsAcks(conn: WireConnection): number {
  return conn.seen(FrameType.SETTINGS).filter((f) => (f.flags & Flag.ACK) !== 0).length;
}

/** A header block of exactly `bytes` octets: `:status 200` and one literal whose value fills the rest. */
function blockOf(bytes: number): Buffer {
  const fixed = Buffer.concat([indexedField(8), literalField('x-big', '')]).length;
  // The value's length prefix grows with the value; a second pass settles it.
  let value = bytes - fixed;
  for (let i = 0; i < 2; i++) value -= Buffer.concat([indexedField(8), literalField('x-big', 'v'.repeat(value))]).length - bytes;
  const block = Buffer.concat([indexedField(8), literalField('x-big', 'v'.repeat(value))]);
  assert.equal(block.length, bytes);
  return block;
}

const LIMIT = H2_UPSTREAM_MAX_CONTINUATION_FRAMES;
const emptyContinuations = (n: number): Buffer[] => Array.from({ length: n }, () => frame(FrameType.CONTINUATION, 0, 1));
const openBlock = (): Buffer => frame(FrameType.HEADERS, 0, 1, indexedField(8));
const PUSH_BLOCK = encodeHeaderBlock([':method', 'GET', ':scheme', 'http', ':authority', AUTHORITY, ':path', '/pushed']);

// ---- 1 ----

describe('h2-client on the wire: connection errors (GOAWAY, every stream fails, the socket ends)', SUITE, () => {
  const cases: ConnectionErrorCase[] = [
    { name: 'PUSH_PROMISE', code: H2Error.PROTOCOL_ERROR, frames: () => [frame(FrameType.PUSH_PROMISE, Flag.END_HEADERS, 1, Buffer.concat([u32(2), PUSH_BLOCK]))] },
    { name: 'a first frame that is not SETTINGS', code: H2Error.PROTOCOL_ERROR, noPreface: true, frames: () => [headersFrame(1, OK, true)] },
    {
      // RFC 9113 §3.4: the server preface is a SETTINGS frame of the server's own, never an ACK of the client's. The
      // real SETTINGS after the ACK is what a client that let the ACK through would take (and ACK) without an error.
      name: 'a SETTINGS ACK as the first frame, before the server SETTINGS',
      code: H2Error.PROTOCOL_ERROR,
      noPreface: true,
      frames: () => [frame(FrameType.SETTINGS, Flag.ACK, 0), settingsFrame([])],
    },
    { name: 'SETTINGS_ENABLE_PUSH 1 from the server', code: H2Error.PROTOCOL_ERROR, noPreface: true, frames: () => [settingsFrame([[Setting.ENABLE_PUSH, 1]])] },
    { name: 'a SETTINGS frame of 5 octets', code: H2Error.FRAME_SIZE_ERROR, noPreface: true, frames: () => [frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(5))] },
    {
      name: `a frame of ${H2_FRAME_BYTES + 1} octets (after one of ${H2_FRAME_BYTES})`,
      code: H2Error.FRAME_SIZE_ERROR,
      accepted: () => [headersFrame(1, OK), ...dataFrames(1, Buffer.alloc(H2_FRAME_BYTES, 0x61))],
      frames: () => [frame(FrameType.DATA, 0, 1, Buffer.alloc(H2_FRAME_BYTES + 1, 0x62))],
    },
    { name: 'DATA on stream 0', code: H2Error.PROTOCOL_ERROR, frames: () => [frame(FrameType.DATA, 0, 0, Buffer.from('x'))] },
    { name: 'HEADERS on an even stream id', code: H2Error.PROTOCOL_ERROR, frames: () => [headersFrame(2, OK, true)] },
    // RFC 9113 §5.3.1: a stream cannot depend on itself (checked by connection.ts for both ends).
    { name: 'a PRIORITY frame whose stream depends on itself', code: H2Error.PROTOCOL_ERROR, frames: () => [frame(FrameType.PRIORITY, 0, 1, Buffer.concat([u32(1), Buffer.from([16])]))] },
    { name: 'an HPACK block that cannot decode (indexed field 0)', code: H2Error.COMPRESSION_ERROR, frames: () => [frame(FrameType.HEADERS, Flag.END_HEADERS, 1, Buffer.from([0x80]))] },
    { name: 'a frame between HEADERS and its CONTINUATION', code: H2Error.PROTOCOL_ERROR, frames: () => [openBlock(), frame(FrameType.DATA, 0, 3, Buffer.from('x'))] },
    { name: 'a CONTINUATION on another stream than its HEADERS', code: H2Error.PROTOCOL_ERROR, frames: () => [openBlock(), frame(FrameType.CONTINUATION, Flag.END_HEADERS, 3)] },
    {
      name: `HEADERS and ${LIMIT + 10} empty CONTINUATION frames (the CONTINUATION flood)`,
      code: H2Error.ENHANCE_YOUR_CALM,
      frames: () => [openBlock(), ...emptyContinuations(LIMIT + 10)],
    },
    {
      // Pins the limit: LIMIT CONTINUATIONs are within it, so what breaks the block is the DATA after them.
      name: `a DATA frame after HEADERS and ${LIMIT} empty CONTINUATION frames (within the limit)`,
      code: H2Error.PROTOCOL_ERROR,
      frames: () => [openBlock(), ...emptyContinuations(LIMIT), frame(FrameType.DATA, 0, 3, Buffer.from('x'))],
    },
    {
      name: `a header block of ${H2_UPSTREAM_MAX_HEADER_BLOCK_BYTES + 1} octets over CONTINUATIONs`,
      code: H2Error.ENHANCE_YOUR_CALM,
      frames: () => headerFrames(1, blockOf(H2_UPSTREAM_MAX_HEADER_BLOCK_BYTES + 1)),
    },
    { name: 'WINDOW_UPDATE of 0 on stream 0', code: H2Error.PROTOCOL_ERROR, frames: () => [frame32(FrameType.WINDOW_UPDATE, 0, 0)] },
    {
      name: 'a WINDOW_UPDATE taking the connection send window past 2^31-1 (after one taking it to 2^31-1)',
      code: H2Error.FLOW_CONTROL_ERROR,
      accepted: () => [frame32(FrameType.WINDOW_UPDATE, 0, H2_MAX_31_BIT - H2_DEFAULT_WINDOW)],
      frames: () => [frame32(FrameType.WINDOW_UPDATE, 0, 1)],
    },
    {
      name: 'SETTINGS_INITIAL_WINDOW_SIZE 2^31 (after 2^31-1)',
      code: H2Error.FLOW_CONTROL_ERROR,
      accepted: () => [settingsFrame([[Setting.INITIAL_WINDOW_SIZE, H2_MAX_31_BIT]])],
      frames: () => [settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 2 ** 31]])],
    },
  ];
  for (const c of cases) it(`answers ${c.name} with GOAWAY ${errorName(c.code)}`, (t) => expectConnectionError(t, c));

  it('answers SETTINGS_INITIAL_WINDOW_SIZE 2^31 with GOAWAY FLOW_CONTROL_ERROR with no stream open (RFC 9113 §6.5.2)', async (t) => {
    // With streams open, their windows overflowing would refuse it too: this pins the check on the value itself.
    const { conn, calls } = await open(t, 1);
    conn.write(...complete(1));
    await (calls[0] as Recorded).settled();
    const goaway = await conn.answer([settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 2 ** 31]])], isGoaway);
    assert.equal(showFrame(goaway), 'GOAWAY(0, FLOW_CONTROL_ERROR)');
    assert.equal(await conn.closing, 'end');
  });

  it(`takes HEADERS and ${LIMIT} CONTINUATION frames, the last with END_HEADERS, as one response head`, async (t) => {
    const { conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    const block = encodeHeaderBlock([...OK, 'x-split', 'across-frames']);
    const frames = [frame(FrameType.HEADERS, Flag.END_STREAM, 1, block, 0, 1), ...emptyContinuations(LIMIT - 1), frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, block, 1)];
    conn.write(...frames);
    await call.settled();
    assert.deepEqual(call.log(), ['head 200 complete']);
    assert.deepEqual(call.head()?.headers, ['x-split', 'across-frames']);
  });

  it(`takes a header block of exactly ${H2_UPSTREAM_MAX_HEADER_BLOCK_BYTES} octets: only its list size resets the stream`, async (t) => {
    const { conn, calls } = await open(t, 2);
    const [big, next] = calls as [Recorded, Recorded];
    const answer = await conn.answer(headerFrames(1, blockOf(H2_UPSTREAM_MAX_HEADER_BLOCK_BYTES)), rstOrGoaway(1));
    assert.equal(showFrame(answer), 'RST_STREAM(1, PROTOCOL_ERROR)');
    assert.deepEqual(big.log(), [ERRORED]);
    conn.write(...complete(3));
    await next.settled();
    assert.deepEqual(next.log(), ['head 200', 'data ok', 'end']);
  });
});

// ---- 2 ----

describe('h2-client on the wire: PING and SETTINGS floods, and the connection receive window', SUITE, () => {
  it(`ACKs ${H2_MAX_PINGS_BETWEEN_REQUESTS} PINGs with their payloads, then answers PING ${H2_MAX_PINGS_BETWEEN_REQUESTS + 1} with GOAWAY ENHANCE_YOUR_CALM`, async (t) => {
    const { conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    const count = H2_MAX_PINGS_BETWEEN_REQUESTS + 1;
    conn.write(...Array.from({ length: count }, (_, i) => pingFrame(payload8(i + 1))));
    const goaway = await conn.frame(isGoaway, 'GOAWAY');
    assert.equal(showFrame(goaway), 'GOAWAY(0, ENHANCE_YOUR_CALM)');
    assert.deepEqual(pingAcks(conn), Array.from({ length: H2_MAX_PINGS_BETWEEN_REQUESTS }, (_, i) => i + 1));
    const lastAck = conn.frames.items.findIndex((f) => isPingAck(f, payload8(H2_MAX_PINGS_BETWEEN_REQUESTS)));
    assert.ok(lastAck < conn.frames.items.indexOf(goaway));
    assert.equal((await call.settled()).kind, 'error');
    assert.deepEqual(call.log(), [ERRORED]);
    assert.equal(await conn.closing, 'end');
  });

  it('earns the PING budget back with each response head', async (t) => {
    const { conn, calls } = await open(t, 2);
    const [first] = calls as [Recorded, Recorded];
    const pings = (from: number): Buffer[] => Array.from({ length: H2_MAX_PINGS_BETWEEN_REQUESTS }, (_, i) => pingFrame(payload8(from + i)));
    conn.write(...pings(1), ...complete(1), ...pings(1 + H2_MAX_PINGS_BETWEEN_REQUESTS));
    await conn.frame((f) => isPingAck(f, payload8(2 * H2_MAX_PINGS_BETWEEN_REQUESTS)), 'the ACK of the last PING');
    assert.deepEqual(first.log(), ['head 200', 'data ok', 'end']);
    assert.equal(pingAcks(conn).length, 2 * H2_MAX_PINGS_BETWEEN_REQUESTS);
    assert.deepEqual(conn.seen(FrameType.GOAWAY).map(showFrame), []);
  });

  it(`ACKs the first SETTINGS and ${H2_MAX_SETTINGS_BETWEEN_REQUESTS} more, then answers the next with GOAWAY ENHANCE_YOUR_CALM`, async (t) => {
    // The first SETTINGS is the server preface: flood-guard only counts those after it (h2-session onSettings).
    const { conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    assert.equal(settingsAcks(conn), 1);
    conn.write(...Array.from({ length: H2_MAX_SETTINGS_BETWEEN_REQUESTS + 1 }, () => settingsFrame([])));
    const goaway = await conn.frame(isGoaway, 'GOAWAY');
    assert.equal(showFrame(goaway), 'GOAWAY(0, ENHANCE_YOUR_CALM)');
    assert.equal(settingsAcks(conn), 1 + H2_MAX_SETTINGS_BETWEEN_REQUESTS);
    assert.deepEqual(call.log(), [ERRORED]);
    assert.equal(await conn.closing, 'end');
  });

  it(`answers DATA past the ${H2_UPSTREAM_CONNECTION_WINDOW}-octet connection window (none of it consumed) with GOAWAY FLOW_CONTROL_ERROR`, async (t) => {
    // Every stream stays within its own window: paused, none of them hands data on, so none frees connection window
    // either (RFC 9113 §6.9.1: WINDOW_UPDATE as the receiver consumes). One stream more than the window holds.
    const streams = Math.floor(H2_UPSTREAM_CONNECTION_WINDOW / H2_DEFAULT_WINDOW) + 1;
    const { origin, client } = await setup(t);
    const calls = Array.from({ length: streams }, (_, i) => send(client, `/held${i}`));
    for (const call of calls) call.exchange.pause();
    const conn = await origin.connection(0);
    await conn.handshake([[Setting.MAX_CONCURRENT_STREAMS, streams]]);
    await conn.request(2 * streams - 1);
    const full = Buffer.alloc(H2_DEFAULT_WINDOW, 0x77);
    const frames = calls.flatMap((_, i) => [headersFrame(2 * i + 1, OK), ...dataFrames(2 * i + 1, full)]);
    const goaway = await conn.answer(frames, isGoaway);
    const grants = conn.seen(FrameType.WINDOW_UPDATE, 0).map(showFrame);
    assert.equal(showFrame(goaway), 'GOAWAY(0, FLOW_CONTROL_ERROR)', `connection WINDOW_UPDATEs sent: ${grants.join(' ')}`);
    assert.equal(grants.length, 1, 'no connection window granted beyond the initial one while nothing was consumed');
    for (const call of calls) assert.equal((await call.settled()).kind, 'error');
  });
});

// ---- 3 ----

describe('h2-client on the wire: PING', SUITE, () => {
  it('answers a PING with a PING ACK carrying the same 8 octets, and a PING ACK with nothing', async (t) => {
    const { conn } = await open(t, 1);
    const payload = Buffer.from([0x00, 0x01, 0xfe, 0xff, 0x62, 0x6f, 0x75, 0x6e]);
    conn.write(pingFrame(payload));
    const ack = await conn.frame((f) => f.type === FrameType.PING, 'a PING from the client');
    assert.equal(ack.flags, Flag.ACK);
    assert.equal(ack.streamId, 0);
    assert.deepEqual(ack.payload, payload);
    const unsolicited = Buffer.from('unasked!', 'latin1');
    conn.write(pingFrame(unsolicited, true));
    await conn.sync();
    assert.equal(conn.frames.items.filter((f) => f.type === FrameType.PING && f.payload.equals(unsolicited)).length, 0);
    assert.deepEqual(conn.frames.items.filter(isError).map(showFrame), []);
  });
});
