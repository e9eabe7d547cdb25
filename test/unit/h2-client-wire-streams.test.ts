// The upstream HTTP/2 client (src/http2/h2-client.ts and its session) against a hostile origin that speaks raw frames
// over loopback (test/harness/h2-wire-origin.ts), stream by stream: for each RFC 9113 rule, what the handler got, what
// the client wrote back on the wire, and whether the other streams of the connection lived on.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { Flag, FrameType, frame, frame32, goawayFrame, H2_DEFAULT_WINDOW, H2_FRAME_BYTES, H2Error, PREFACE, Setting, settingsFrame } from '../../src/http2/frames.js';
import { type H2Client, H2_UPSTREAM_REFUSED_RETRIES } from '../../src/http2/h2-client.js';
import { H2_UPSTREAM_MAX_HEADER_LIST_BYTES } from '../../src/http2/header-blocks.js';
import { encodeHeaderBlock } from '../../src/http2/hpack-encode.js';
import { UpstreamResetError } from '../../src/http2/upstream-stream.js';
import {
  AUTHORITY,
  type ConnectionErrorCase,
  complete,
  ERRORED,
  expectConnectionError,
  expectStreamError,
  isError,
  OK,
  open,
  type Recorded,
  rstOrGoaway,
  type StreamErrorCase,
  send,
  setup,
} from '../harness/h2-wire-client.js';
import {
  dataFrames,
  dataOn,
  errorName,
  headerFrames,
  headersFrame,
  indexedField,
  literalField,
  padded,
  type SettingsEntries,
  settingsOf,
  showFrame,
  type WireConnection,
  type WireFrame,
} from '../harness/h2-wire-origin.js';
import { DEADLINE_MS } from '../harness/waiters.js';

const SUITE = { timeout: 30_000 };

// ---- 1 ----

