// FrameWriter: the frames of one tick go out as one write, in order; past H2_FRAMES_PER_WRITE frames or the socket's
// high-water mark they go at once; a header block too long for one frame is split into HEADERS and CONTINUATION; the
// batch buffers reused from tick to tick never change bytes a socket was given.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket, connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { FrameWriter, H2_FRAMES_PER_WRITE, H2_WRITE_BATCH_BYTES } from '../../src/http2/frame-writer.js';
import { FRAME_HEADER_BYTES, Flag, FrameType, H2_FRAME_BYTES, frame, frame32 } from '../../src/http2/frames.js';
import { encodeHeaderBlock } from '../../src/http2/hpack-encode.js';

describe('FrameWriter', () => {
  let server: Server;
  let port = 0;
  const accepted: Socket[] = [];
  const opened: Socket[] = [];

  before(async () => {
    server = createServer((s) => accepted.push(s));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as { port: number }).port;
  });
  after(() => {
    for (const s of opened) s.destroy();
    server.close();
  });

  /** A connected socket and the bytes its peer reads, with the writes the socket made. */
  async function pair(): Promise<{ socket: Socket; received: () => Promise<Buffer>; writes: Buffer[] }> {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    while (accepted.length === 0) await new Promise((r) => setImmediate(r));
    const peer = accepted.shift() as Socket;
    opened.push(socket, peer);
    const chunks: Buffer[] = [];
    peer.on('data', (c: Buffer) => chunks.push(c));
    const writes: Buffer[] = [];
    const write = socket.write.bind(socket);
    socket.write = ((chunk: Buffer, ...rest: never[]) => {
      writes.push(Buffer.from(chunk));
      return write(chunk, ...rest);
    }) as typeof socket.write;
    const received = async (): Promise<Buffer> => {
      socket.end();
      await once(peer, 'end');
      return Buffer.concat(chunks);
    };
    return { socket, received, writes };
  }

  it('writes the frames of one tick as one buffer, in order', async () => {
    const { socket, received, writes } = await pair();
    const out = new FrameWriter(socket);
    const frames = [frame(FrameType.PING, 0, 0, Buffer.alloc(8, 1)), frame32(FrameType.WINDOW_UPDATE, 0, 100), frame32(FrameType.RST_STREAM, 3, 8)];
    for (const f of frames) out.send(f);
    assert.equal(writes.length, 0);
    await new Promise((r) => setImmediate(r));
    assert.equal(writes.length, 1);
    assert.deepEqual(await received(), Buffer.concat(frames));
  });

  it(`writes at once past ${H2_FRAMES_PER_WRITE} frames, and what a stop leaves pending`, async () => {
    const { socket, received, writes } = await pair();
    const out = new FrameWriter(socket);
    const frames = Array.from({ length: H2_FRAMES_PER_WRITE + 2 }, (_, i) => frame32(FrameType.WINDOW_UPDATE, 1, i + 1));
    for (const f of frames) out.send(f);
    assert.equal(writes.length, 1);
    assert.equal(writes[0]?.length, H2_FRAMES_PER_WRITE * (FRAME_HEADER_BYTES + 4));
    out.stop();
    assert.equal(writes.length, 2);
    out.send(frame32(FrameType.WINDOW_UPDATE, 1, 99));
    await new Promise((r) => setImmediate(r));
    assert.equal(writes.length, 2);
    assert.deepEqual(await received(), Buffer.concat(frames));
  });

  it("asks the writer to wait once the socket's buffer reaches its high-water mark", async () => {
    const { socket, received } = await pair();
    // Corked, the socket keeps what it is given in its own buffer, as a TLS socket does while the peer is slow.
    socket.cork();
    const out = new FrameWriter(socket);
    const big = Buffer.alloc(H2_FRAME_BYTES, 7);
    let sent = 0;
    while (!out.needDrain && sent < 64) {
      out.send(frame(FrameType.DATA, 0, 1, big));
      sent++;
    }
    assert.equal(out.needDrain, true);
    assert.ok(sent * (H2_FRAME_BYTES + FRAME_HEADER_BYTES) >= socket.writableHighWaterMark);
    socket.uncork();
    assert.equal((await received()).length, sent * (H2_FRAME_BYTES + FRAME_HEADER_BYTES));
  });

  it('ends a stream on its DATA frame still waiting to be written, and only then', async () => {
    const { socket, received } = await pair();
    const out = new FrameWriter(socket);
    out.send(frame(FrameType.DATA, 0, 1, Buffer.from('one')));
    out.send(frame(FrameType.DATA, 0, 3, Buffer.from('three')));
    assert.equal(out.endOnLastData(1), false, 'another frame follows it');
    assert.equal(out.endOnLastData(3), true);
    out.send(frame32(FrameType.WINDOW_UPDATE, 3, 10));
    assert.equal(out.endOnLastData(3), false, 'the last frame is not DATA');
    await new Promise((r) => setImmediate(r));
    out.send(frame(FrameType.DATA, 0, 5, Buffer.from('five')));
    await new Promise((r) => setImmediate(r));
    assert.equal(out.endOnLastData(5), false, 'already written');
    const expected = [
      frame(FrameType.DATA, 0, 1, Buffer.from('one')),
      frame(FrameType.DATA, Flag.END_STREAM, 3, Buffer.from('three')),
      frame32(FrameType.WINDOW_UPDATE, 3, 10),
      frame(FrameType.DATA, 0, 5, Buffer.from('five')),
    ];
    assert.deepEqual(await received(), Buffer.concat(expected));
  });

  it('splits a long header block into HEADERS and CONTINUATION, and leads it with a table size update when owed', async () => {
    const { socket, received } = await pair();
    const out = new FrameWriter(socket);
    const fields = [':status', '200', 'x-long', 'v'.repeat(H2_FRAME_BYTES + 100)];
    out.tableSizeUpdate = true;
    out.headers(5, fields, true);
    out.headers(7, [':status', '204'], false);
    await new Promise((r) => setImmediate(r));
    const bytes = await received();
    const block = Buffer.concat([Buffer.from([0x20]), encodeHeaderBlock(fields)]);
    const first = frame(FrameType.HEADERS, Flag.END_STREAM, 5, block, 0, H2_FRAME_BYTES);
    const second = frame(FrameType.CONTINUATION, Flag.END_HEADERS, 5, block, H2_FRAME_BYTES, block.length);
    const third = frame(FrameType.HEADERS, Flag.END_HEADERS, 7, encodeHeaderBlock([':status', '204']));
    assert.deepEqual(bytes, Buffer.concat([first, second, third]));
  });

  it('keeps what it wrote intact while its batch buffers serve later ticks and other connections', async () => {
    const a = await pair();
    const b = await pair();
    // The very buffers each socket was given, and their bytes when given.
    const given: [Buffer, Buffer][] = [];
    for (const socket of [a.socket, b.socket]) {
      const write = socket.write.bind(socket);
      socket.write = ((chunk: Buffer, ...rest: never[]) => {
        given.push([chunk, Buffer.from(chunk)]);
        return write(chunk, ...rest);
      }) as typeof socket.write;
    }
    const writers = [new FrameWriter(a.socket), new FrameWriter(b.socket)];
    const expected: Buffer[][] = [[], []];
    // Sizes that fill a batch part way, cross its end, and take a whole one: frames of one tick span batches.
    const sizes = [10, 3000, H2_FRAME_BYTES, 7, H2_WRITE_BATCH_BYTES - 4000, 1];
    for (let tick = 0; tick < 6; tick++) {
      for (let w = 0; w < 2; w++) {
        for (const [i, size] of sizes.entries()) {
          const id = 1 + 2 * i;
          const payload = Buffer.alloc(size, tick * 16 + w * 8 + i);
          writers[w]!.data(id, 0, payload);
          expected[w]!.push(frame(FrameType.DATA, 0, id, payload));
        }
        writers[w]!.headers(3, [':status', '200', 'x-tick', String(tick)], false);
        expected[w]!.push(frame(FrameType.HEADERS, Flag.END_HEADERS, 3, encodeHeaderBlock([':status', '200', 'x-tick', String(tick)])));
        assert.equal(writers[w]!.endOnLastData(3), false, 'the last frame is HEADERS');
        writers[w]!.data(9, 0, Buffer.from('end'));
        assert.equal(writers[w]!.endOnLastData(9), true);
        expected[w]!.push(frame(FrameType.DATA, Flag.END_STREAM, 9, Buffer.from('end')));
      }
      await new Promise((r) => setImmediate(r));
    }
    assert.deepEqual(await a.received(), Buffer.concat(expected[0]!));
    assert.deepEqual(await b.received(), Buffer.concat(expected[1]!));
    assert.ok(given.length > 12);
    for (const [chunk, bytes] of given) assert.ok(chunk.equals(bytes), 'a written buffer changed after the write');
  });
});
