// Issue 18: the known HTTP/2 attack classes against boundary's HTTP/2 server, as raw frames written into a CONNECT
// tunnel to a cleartext route (prior knowledge): too many streams, an oversized header list, SETTINGS, PING and
// RST_STREAM (rapid reset) floods, a CONTINUATION flood and an empty-frame flood. Each meets its named limit.

import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS, H2_MAX_PINGS_BETWEEN_REQUESTS, H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS, H2_MAX_RESET_DEBT, H2_MAX_SETTINGS_BETWEEN_REQUESTS } from '../../src/http2/flood-guard.js';
import { H2_MAX_CONCURRENT_STREAMS, H2_MAX_CONTINUATION_FRAMES, H2_MAX_HEADER_LIST_BYTES } from '../../src/proxy/h2-server.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { ERROR, errorOf, FLAG, FRAME, type FrameReader, frame, headerBlock, PREFACE, ping, readFrames, requestHeaders, rstStream, settings } from '../harness/h2-frames.js';
import { type H2Origin, h2cOrigin } from '../harness/h2-origin.js';
import { metric } from '../harness/liveness.js';
import { openTunnel } from '../harness/proxy-client.js';

describe('issue 18: HTTP/2 attack classes meet named limits', () => {
  let b: RunningBoundary;
  let origin: H2Origin;
  let authority = '';
  const sockets: Socket[] = [];

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
    binaries: [{ path: "/**" }]
`,
    });
  });

  after(async () => {
    for (const s of sockets) s.destroy();
    await b?.close();
    await origin?.close();
  });

  /** A tunnel speaking HTTP/2 by prior knowledge, past the SETTINGS exchange (ours acknowledged unless `ack` is false). */
  async function session(ack = true): Promise<{ socket: Socket; frames: FrameReader }> {
    const tunnel = await openTunnel(b.proxyPort, authority);
    assert.equal(tunnel.status, 200);
    const socket = tunnel.socket;
    sockets.push(socket);
    const frames = readFrames(socket);
    socket.write(Buffer.concat([PREFACE, settings()]));
    const serverSettings = await frames.next((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0);
    assert.ok(serverSettings !== undefined, 'the server sent its SETTINGS');
    if (ack) socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
    return { socket, frames };
  }

  async function goaway(frames: FrameReader): Promise<{ code: number; debug: string }> {
    const f = await frames.next((x) => x.type === FRAME.GOAWAY);
    assert.ok(f !== undefined, 'a GOAWAY came before the connection closed');
    return errorOf(f);
  }

  function openStreams(count: number): Buffer {
    const open: Buffer[] = [];
    for (let i = 0; i < count; i++) open.push(requestHeaders(1 + 2 * i, { authority, path: '/upload', method: 'POST', endStream: false }));
    return Buffer.concat(open);
  }

  it('counts open client sessions and the upstream HTTP/2 clients their streams use', async () => {
    const sessionsBefore = await metric(b, 'boundary_http2_client_sessions');
    const { socket, frames } = await session();
    // The server made the session before it sent its SETTINGS, which session() waited for.
    assert.equal(await metric(b, 'boundary_http2_client_sessions'), sessionsBefore + 1);
    socket.write(requestHeaders(1, { authority, path: '/counted', method: 'GET', endStream: true }));
    const answer = await frames.next((f) => f.type === FRAME.HEADERS && f.streamId === 1);
    assert.ok(answer !== undefined, 'the stream was answered');
    assert.ok((await metric(b, 'boundary_http2_upstream_clients')) >= 1, 'the stream went upstream on a kept HTTP/2 client');
  });

  it(`refuses streams beyond ${H2_MAX_CONCURRENT_STREAMS} at once with REFUSED_STREAM while the limit is unacknowledged`, async () => {
    const { socket, frames } = await session(false);
    socket.write(openStreams(H2_MAX_CONCURRENT_STREAMS + 1));
    const last = 1 + 2 * H2_MAX_CONCURRENT_STREAMS;
    const refused = await frames.next((f) => f.type === FRAME.RST_STREAM && f.streamId === last);
    assert.ok(refused !== undefined);
    assert.equal(errorOf(refused).code, ERROR.REFUSED_STREAM);
    assert.ok(!frames.frames.some((f) => (f.type === FRAME.RST_STREAM && f.streamId < last) || f.type === FRAME.GOAWAY), 'the streams within the limit stay open');
  });

  it(`closes the session of a client that opens more than the ${H2_MAX_CONCURRENT_STREAMS} streams it acknowledged`, async () => {
    const { socket, frames } = await session();
    socket.write(openStreams(H2_MAX_CONCURRENT_STREAMS + 1));
    await goaway(frames);
    await frames.closed;
  });

  it(`resets a stream whose header list exceeds ${H2_MAX_HEADER_LIST_BYTES} bytes; the origin never sees it`, async () => {
    const { socket, frames } = await session();
    const before = origin.seen.length;
    const block = headerBlock([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':authority', authority],
      [':path', '/big'],
      ['x-big', 'a'.repeat(H2_MAX_HEADER_LIST_BYTES)],
    ]);
    // Larger than one frame: HEADERS, then the rest in a CONTINUATION.
    socket.write(Buffer.concat([frame(FRAME.HEADERS, FLAG.END_STREAM, 1, block.subarray(0, 16_000)), frame(FRAME.CONTINUATION, FLAG.END_HEADERS, 1, block.subarray(16_000))]));
    const answer = await frames.next((f) => (f.type === FRAME.RST_STREAM && f.streamId === 1) || f.type === FRAME.GOAWAY || (f.type === FRAME.HEADERS && f.streamId === 1));
    assert.ok(answer !== undefined);
    assert.equal(answer.type, FRAME.RST_STREAM, 'the stream is reset, the session lives on');
    assert.equal(errorOf(answer).code, ERROR.ENHANCE_YOUR_CALM);
    assert.equal(origin.seen.length, before);
  });

  for (const [name, limit, attack] of [
    ['SETTINGS', H2_MAX_SETTINGS_BETWEEN_REQUESTS, 'settings-flood'],
    ['PING', H2_MAX_PINGS_BETWEEN_REQUESTS, 'ping-flood'],
  ] as const) {
    it(`closes a session that sends more than ${limit} ${name} frames between requests (GOAWAY ENHANCE_YOUR_CALM ${attack})`, async () => {
      const counted = `boundary_http2_flood_closed_total{flood="${attack}"}`;
      const closedBefore = await metric(b, counted);
      const { socket, frames } = await session();
      const flood: Buffer[] = [];
      for (let i = 0; i <= limit + 10; i++) flood.push(name === 'PING' ? ping(i) : settings([[4, 65_535 + i]]));
      socket.write(Buffer.concat(flood));
      const away = await goaway(frames);
      assert.equal(away.code, ERROR.ENHANCE_YOUR_CALM);
      assert.equal(away.debug, attack);
      await frames.closed;
      const finding = await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped?.finding === `h2-${attack}`);
      assert.equal(finding.dst_endpoint?.domain, 'plain.example.test');
      assert.equal(await metric(b, counted), closedBefore + 1, 'the closed session is counted by its flood');
    });
  }

  it(`closes a session that cancels more than ${H2_MAX_RESET_DEBT} streams it opened (rapid reset)`, async () => {
    const { socket, frames } = await session();
    const flood: Buffer[] = [];
    for (let i = 0; i <= H2_MAX_RESET_DEBT + 10; i++) {
      const id = 1 + 2 * i;
      flood.push(requestHeaders(id, { authority, path: '/upload', method: 'POST', endStream: false }), rstStream(id, ERROR.CANCEL));
    }
    socket.write(Buffer.concat(flood));
    const away = await goaway(frames);
    assert.equal(away.code, ERROR.ENHANCE_YOUR_CALM);
    assert.equal(away.debug, 'reset-flood');
    await frames.closed;
  });

  it(`closes a session whose header block runs past ${H2_MAX_CONTINUATION_FRAMES} CONTINUATION frames`, async () => {
    const { socket, frames } = await session();
    const flood: Buffer[] = [frame(FRAME.HEADERS, FLAG.END_STREAM, 1, headerBlock([[':method', 'GET'], [':scheme', 'http'], [':authority', authority], [':path', '/c']]))];
    for (let i = 0; i < 1_000; i++) flood.push(frame(FRAME.CONTINUATION, 0, 1, headerBlock([[`x-c${i}`, 'v']])));
    socket.write(Buffer.concat(flood));
    const before = origin.seen.length;
    await goaway(frames);
    await frames.closed;
    assert.equal(origin.seen.length, before, 'no request came of the header block');
  });

  it(`closes a session that sends more than ${H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS} empty DATA frames between requests (CVE-2019-9518)`, async () => {
    const { socket, frames } = await session();
    const flood: Buffer[] = [requestHeaders(1, { authority, path: '/upload', method: 'POST', endStream: false })];
    for (let i = 0; i <= H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS + 10; i++) flood.push(frame(FRAME.DATA, 0, 1));
    socket.write(Buffer.concat(flood));
    const away = await goaway(frames);
    assert.equal(away.code, ERROR.ENHANCE_YOUR_CALM);
    assert.equal(away.debug, 'empty-frame-flood');
    await frames.closed;
  });

  it(`closes a session that opens more than ${H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS} malformed streams between requests`, async () => {
    const { socket, frames } = await session();
    const before = origin.seen.length;
    const flood: Buffer[] = [];
    // Upper-case field names: each stream is malformed (RFC 9113 §8.2.1) and reset, and never a request.
    for (let i = 0; i <= H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS + 10; i++) {
      flood.push(frame(FRAME.HEADERS, FLAG.END_STREAM | FLAG.END_HEADERS, 1 + 2 * i, headerBlock([[':method', 'GET'], [':scheme', 'http'], [':authority', authority], [':path', '/m'], ['X-Upper', 'v']])));
    }
    socket.write(Buffer.concat(flood));
    const away = await goaway(frames);
    assert.equal(away.code, ERROR.ENHANCE_YOUR_CALM);
    assert.equal(away.debug, 'rejected-stream-flood');
    assert.ok(frames.frames.some((f) => f.type === FRAME.RST_STREAM && f.streamId === 1 && errorOf(f).code === ERROR.PROTOCOL_ERROR), 'each malformed stream was reset PROTOCOL_ERROR');
    await frames.closed;
    assert.equal(origin.seen.length, before);
  });
});
