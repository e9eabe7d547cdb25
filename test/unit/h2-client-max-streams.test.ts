// How many streams the upstream HTTP/2 client (src/http2/h2-client.ts and its session) opens at once on one
// connection, against a raw-frame origin over loopback: H2_UPSTREAM_ASSUMED_MAX_STREAMS until the origin's first
// SETTINGS, then what that SETTINGS names, or H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS when it names nothing (RFC 9113:
// no limit); a later SETTINGS that leaves the parameter out changes nothing.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { Flag, FrameType, Setting, settingsFrame } from '../../src/http2/frames.js';
import { H2_UPSTREAM_ASSUMED_MAX_STREAMS, H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS } from '../../src/http2/h2-session.js';
import { complete, type Recorded, send, setup } from '../harness/h2-wire-client.js';
import type { WireConnection } from '../harness/h2-wire-origin.js';

const SUITE = { timeout: 30_000 };
/** More requests than the assumption before SETTINGS lets open at once. */
const CALLS = H2_UPSTREAM_ASSUMED_MAX_STREAMS + 50;

/** Request header blocks the origin has read so far. */
function opened(conn: WireConnection): number {
  return conn.seen(FrameType.HEADERS).length;
}

/** Header blocks the client wrote before its ACK of the origin's SETTINGS: streams opened before it applied them. */
function openedBeforeAck(conn: WireConnection): number {
  const ack = conn.frames.items.findIndex((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0);
  assert.ok(ack >= 0, 'the client ACKed the SETTINGS');
  return conn.frames.items.slice(0, ack).filter((f) => f.type === FrameType.HEADERS).length;
}

function acks(conn: WireConnection): number {
  return conn.seen(FrameType.SETTINGS).filter((f) => (f.flags & Flag.ACK) !== 0).length;
}

/** One request opens the connection, the origin's SETTINGS names `limit`, then `more` requests follow: the first
 *  `limit` are open. */
async function limited(t: TestContext, limit: number, more: number): Promise<{ conn: WireConnection; calls: Recorded[] }> {
  const { origin, client } = await setup(t);
  const calls = [send(client, '/first')];
  const conn = await origin.connection(0);
  await conn.handshake([[Setting.MAX_CONCURRENT_STREAMS, limit]]);
  await conn.request(1);
  for (let i = 1; i < more; i++) calls.push(send(client, `/s${i}`));
  await conn.request(2 * limit - 1);
  return { conn, calls };
}

describe('h2-client: concurrent streams on one connection', SUITE, () => {
  it(`opens ${H2_UPSTREAM_ASSUMED_MAX_STREAMS} before the first SETTINGS, and every one (up to ${H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS}) once it names no limit`, async (t) => {
    assert.ok(CALLS <= H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS);
    const { origin, client } = await setup(t);
    const calls = Array.from({ length: CALLS }, (_, i) => send(client, `/s${i}`));
    const conn = await origin.connection(0);
    await conn.handshake([[Setting.INITIAL_WINDOW_SIZE, 65_535]]);
    assert.equal(openedBeforeAck(conn), H2_UPSTREAM_ASSUMED_MAX_STREAMS);
    await conn.request(2 * CALLS - 1);
    assert.equal(opened(conn), CALLS, 'every request open at once, none answered yet');
    assert.equal(origin.accepted(), 1);
    conn.write(...calls.flatMap((_, i) => complete(2 * i + 1)));
    for (const call of calls) assert.equal((await call.settled()).kind, 'end');
  });

  it('opens as many as the SETTINGS names, and the next one when a stream ends', async (t) => {
    const limit = 10;
    const { conn, calls } = await limited(t, limit, 2 * limit);
    await conn.sync();
    assert.equal(opened(conn), limit);
    conn.write(...complete(1));
    await conn.request(2 * limit + 1);
    await conn.sync();
    assert.equal(opened(conn), limit + 1);
    assert.equal((await calls[0]?.settled())?.kind, 'end');
  });

  it('keeps a named limit when a later SETTINGS leaves it out', async (t) => {
    const limit = 10;
    const { conn } = await limited(t, limit, 2 * limit);
    conn.write(settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 65_535]]));
    await conn.frame((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0 && acks(conn) === 2, 'the ACK of the second SETTINGS');
    await conn.sync();
    assert.equal(opened(conn), limit);
  });
});
