// Regression of issue 28, "Shared upstream HTTP/2 session, head-of-line" (`issues show 28`): one client tunnel that
// opened 100 streams with a zero receive window and never read took every stream slot of the session boundary shares
// between all tunnels to that origin, and every other tunnel's request to it waited for the 300 s idle timeout. Now a
// tunnel holds at most its share of a shared session (its further streams go on a session of its own; so do any
// tunnel's once the shared session is full and a share of it is held by clients that do not read), and an answer
// that moves nothing while it waits on the client is reset ENHANCE_YOUR_CALM after limits.h2StallTimeoutMs.
// The origin is node:http2, announcing SETTINGS_MAX_CONCURRENT_STREAMS 100 as most origins do (one that announces
// none is taken at H2_UPSTREAM_UNANNOUNCED_MAX_STREAMS).

import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { connect as h2Connect, createServer, type Http2Server } from 'node:http2';
import type { Socket } from 'node:net';
import { after, before, describe, it, type TestContext } from 'node:test';
import { H2_UPSTREAM_ASSUMED_MAX_STREAMS } from '../../src/http2/h2-session.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { ERROR, errorOf, FLAG, FRAME, frame, PREFACE, readFrames, requestHeaders, settings } from '../harness/h2-frames.js';
import { metric } from '../harness/liveness.js';
import { openTunnel } from '../harness/proxy-client.js';
import { listenTracked } from '../harness/servers.js';
import { DEADLINE_MS, withinDeadline } from '../harness/waiters.js';

/** The origin's SETTINGS_MAX_CONCURRENT_STREAMS. */
const ORIGIN_MAX_STREAMS = H2_UPSTREAM_ASSUMED_MAX_STREAMS;
/** The hostile client's streams: as many as the origin takes at once. */
const HOSTILE_STREAMS = ORIGIN_MAX_STREAMS;
/** Far larger than the windows boundary holds per stream (one toward the origin, one queued for the client). */
const BIG_BYTES = 1024 * 1024;
const CHUNK_BYTES = 16_384;
/** The other client's requests per measurement, one at a time: p90 is then the twenty-first slowest. */
const SAMPLES = 200;
/**
 * The other client's p90 under attack may be this many times its p90 alone, measured in the same run. Not the p99:
 * two or three of 200 requests on a loaded host land on a collection or a scheduler stall of a few ms in either
 * phase, so the p99 compares those; starving the client would slow every request.
 */
const P90_RATIO = 2;
/** Measurements (alone, then under attack) before the ratio counts as failed: a loaded machine has slow spells. */
const ATTEMPTS = 3;
/** limits.h2StallTimeoutMs of the boundary whose stalled streams are watched being released. */
const SHORT_STALL_MS = 1_000;
/** Scrapes of the held-streams gauge while the hostile streams' answers fill boundary's queues. */
const HELD_POLLS = 500;
/** SETTINGS_INITIAL_WINDOW_SIZE. */
const INITIAL_WINDOW = 0x4;

/** A node:http2 origin: /big answers BIG_BYTES, anything else a few bytes; counts its streams open now. */
interface BigOrigin {
  readonly port: number;
  /** Resolves once `test(open streams)` holds (checked now and at each stream's open and close). */
  until(test: (open: number) => boolean, what: string, ms?: number): Promise<void>;
  close(): Promise<void>;
}

async function bigOrigin(): Promise<BigOrigin> {
  const server: Http2Server = createServer({ settings: { maxConcurrentStreams: ORIGIN_MAX_STREAMS } });
  const changes = new EventEmitter();
  let open = 0;
  const chunk = Buffer.alloc(CHUNK_BYTES, 'b');
  server.on('stream', (stream, headers) => {
    open++;
    changes.emit('change');
    stream.on('error', () => undefined);
    stream.once('close', () => {
      open--;
      changes.emit('change');
    });
    stream.respond({ ':status': 200 });
    if (headers[':path'] !== '/big') {
      stream.end('small');
      return;
    }
    // Written as the stream drains: node:http2 resets streams past its session memory (10 MB) otherwise.
    let sent = 0;
    const more = (): void => {
      while (sent < BIG_BYTES && !stream.destroyed) {
        sent += CHUNK_BYTES;
        if (!stream.write(chunk)) return;
      }
      if (sent >= BIG_BYTES) stream.end();
    };
    stream.on('drain', more);
    more();
  });
  const tracked = await listenTracked(server);
  return {
    port: tracked.port,
    until(test, what, ms = DEADLINE_MS) {
      return withinDeadline(
        new Promise<void>((resolve) => {
          const check = (): void => {
            if (!test(open)) return;
            changes.off('change', check);
            resolve();
          };
          changes.on('change', check);
          check();
        }),
        `${what} (origin streams open: ${open})`,
        ms,
      );
    },
    close: () => tracked.close(),
  };
}

function policy(port: number): string {
  return `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
`;
}

/**
 * The hostile client: a tunnel speaking HTTP/2 by prior knowledge with SETTINGS_INITIAL_WINDOW_SIZE 0, HOSTILE_STREAMS
 * requests for /big, and never a WINDOW_UPDATE: no answer can move past its HEADERS.
 */