describe('h2-client on the wire: preface, SETTINGS and a plain response', SUITE, () => {
  it('opens with the preface and SETTINGS (ENABLE_PUSH 0, MAX_HEADER_LIST_SIZE 65536), ACKs the origin SETTINGS, reads HEADERS and two DATA frames', async (t) => {
    const { origin, client } = await setup(t);
    const call = send(client, '/a?b=1', { headers: ['host', AUTHORITY, 'accept', '*/*'] });
    const conn = await origin.connection(0);
    assert.deepEqual(await conn.preface, PREFACE);
    const settings = await conn.frame((f) => f.type === FrameType.SETTINGS, "the client's SETTINGS");
    assert.equal(conn.frames.items[0], settings, 'SETTINGS is the first frame after the preface');
    assert.equal(settings.flags, 0);
    assert.equal(settings.streamId, 0);
    const values = settingsOf(settings);
    assert.equal(values.get(Setting.ENABLE_PUSH), 0);
    assert.equal(values.get(Setting.MAX_HEADER_LIST_SIZE), 65_536);
    assert.equal(H2_UPSTREAM_MAX_HEADER_LIST_BYTES, 65_536);

    conn.write(settingsFrame([[Setting.MAX_CONCURRENT_STREAMS, 100]]));
    const ack = await conn.frame((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0, 'SETTINGS ACK');
    assert.equal(ack.streamId, 0);
    assert.equal(ack.payload.length, 0);

    const request = await conn.request(1);
    assert.deepEqual(request.fields, [':method', 'GET', ':scheme', 'http', ':authority', AUTHORITY, ':path', '/a?b=1', 'accept', '*/*']);
    assert.equal(request.endStream, true);

    conn.write(headersFrame(1, [...OK, 'content-type', 'text/plain', 'x-origin', '1']), ...dataFrames(1, 'hello '), ...dataFrames(1, 'world', true));
    await call.settled();
    assert.deepEqual(call.log(), ['head 200', 'data hello ', 'data world', 'end']);
    assert.deepEqual(call.head()?.headers, ['content-type', 'text/plain', 'x-origin', '1']);
    assert.deepEqual(conn.problems, []);
  });
});

// ---- 2 ----

describe('h2-client on the wire: response trailers', SUITE, () => {
  it('hands trailers that end the stream to onTrailers, then onEnd', async (t) => {
    const { conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    conn.write(headersFrame(1, OK), ...dataFrames(1, 'x'), headersFrame(1, ['grpc-status', '0', 'grpc-message', 'fine'], true));
    await call.settled();
    assert.deepEqual(call.log(), ['head 200', 'data x', 'trailers grpc-status=0 grpc-message=fine', 'end']);
  });

  const cases: StreamErrorCase[] = [
    {
      name: 'trailers without END_STREAM',
      frames: (id) => [headersFrame(id, OK), ...dataFrames(id, 'x'), headersFrame(id, ['grpc-status', '0'])],
      log: ['head 200', 'data x', ERRORED],
    },
    {
      name: 'a pseudo-header in trailers',
      frames: (id) => [headersFrame(id, OK), ...dataFrames(id, 'x'), headersFrame(id, [':status', '200', 'grpc-status', '0'], true)],
      log: ['head 200', 'data x', ERRORED],
    },
  ];
  for (const c of cases) it(`resets the stream on ${c.name} (PROTOCOL_ERROR); the other stream completes`, (t) => expectStreamError(t, c));
});

// ---- 3 ----

describe('h2-client on the wire: malformed response heads are stream errors', SUITE, () => {
  const head = (fields: readonly string[]) => (id: number) => [headersFrame(id, fields)];
  const cases: StreamErrorCase[] = [
    { name: 'a head without :status', frames: head(['content-type', 'text/plain']), log: [ERRORED] },
    { name: ":status '20'", frames: head([':status', '20']), log: [ERRORED] },
    { name: ':status after a regular field', frames: head(['x-a', '1', ':status', '200']), log: [ERRORED] },
    { name: ':path in a response', frames: head([...OK, ':path', '/']), log: [ERRORED] },
    { name: 'an upper-case field name', frames: head([...OK, 'Content-Type', 'text/plain']), log: [ERRORED] },
    { name: 'a value with CR LF (response splitting)', frames: head([...OK, 'x-split', 'a\r\nset-cookie: evil=1']), log: [ERRORED] },
    { name: 'a value with a leading space', frames: head([...OK, 'x-pad', ' v']), log: [ERRORED] },
    { name: 'connection: close', frames: head([...OK, 'connection', 'close']), log: [ERRORED] },
    { name: 'transfer-encoding: chunked', frames: head([...OK, 'transfer-encoding', 'chunked']), log: [ERRORED] },
    { name: 'two different content-length values', frames: head([...OK, 'content-length', '5', 'content-length', '6']), log: [ERRORED] },
    {
      name: 'content-length 5 with 3 DATA octets and END_STREAM',
      frames: (id) => [headersFrame(id, [...OK, 'content-length', '5']), ...dataFrames(id, 'abc', true)],
      log: ['head 200', ERRORED],
    },
    {
      name: 'content-length 1 with 2 DATA octets',
      frames: (id) => [headersFrame(id, [...OK, 'content-length', '1']), ...dataFrames(id, 'ab')],
      log: ['head 200', ERRORED],
    },
    { name: 'a 101 status', frames: head([':status', '101']), log: [ERRORED] },
  ];
  for (const c of cases) it(`resets the stream on ${c.name} (PROTOCOL_ERROR); the other stream completes`, (t) => expectStreamError(t, c));

  it('drops a 103 informational head: only the 200 that follows reaches onHead', async (t) => {
    const { conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    conn.write(headersFrame(1, [':status', '103', 'link', '</style.css>; rel=preload']), headersFrame(1, [...OK, 'x-final', '1']), ...dataFrames(1, 'ok', true));
    await call.settled();
    assert.deepEqual(call.log(), ['head 200', 'data ok', 'end']);
    assert.deepEqual(call.head()?.headers, ['x-final', '1']);
    await conn.sync();
    assert.deepEqual(conn.frames.items.filter(isError).map(showFrame), []);
  });
});

// ---- 4 ----

describe('h2-client on the wire: header list size', SUITE, () => {
  // RFC 7541 §4.1 sizes: ':status' '200' is 42 octets; 'x-big' with a value of n octets is 37 + n.
  const atLimit = H2_UPSTREAM_MAX_HEADER_LIST_BYTES - 42 - 37;

  it(`takes a list of exactly ${H2_UPSTREAM_MAX_HEADER_LIST_BYTES} octets and resets the stream of one octet more`, async (t) => {
    const { conn, calls } = await open(t, 3);
    const [exact, over, other] = calls as [Recorded, Recorded, Recorded];
    conn.write(...headerFrames(1, Buffer.concat([indexedField(8), literalField('x-big', 'e'.repeat(atLimit))]), true));
    await exact.settled();
    assert.deepEqual(exact.log(), ['head 200 complete']);
    assert.equal(exact.head()?.headers[1]?.length, atLimit);
    const answer = await conn.answer(headerFrames(3, Buffer.concat([indexedField(8), literalField('x-big', 'o'.repeat(atLimit + 1))]), true), rstOrGoaway(3));
    assert.equal(showFrame(answer), 'RST_STREAM(3, PROTOCOL_ERROR)');
    assert.deepEqual(over.log(), [ERRORED]);
    conn.write(...complete(5));
    await other.settled();
    assert.deepEqual(other.log(), ['head 200', 'data ok', 'end']);
  });

  it('resets a stream whose list passes the limit, and keeps the HPACK table in step for the next response', async (t) => {
    const { origin, client, conn, calls } = await open(t, 1);
    const [first] = calls as [Recorded];
    // Two fields enter the dynamic table in a block whose list is refused, one before the oversized value and one
    // after it: the table must still follow the origin's, both entries in order (62 the newest).
    const block = Buffer.concat([indexedField(8), literalField('x-first', '1', true), literalField('x-big', 'b'.repeat(70_000)), literalField('x-after', '2', true)]);
    const frames = headerFrames(1, block);
    assert.ok(frames.length > 1, 'the block goes over CONTINUATION frames');
    const answer = await conn.answer(frames, rstOrGoaway(1));
    assert.equal(showFrame(answer), 'RST_STREAM(1, PROTOCOL_ERROR)');
    assert.deepEqual(first.log(), [ERRORED]);

    const next = send(client, '/next');
    await conn.request(3);
    conn.write(frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, 3, Buffer.concat([indexedField(8), indexedField(63), indexedField(62)])));
    await next.settled();
    assert.deepEqual(next.log(), ['head 200 complete']);
    assert.deepEqual(next.head()?.headers, ['x-first', '1', 'x-after', '2']);
    assert.equal(origin.accepted(), 1);
    assert.deepEqual(conn.seen(FrameType.GOAWAY).map(showFrame), []);
  });
});

// ---- 5 ----

describe('h2-client on the wire: RST_STREAM from the origin', SUITE, () => {
  it(`sends a stream refused unanswered (REFUSED_STREAM) again, ${H2_UPSTREAM_REFUSED_RETRIES} times, then fails it as UPSTREAM_CLOSED rstCode 7`, async (t) => {
    const { conn, calls } = await open(t, 2);
    const [refused, other] = calls as [Recorded, Recorded];
    // RFC 9113 §8.7: a refused stream was not processed, so the same request goes again (streams 5, 7, ...).
    conn.write(frame32(FrameType.RST_STREAM, 1, H2Error.REFUSED_STREAM));
    for (let retry = 1, id = 5; retry <= H2_UPSTREAM_REFUSED_RETRIES; retry++, id += 2) {
      assert.deepEqual((await conn.request(id)).fields.slice(6, 8), [':path', '/s1'], `retry ${retry} on stream ${id}`);
      conn.write(frame32(FrameType.RST_STREAM, id, H2Error.REFUSED_STREAM));
    }
    const err = await refused.error();
    assert.ok(err instanceof UpstreamResetError);
    assert.equal(err.code, 'UPSTREAM_CLOSED');
    assert.equal(err.rstCode, H2Error.REFUSED_STREAM);
    assert.deepEqual(refused.log(), ['error UPSTREAM_CLOSED']);
    conn.write(...complete(3));
    await other.settled();
    assert.deepEqual(other.log(), ['head 200', 'data ok', 'end']);
    await conn.sync();
    assert.deepEqual(conn.frames.items.filter(isError).map(showFrame), []);
    assert.equal(conn.seen(FrameType.HEADERS).length, 2 + H2_UPSTREAM_REFUSED_RETRIES, 'streams 1 and 3 and the retries: nothing past the budget');
  });

  it('never sends again a stream refused after its response head, nor one whose body is a stream', async (t) => {
    const { origin, client } = await setup(t);
    const answered = send(client, '/answered');
    const streamed = send(client, '/streamed', { body: (async function* () {
      yield Buffer.from('part');
    })() });
    const conn = await origin.connection(0);
    await conn.handshake([]);
    await conn.request(1);
    await conn.request(3);
    conn.write(headersFrame(1, OK), frame32(FrameType.RST_STREAM, 1, H2Error.REFUSED_STREAM), frame32(FrameType.RST_STREAM, 3, H2Error.REFUSED_STREAM));
    assert.equal((await answered.error()).code, 'UPSTREAM_CLOSED');
    assert.deepEqual(answered.log(), ['head 200', 'error UPSTREAM_CLOSED']);
    assert.equal(((await streamed.error()) as UpstreamResetError).rstCode, H2Error.REFUSED_STREAM);
    await conn.sync();
    assert.equal(conn.seen(FrameType.HEADERS).length, 2);
  });

  it('changes nothing for a call whose response ended before a RST_STREAM NO_ERROR', async (t) => {
    const { client, conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    conn.write(...complete(1), frame32(FrameType.RST_STREAM, 1, H2Error.NO_ERROR));
    await conn.sync();
    assert.deepEqual(call.log(), ['head 200', 'data ok', 'end']);
    const next = send(client, '/next');
    await conn.request(3);
    conn.write(...complete(3));
    await next.settled();
    assert.deepEqual(next.log(), ['head 200', 'data ok', 'end']);
    assert.deepEqual(conn.frames.items.filter(isError).map(showFrame), []);
  });

  /** RFC 9113 §8.1: a complete response, then RST_STREAM NO_ERROR while the request body is still going up. */
  async function earlyResponse(t: TestContext, paused: boolean): Promise<{ call: Recorded; conn: WireConnection; release: () => void }> {
    const { origin, client } = await setup(t);
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    t.after(release);
    async function* upload(): AsyncGenerator<Buffer> {
      yield Buffer.from('first');
      await released;
      yield Buffer.from('second');
    }
    const call = send(client, '/upload', { body: upload() });
    const conn = await origin.connection(0);
    await conn.handshake();
    await conn.frame((f) => f.type === FrameType.DATA && f.streamId === 1, 'the first body chunk');
    if (paused) call.exchange.pause();
    conn.write(...complete(1, 'done'), frame32(FrameType.RST_STREAM, 1, H2Error.NO_ERROR));
    await conn.sync();
    return { call, conn, release };
  }

  it('keeps a complete response that a RST_STREAM NO_ERROR follows while the upload goes on, and stops the upload', async (t) => {
    const { call, conn, release } = await earlyResponse(t, false);
    assert.deepEqual(call.log(), ['head 200', 'data done', 'end']);
    release();
    await conn.sync();
    assert.equal(dataOn(conn, 1).toString(), 'first', 'no body octet after the reset');
    assert.deepEqual(conn.frames.items.filter(isError).map(showFrame), [], 'no RST_STREAM in answer to a RST_STREAM');
  });

  it('keeps that complete response for a paused consumer too: RFC 9113 §8.1 says clients MUST NOT discard it', async (t) => {
    const { call } = await earlyResponse(t, true);
    call.exchange.resume();
    assert.deepEqual(call.log(), ['head 200', 'data done', 'end']);
  });
});

// ---- 6 ----

describe('h2-client on the wire: GOAWAY from the origin', SUITE, () => {
  it('finishes the streams up to last_stream_id and sends those past it again on a new connection, which new requests use too', async (t) => {
    const { origin, client, conn, calls } = await open(t, 2);
    const [kept, refused] = calls as [Recorded, Recorded];
    conn.write(goawayFrame(1, H2Error.NO_ERROR));
    // Stream 3 was past the origin's last stream: unprocessed, so it goes again on a new connection (RFC 9113 §6.8).
    const second = await origin.connection(1);
    assert.equal(origin.accepted(), 2);
    await second.handshake();
    assert.deepEqual((await second.request(1)).fields.slice(6, 8), [':path', '/s3']);
    assert.deepEqual(kept.log(), []);
    conn.write(...complete(1));
    await kept.settled();
    assert.deepEqual(kept.log(), ['head 200', 'data ok', 'end']);
    assert.equal(await conn.closing, 'end', 'the old connection ends once its last stream did');
    second.write(...complete(1));
    await refused.settled();
    assert.deepEqual(refused.log(), ['head 200', 'data ok', 'end']);

    const later = send(client, '/later');
    assert.deepEqual((await second.request(3)).fields.slice(6, 8), [':path', '/later']);
    second.write(...complete(3));
    await later.settled();
    assert.deepEqual(later.log(), ['head 200', 'data ok', 'end']);
    assert.equal(conn.seen(FrameType.HEADERS).length, 2, 'nothing more opened on the old connection');
    assert.equal(origin.accepted(), 2);
  });
});

// ---- 7 ----

describe('h2-client on the wire: request bodies under flow control', SUITE, () => {
  /** A connection whose handshake carried `settings`, after one GET on stream 1 answered (so they apply to what follows). */
  async function warm(t: TestContext, settings: SettingsEntries): Promise<{ client: H2Client; conn: WireConnection }> {
    const { client, conn, calls } = await open(t, 1, settings);
    conn.write(...complete(1));
    await (calls[0] as Recorded).settled();
    return { client, conn };
  }

  const endStreamOn = (id: number) => (f: WireFrame) => f.streamId === id && (f.flags & Flag.END_STREAM) !== 0 && (f.type === FrameType.DATA || f.type === FrameType.HEADERS);

  it('sends no more than a stream window of 10 allows, and the rest as WINDOW_UPDATEs open it', async (t) => {
    const { client, conn } = await warm(t, [[Setting.INITIAL_WINDOW_SIZE, 10]]);
    const body = Buffer.from('abcdefghijklmnopqrstuvwxy');
    const post = send(client, '/upload', { body });
    await conn.request(3);
    await conn.sync();
    assert.equal(dataOn(conn, 3).toString(), 'abcdefghij');
    conn.write(frame32(FrameType.WINDOW_UPDATE, 3, 10));
    await conn.sync();
    assert.equal(dataOn(conn, 3).toString(), 'abcdefghijklmnopqrst');
    assert.equal(conn.seen(FrameType.DATA, 3).filter(endStreamOn(3)).length, 0);
    conn.write(frame32(FrameType.WINDOW_UPDATE, 3, 5));
    await conn.frame(endStreamOn(3), 'END_STREAM on stream 3');
    assert.equal(dataOn(conn, 3).toString(), body.toString());
    conn.write(...complete(3));
    await post.settled();
    assert.deepEqual(post.log(), ['head 200', 'data ok', 'end']);
  });

  it('sends no more than the 65,535-octet connection window allows, and the rest as WINDOW_UPDATEs on stream 0 open it', async (t) => {
    const { client, conn } = await warm(t, [[Setting.INITIAL_WINDOW_SIZE, 1_000_000]]);
    const body = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
    const post = send(client, '/upload', { body });
    await conn.request(3);
    await conn.sync();
    assert.equal(dataOn(conn, 3).length, H2_DEFAULT_WINDOW);
    conn.write(frame32(FrameType.WINDOW_UPDATE, 3, 100_000));
    await conn.sync();
    assert.equal(dataOn(conn, 3).length, H2_DEFAULT_WINDOW, 'a stream WINDOW_UPDATE does not open the connection window');
    conn.write(frame32(FrameType.WINDOW_UPDATE, 0, 1_000));
    await conn.sync();
    assert.equal(dataOn(conn, 3).length, H2_DEFAULT_WINDOW + 1_000);
    conn.write(frame32(FrameType.WINDOW_UPDATE, 0, 70_000 - H2_DEFAULT_WINDOW - 1_000));
    await conn.frame(endStreamOn(3), 'END_STREAM on stream 3');
    assert.ok(dataOn(conn, 3).equals(body));
    conn.write(...complete(3));
    await post.settled();
  });

  it('ends a streamed body with a HEADERS frame carrying END_STREAM and the request trailers', async (t) => {
    const { origin, client } = await setup(t);
    async function* chunks(): AsyncGenerator<Buffer> {
      yield Buffer.from('abc');
      yield Buffer.from('def');
    }
    const post = send(client, '/rpc', { body: chunks(), trailers: ['grpc-timeout', '1S'] });
    const conn = await origin.connection(0);
    await conn.handshake();
    const head = await conn.request(1);
    assert.equal(head.endStream, false);
    const last = await conn.frame(endStreamOn(1), 'END_STREAM on stream 1');
    assert.equal(last.type, FrameType.HEADERS);
    assert.equal(last.flags & Flag.END_HEADERS, Flag.END_HEADERS);
    const trailers = await conn.blocks.waitFor((b) => b.streamId === 1 && b !== head, DEADLINE_MS, 'the trailer block');
    assert.deepEqual(trailers, { streamId: 1, endStream: true, fields: ['grpc-timeout', '1S'] });
    assert.equal(dataOn(conn, 1).toString(), 'abcdef');
    assert.equal(conn.frames.items.filter((f) => f.streamId === 1).at(-1), last, 'the trailers are the last frame of the stream');
    conn.write(...complete(1));
    await post.settled();
  });
});

// ---- 8 ----

describe('h2-client on the wire: receive flow control and pause()', SUITE, () => {
  it('holds data and the stream window while paused, and hands both on in order after resume()', async (t) => {
    const { conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    call.exchange.pause();
    const parts = [Buffer.alloc(H2_FRAME_BYTES, 0x61), Buffer.alloc(H2_FRAME_BYTES, 0x62), Buffer.alloc(40_000 - 2 * H2_FRAME_BYTES, 0x63)];
    conn.write(headersFrame(1, OK), ...parts.flatMap((p) => dataFrames(1, p)));
    await conn.sync();
    assert.deepEqual(call.log(), ['head 200'], 'no onData while paused');
    assert.deepEqual(conn.seen(FrameType.WINDOW_UPDATE, 1).map(showFrame), [], 'no stream WINDOW_UPDATE for held data');

    call.exchange.resume();
    assert.deepEqual(call.log(), ['head 200', ...parts.map((p) => `data <${p.length} octets>`)]);
    assert.ok(call.body().equals(Buffer.concat(parts)));
    const update = await conn.frame((f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === 1, 'a WINDOW_UPDATE on stream 1');
    const increment = update.payload.readUInt32BE(0);
    assert.ok(increment > 0 && increment <= 40_000, showFrame(update));
    conn.write(...dataFrames(1, '', true));
    await call.settled();
    assert.equal(call.log().at(-1), 'end');
  });

  it(`resets a stream sent DATA past its ${H2_DEFAULT_WINDOW}-octet window with FLOW_CONTROL_ERROR; the other stream completes`, async (t) => {
    const { conn, calls } = await open(t, 2);
    const [held, other] = calls as [Recorded, Recorded];
    held.exchange.pause();
    const early = await conn.answer([headersFrame(1, OK), ...dataFrames(1, Buffer.alloc(H2_DEFAULT_WINDOW, 0x66))], isError);
    assert.equal(showFrame(early), showFrame(undefined), 'a full window is taken');
    const answer = await conn.answer(dataFrames(1, 'x'), rstOrGoaway(1));
    assert.equal(showFrame(answer), 'RST_STREAM(1, FLOW_CONTROL_ERROR)');
    assert.deepEqual(held.log(), ['head 200', ERRORED]);
    conn.write(...complete(3));
    await other.settled();
    assert.deepEqual(other.log(), ['head 200', 'data ok', 'end']);
    await conn.sync();
    assert.deepEqual(conn.frames.items.filter(isError).map(showFrame), ['RST_STREAM(1, FLOW_CONTROL_ERROR)']);
  });
});

// ---- 9 ----

describe('h2-client on the wire: SETTINGS_MAX_CONCURRENT_STREAMS', SUITE, () => {
  it('opens one stream at a time under MAX_CONCURRENT_STREAMS 1: 1, then 3, then 5', async (t) => {
    const { origin, client } = await setup(t);
    const first = send(client, '/1');
    const conn = await origin.connection(0);
    await conn.handshake([[Setting.MAX_CONCURRENT_STREAMS, 1]]);
    const opened = (): number[] => conn.seen(FrameType.HEADERS).map((f) => f.streamId);
    await conn.request(1);
    const second = send(client, '/2');
    const third = send(client, '/3');
    await conn.sync();
    assert.deepEqual(opened(), [1]);
    conn.write(...complete(1));
    await first.settled();
    await conn.request(3);
    await conn.sync();
    assert.deepEqual(opened(), [1, 3]);
    conn.write(...complete(3));
    await second.settled();
    await conn.request(5);
    await conn.sync();
    assert.deepEqual(opened(), [1, 3, 5]);
    conn.write(...complete(5));
    await third.settled();
    assert.deepEqual([first.log(), second.log(), third.log()], Array.from({ length: 3 }, () => ['head 200', 'data ok', 'end']));
  });
});

// ---- 10 ----

describe('h2-client on the wire: padding', SUITE, () => {
  it('reads a PADDED HEADERS frame (with priority) and PADDED DATA frames, one of them all padding', async (t) => {
    const { conn, calls } = await open(t, 1);
    const [call] = calls as [Recorded];
    const priority = Buffer.from([0, 0, 0, 0, 15]);
    const block = encodeHeaderBlock([...OK, 'x-padded', 'yes']);
    const allPadding = padded(Buffer.alloc(0), 9);
    conn.write(
      frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.PADDED | Flag.PRIORITY, 1, padded(block, 7, priority)),
      frame(FrameType.DATA, Flag.PADDED, 1, padded(Buffer.from('hello'), 10)),
      frame(FrameType.DATA, Flag.PADDED | Flag.END_STREAM, 1, allPadding),
    );
    await call.settled();
    assert.deepEqual(call.log(), ['head 200', 'data hello', 'end']);
    assert.deepEqual(call.head()?.headers, ['x-padded', 'yes']);
  });

  /** A payload whose Pad Length byte says `padLength`, `length` octets in all. */
  const withPadLength = (padLength: number, length: number): Buffer => Buffer.concat([Buffer.from([padLength]), Buffer.alloc(length - 1)]);
  const cases: ConnectionErrorCase[] = [
    {
      name: 'PADDED DATA whose pad length is the payload length',
      code: H2Error.PROTOCOL_ERROR,
      accepted: () => [headersFrame(1, OK)],
      frames: () => [frame(FrameType.DATA, Flag.PADDED, 1, withPadLength(6, 6))],
    },
    { name: 'PADDED HEADERS whose pad length is the payload length', code: H2Error.PROTOCOL_ERROR, frames: () => [frame(FrameType.HEADERS, Flag.PADDED | Flag.END_HEADERS, 1, withPadLength(6, 6))] },
    {
      name: 'PADDED HEADERS with priority whose padding reaches into the priority fields',
      code: H2Error.PROTOCOL_ERROR,
      frames: () => [frame(FrameType.HEADERS, Flag.PADDED | Flag.PRIORITY | Flag.END_HEADERS, 1, withPadLength(2, 7))],
    },
  ];
  for (const c of cases) it(`answers ${c.name} with GOAWAY ${errorName(c.code)}`, (t) => expectConnectionError(t, c));
});
