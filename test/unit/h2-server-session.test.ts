// boundary's workload-facing HTTP/2 server session (src/http2/server-session.ts) on its own, over loopback, driven
// by raw frames: what the proxy-level tests cannot steer: when request body window is given back (only as the
// proxy reads), a closed stream's unread data returned to the connection, the answer held by the client's windows,
// trailers both ways, an upload that is no longer wanted, and a graceful end after the client's GOAWAY.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket, connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { H2_DEFAULT_WINDOW, H2Error, Setting } from '../../src/http2/frames.js';
import type { RequestStream } from '../../src/http2/request-stream.js';
import { H2_CLIENT_CONNECTION_WINDOW, ServerSession } from '../../src/http2/server-session.js';
import { FLAG, FRAME, type Frame, type FrameReader, frame, headerBlock, PREFACE, readFrames, rstStream, settings } from '../harness/h2-frames.js';

const AUTHORITY = 'api.example.test';

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function windowUpdate(id: number, n: number): Buffer {
  return frame(FRAME.WINDOW_UPDATE, 0, id, u32(n));
}

function post(id: number, extra: [string, string][] = []): Buffer {
  return frame(FRAME.HEADERS, FLAG.END_HEADERS, id, headerBlock([[':method', 'POST'], [':scheme', 'https'], [':authority', AUTHORITY], [':path', '/up'], ...extra]));
}

function data(id: number, bytes: number, end = false): Buffer {
  return frame(FRAME.DATA, end ? FLAG.END_STREAM : 0, id, Buffer.alloc(bytes, 0x61));
}

/** DATA octets the server sent on a stream so far. */
function dataOn(frames: readonly Frame[], id: number): number {
  return frames.filter((f) => f.type === FRAME.DATA && f.streamId === id).reduce((n, f) => n + f.payload.length, 0);
}