async function hostile(t: TestContext, b: RunningBoundary, port: number): Promise<{ socket: Socket; frames: ReturnType<typeof readFrames> }> {
  const tunnel = await openTunnel(b.proxyPort, `api.example.test:${port}`);
  assert.equal(tunnel.status, 200);
  t.after(() => tunnel.socket.destroy());
  const frames = readFrames(tunnel.socket);
  const streams = Array.from({ length: HOSTILE_STREAMS }, (_, i) => requestHeaders(1 + 2 * i, { authority: `api.example.test:${port}`, path: '/big' }));
  tunnel.socket.write(Buffer.concat([PREFACE, settings([[INITIAL_WINDOW, 0]]), frame(FRAME.SETTINGS, FLAG.ACK, 0), ...streams]));
  return { socket: tunnel.socket, frames };
}

/** The other client: node:http2 through a tunnel of its own; `latencies()` times `SAMPLES` requests one at a time. */
async function honest(t: TestContext, b: RunningBoundary, port: number): Promise<{ latencies(): Promise<number[]> }> {
  const tunnel = await openTunnel(b.proxyPort, `api.example.test:${port}`);
  assert.equal(tunnel.status, 200);
  const session = h2Connect(`http://api.example.test:${port}`, { createConnection: () => tunnel.socket });
  session.on('error', () => undefined);
  t.after(() => session.destroy());
  const get = async (): Promise<void> => {
    const req = session.request({ ':path': '/small' });
    req.resume();
    const [head] = (await once(req, 'response')) as [Record<string, unknown>];
    assert.equal(head[':status'], 200);
    await once(req, 'end');
  };
  return {
    async latencies() {
      const out: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const started = performance.now();
        await withinDeadline(get(), `the other client's request ${i}`);
        out.push(performance.now() - started);
      }
      return out;
    },
  };
}

/** Resolves once boundary counts `n` upstream streams paused by clients that do not read (a bounded number of scrapes). */
async function heldUpstream(b: RunningBoundary, n: number): Promise<void> {
  let held = 0;
  for (let i = 0; i < HELD_POLLS; i++) {
    held = await metric(b, 'boundary_http2_upstream_held_streams');
    if (held >= n) return;
  }
  assert.fail(`boundary_http2_upstream_held_streams stayed at ${held}, below ${n}`);
}

function p90(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.ceil(sorted.length * 0.9) - 1] as number;
}

describe('issue 28: one client cannot starve others on a shared upstream HTTP/2 session', () => {
  let origin: BigOrigin;
  before(async () => {
    origin = await bigOrigin();
  });
  after(() => origin?.close());

  /**
   * The other client's p90 alone, then with `tunnels` hostile tunnels holding their streams, up to ATTEMPTS times
   * until it is within P90_RATIO; each attack is in place (every hostile stream open at the origin and paused by
   * boundary) before the measurement, and still in place after it.
   */
  async function fairness(t: TestContext, tunnels: number): Promise<void> {
    const b = await startBoundary({ policy: policy(origin.port) });
    t.after(() => b.close());
    const other = await honest(t, b, origin.port);
    await other.latencies();
    const held = HOSTILE_STREAMS * tunnels;
    const seen: string[] = [];
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const alone = p90(await other.latencies());
      const attack: Socket[] = [];
      for (let i = 0; i < tunnels; i++) attack.push((await hostile(t, b, origin.port)).socket);
      await origin.until((open) => open >= held, 'the hostile streams open at the origin');
      await heldUpstream(b, held);
      const attacked = p90(await other.latencies());
      assert.ok((await metric(b, 'boundary_http2_upstream_held_streams')) >= held, 'the hostile streams still held after the measurement');
      seen.push(`attempt ${attempt}: p90 alone ${alone.toFixed(2)} ms, under attack ${attacked.toFixed(2)} ms`);
      t.diagnostic(seen.at(-1) as string);
      for (const socket of attack) socket.destroy();
      await origin.until((open) => open === 0, "the hostile streams cancelled with the hostile's tunnels");
      if (attacked <= P90_RATIO * alone) return;
    }
    assert.fail(`the other client's p90 under attack stayed above ${P90_RATIO}x its p90 alone: ${seen.join('; ')}`);
  }

  it(`another tunnel's requests keep their pace while one client holds ${HOSTILE_STREAMS} streams with a zero window`, async (t) => {
    await fairness(t, 1);
  });

  it('and while two tunnels of that client fill the shared session with stalled streams', async (t) => {
    await fairness(t, 2);
  });

  it('resets streams whose answer stalls on the client past limits.h2StallTimeoutMs, releasing their upstream streams', async (t) => {
    const b = await startBoundary({ policy: policy(origin.port), limits: { h2StallTimeoutMs: SHORT_STALL_MS } });
    t.after(() => b.close());
    const { frames } = await hostile(t, b, origin.port);
    await origin.until((open) => open >= HOSTILE_STREAMS, 'the hostile streams open at the origin');
    const last = 1 + 2 * (HOSTILE_STREAMS - 1);
    const resets = await withinDeadline(
      (async () => {
        for (let id = 1; id <= last; id += 2) await frames.next((f) => f.type === FRAME.RST_STREAM && f.streamId === id);
        return frames.frames.filter((f) => f.type === FRAME.RST_STREAM);
      })(),
      'every stalled stream reset',
      SHORT_STALL_MS + DEADLINE_MS,
    );
    assert.equal(resets.length, HOSTILE_STREAMS);
    assert.ok(resets.every((f) => errorOf(f).code === ERROR.ENHANCE_YOUR_CALM), 'each reset says ENHANCE_YOUR_CALM');
    await origin.until((open) => open === 0, 'the upstream streams released');
    assert.equal(await metric(b, 'boundary_http2_stalled_streams_total'), HOSTILE_STREAMS);
    assert.equal(b.log.lines().filter((line) => line.includes('h2-stalled-stream')).length, 1, 'one finding for the session');
  });
});