describe('the HTTP/2 server session, frame by frame', { timeout: 30_000 }, () => {
  let server: Server;
  let port = 0;
  /** The streams the session handed over, in order, and who waits for the next. */
  const streams: RequestStream[] = [];
  let nextStream: ((s: RequestStream) => void) | undefined;
  const sockets: Socket[] = [];

  before(async () => {
    server = createServer((socket) => {
      sockets.push(socket);
      new ServerSession(socket, {
        onStream: (stream) => {
          streams.push(stream);
          const waiter = nextStream;
          nextStream = undefined;
          waiter?.(stream);
        },
        onFlood: () => undefined,
        onClose: () => undefined,
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as { port: number }).port;
  });

  after(async () => {
    for (const s of sockets) s.destroy();
    server.close();
  });

  function streamArrives(): Promise<RequestStream> {
    return new Promise((resolve) => {
      nextStream = resolve;
    });
  }

  /** A client past the SETTINGS exchange; `initialWindow` is sent in its SETTINGS when given. */
  async function client(initialWindow?: number): Promise<{ socket: Socket; frames: FrameReader }> {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    await once(socket, 'connect');
    const frames = readFrames(socket);
    socket.write(Buffer.concat([PREFACE, settings(initialWindow === undefined ? [] : [[Setting.INITIAL_WINDOW_SIZE, initialWindow]]), frame(FRAME.SETTINGS, FLAG.ACK, 0)]));
    await frames.next((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) !== 0);
    return { socket, frames };
  }

  it('takes a preface that arrives a few octets at a time', async () => {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    await once(socket, 'connect');
    const frames = readFrames(socket);
    const bytes = Buffer.concat([PREFACE, settings()]);
    const arrived = streamArrives();
    for (let at = 0; at < bytes.length; at += 5) {
      socket.write(bytes.subarray(at, at + 5));
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    socket.write(post(1));
    const stream = await arrived;
    assert.equal(stream.id, 1);
    assert.ok(await frames.next((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) !== 0));
  });

  it('answers a wrong preface with GOAWAY PROTOCOL_ERROR and closes', async () => {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    await once(socket, 'connect');
    const frames = readFrames(socket);
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const away = await frames.next((f) => f.type === FRAME.GOAWAY);
    assert.ok(away !== undefined);
    assert.equal(away.payload.readUInt32BE(4), H2Error.PROTOCOL_ERROR);
    await frames.closed;
  });

  it('gives request body window back only as the proxy reads the body', async () => {
    const { socket, frames } = await client();
    const arrived = streamArrives();
    socket.write(Buffer.concat([post(1), data(1, 16_384), data(1, 16_384), data(1, 16_384), data(1, 16_383)]));
    const stream = await arrived;
    const iterator = stream[Symbol.asyncIterator]();
    // Nothing read: the stream's window stays spent, so no WINDOW_UPDATE names it.
    const first = await iterator.next();
    assert.equal(first.done, false);
    // Read a window's worth: half a window read brings the update.
    let read = (first.value as Buffer).length;
    while (read < H2_DEFAULT_WINDOW) read += ((await iterator.next()).value as Buffer).length;
    const update = await frames.next((f) => f.type === FRAME.WINDOW_UPDATE && f.streamId === 1);
    assert.ok(update !== undefined);
    assert.ok(update.payload.readUInt32BE(0) >= H2_DEFAULT_WINDOW / 2);
    socket.write(data(1, 10, true));
    assert.equal(((await iterator.next()).value as Buffer).length, 10);
    assert.equal((await iterator.next()).done, true);
  });

  it('refuses DATA past a stream window no one read, with RST_STREAM FLOW_CONTROL_ERROR', async () => {
    const { socket, frames } = await client();
    const arrived = streamArrives();
    socket.write(Buffer.concat([post(1), data(1, 16_384), data(1, 16_384), data(1, 16_384), data(1, 16_383), data(1, 1)]));
    await arrived;
    const rst = await frames.next((f) => f.type === FRAME.RST_STREAM && f.streamId === 1);
    assert.ok(rst !== undefined);
    assert.equal(rst.payload.readUInt32BE(0), H2Error.FLOW_CONTROL_ERROR);
  });

  it('returns the unread data of streams it closes to the connection window', async () => {
    const { socket, frames } = await client();
    // Each stream fills its window and is reset unread; together they pass half the connection window.
    const count = Math.ceil(H2_CLIENT_CONNECTION_WINDOW / 2 / H2_DEFAULT_WINDOW) + 1;
    for (let i = 0; i < count; i++) {
      const id = 1 + 2 * i;
      const arrived = streamArrives();
      socket.write(Buffer.concat([post(id), data(id, 16_384), data(id, 16_384), data(id, 16_384), data(id, 16_383)]));
      const stream = await arrived;
      // The reset comes after the last DATA: wait until it arrived unread.
      while (stream.received < H2_DEFAULT_WINDOW) await new Promise<void>((resolve) => setImmediate(resolve));
      stream.reset(H2Error.CANCEL);
    }
    const update = await frames.next((f) => f.type === FRAME.WINDOW_UPDATE && f.streamId === 0 && f.payload.readUInt32BE(0) < H2_CLIENT_CONNECTION_WINDOW);
    assert.ok(update !== undefined, 'the connection window came back');
    assert.ok(!frames.frames.some((f) => f.type === FRAME.GOAWAY));
  });

  it("holds the answer to the client's stream window and goes on after its WINDOW_UPDATE", async () => {
    const { socket, frames } = await client(10);
    const arrived = streamArrives();
    socket.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock([[':method', 'GET'], [':scheme', 'https'], [':authority', AUTHORITY], [':path', '/']])));
    const stream = await arrived;
    let drained = 0;
    stream.listener = { streamClosed: () => undefined, streamDrained: () => drained++, streamTrailers: () => undefined };
    stream.respond([':status', '200'], false);
    assert.equal(stream.write(Buffer.alloc(70_000, 0x62)), false, 'past the high-water mark: the writer is asked to wait');
    stream.end();
    await frames.next((f) => f.type === FRAME.DATA && f.streamId === 1);
    assert.equal(dataOn(frames.frames, 1), 10);
    // The connection window (65,535 by default) holds the rest too until it grows.
    socket.write(windowUpdate(1, 100_000));
    await frames.next((f) => f.type === FRAME.DATA && f.streamId === 1 && dataOn(frames.frames, 1) === H2_DEFAULT_WINDOW);
    socket.write(windowUpdate(0, 100_000));
    const last = await frames.next((f) => f.type === FRAME.DATA && f.streamId === 1 && (f.flags & FLAG.END_STREAM) !== 0);
    assert.ok(last !== undefined);
    assert.equal(dataOn(frames.frames, 1), 70_000);
    assert.equal(drained, 1);
  });

  it('hands request trailers over and ends the body; sends answer trailers with END_STREAM', async () => {
    const { socket, frames } = await client();
    const arrived = streamArrives();
    socket.write(Buffer.concat([post(1, [['te', 'trailers']]), data(1, 5), frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock([['x-checksum', 'abc']]))]));
    const stream = await arrived;
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.equal(Buffer.concat(chunks).length, 5);
    // They came in the same read as the head, before anyone could listen: the stream keeps them.
    assert.deepEqual(stream.trailers, ['x-checksum', 'abc']);
    stream.respond([':status', '200', 'content-type', 'application/grpc'], false);
    stream.write(Buffer.from('hi'));
    stream.end(['grpc-status', '0']);
    const tail = await frames.next((f) => f.type === FRAME.HEADERS && f.streamId === 1 && (f.flags & FLAG.END_STREAM) !== 0);
    assert.ok(tail !== undefined);
    assert.equal(stream.destroyed, true, 'both sides ended: the stream is closed');
    assert.equal(stream.aborted, false);
  });

  it('refuses trailers without END_STREAM and a body that disagrees with its content-length', async () => {
    const { socket, frames } = await client();
    let arrived = streamArrives();
    socket.write(Buffer.concat([post(1), frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, headerBlock([['x-t', '1']]))]));
    await arrived;
    const first = await frames.next((f) => f.type === FRAME.RST_STREAM && f.streamId === 1);
    assert.equal(first?.payload.readUInt32BE(0), H2Error.PROTOCOL_ERROR);
    arrived = streamArrives();
    socket.write(post(3, [['content-length', '10']]));
    const stream = await arrived;
    stream.contentLength = 10; // what the proxy sets from the checked head
    socket.write(data(3, 5, true));
    const second = await frames.next((f) => f.type === FRAME.RST_STREAM && f.streamId === 3);
    assert.equal(second?.payload.readUInt32BE(0), H2Error.PROTOCOL_ERROR);
    assert.ok(!frames.frames.some((f) => f.type === FRAME.GOAWAY), 'stream errors: the session lives on');
  });

  it('drops an upload no longer wanted: its connection window comes back, its stream window does not, and no reset', async () => {
    const { socket, frames } = await client();
    const arrived = streamArrives();
    socket.write(Buffer.concat([post(1), data(1, 100)]));
    const stream = await arrived;
    stream.respond([':status', '403', 'content-length', '2'], false);
    stream.write(Buffer.from('no'));
    stream.end();
    stream.stopUpload();
    await frames.next((f) => f.type === FRAME.DATA && f.streamId === 1 && (f.flags & FLAG.END_STREAM) !== 0);
    // The client goes on past half the connection window on this stream and others: none of it is read, yet the
    // connection window comes back, while this stream's stays spent.
    socket.write(Buffer.concat([data(1, 16_384), data(1, 16_384), data(1, 16_384), data(1, 16_383 - 100)]));
    const count = Math.ceil(H2_CLIENT_CONNECTION_WINDOW / 2 / H2_DEFAULT_WINDOW);
    for (let i = 1; i <= count; i++) {
      const id = 1 + 2 * i;
      const next = streamArrives();
      socket.write(post(id));
      const s = await next;
      s.respond([':status', '403'], true);
      s.stopUpload();
      socket.write(Buffer.concat([data(id, 16_384), data(id, 16_384), data(id, 16_384), data(id, 16_383)]));
    }
    const update = await frames.next((f) => f.type === FRAME.WINDOW_UPDATE && f.streamId === 0 && f.payload.readUInt32BE(0) < H2_CLIENT_CONNECTION_WINDOW);
    assert.ok(update !== undefined, 'the connection window came back');
    assert.ok(!frames.frames.some((f) => f.type === FRAME.WINDOW_UPDATE && f.streamId === 1), 'the dropped stream got no window');
    assert.ok(!frames.frames.some((f) => f.type === FRAME.RST_STREAM || f.type === FRAME.GOAWAY));
    assert.equal(stream.destroyed, false, 'the stream waits for the client to end or cancel it');
    // The client cancels once it has the answer: the stream closes, and it was answered, not aborted.
    socket.write(rstStream(1, H2Error.CANCEL));
    await new Promise<void>((resolve) => {
      stream.listener = { streamClosed: resolve, streamDrained: () => undefined, streamTrailers: () => undefined };
    });
    assert.equal(stream.aborted, false);
  });

  it('answers the streams open at the client GOAWAY, then ends with GOAWAY NO_ERROR', async () => {
    const { socket, frames } = await client();
    const arrived = streamArrives();
    socket.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock([[':method', 'GET'], [':scheme', 'https'], [':authority', AUTHORITY], [':path', '/']])));
    const stream = await arrived;
    socket.write(frame(FRAME.GOAWAY, 0, 0, Buffer.concat([u32(0), u32(0)])));
    // The GOAWAY is read before the answer goes out.
    await new Promise<void>((resolve) => setImmediate(resolve));
    stream.respond([':status', '204'], true);
    const away = await frames.next((f) => f.type === FRAME.GOAWAY);
    assert.ok(away !== undefined);
    assert.equal(away.payload.readUInt32BE(4), H2Error.NO_ERROR);
    assert.equal(away.payload.readUInt32BE(0), 1, 'the last stream it took');
    assert.ok(frames.frames.some((f) => f.type === FRAME.HEADERS && f.streamId === 1));
    await frames.closed;
  });

  it('marks a stream the client reset as aborted and fails its body reader with CLIENT_RESET', async () => {
    const { socket } = await client();
    const arrived = streamArrives();
    socket.write(Buffer.concat([post(1), data(1, 3)]));
    const stream = await arrived;
    const closed = new Promise<void>((resolve) => {
      stream.listener = { streamClosed: resolve, streamDrained: () => undefined, streamTrailers: () => undefined };
    });
    const reading = (async () => {
      for await (const _ of stream) {
        // drain
      }
    })();
    socket.write(rstStream(1, H2Error.CANCEL));
    await closed;
    assert.equal(stream.aborted, true);
    await assert.rejects(reading, (err: Error & { code?: string }) => err.code === 'CLIENT_RESET');
  });
});
