// Liveness timeout rows (docs/destinations.md#denial-responses RX-03, RX-05, RX-11) through the real proxy on
// loopback: slowloris against the headers timeout, idle CONNECT tunnels, and dial refused vs dial timeout vs
// reset. Every row asserts what the client sees and the event or metric that records it.
//
// These rows run on the wall clock, on purpose. The timeouts under test have no injectable timers: the headers
// timeout is Node's http server (headersTimeout, swept once a second), the idle timeout is socket.setTimeout on
// the tunnel's sockets, and the dial timeout is a plain setTimeout in src/proxy/dial.ts, reached through the
// CONNECT and forward paths. So the limits are set short through config, each test waits on the event that
// ends the row (the close, the empty answer, the 502), never on time, and the elapsed time is then checked
// against the limit: no earlier than the limit (less TIMER_EARLY_SLACK_MS). That the short headers timeout, not
// the default, closed the slowloris is told by the count of trickle ticks that ran first, not by a time.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createNetServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { netDial } from '../../src/chain/dial.js';
import { CONNECTIONS_CHECK_INTERVAL_MS, HEADERS_TIMEOUT_MS as DEFAULT_HEADERS_TIMEOUT_MS } from '../../src/proxy/limits.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { echo, echoRoundTrip, head, l4Policy, l7Policy, metric, NAMES, rawClient, SUITE_TIMEOUT_MS, type TcpOrigin, tcpOrigin } from '../harness/liveness.js';
import { json, openTunnel, rawExchange, readAll, sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

/**
 * Short limits passed through config, so the timeout rows finish quickly; long enough that a host so loaded it
 * stalls this process for a second neither idles out the busy tunnel between two echoes nor times out a real dial.
 */
const HEADERS_TIMEOUT_MS = 300;
const TUNNEL_IDLE_MS = 2_000;
const CONNECT_TIMEOUT_MS = 2_000;
/**
 * The slowloris sends one byte per tick of TRICKLE_INTERVAL_MS, this many at most: ticks for half the default
 * headers timeout. The short headers timeout, seen on node's sweep, closes the socket within HEADERS_TIMEOUT_MS +
 * CONNECTIONS_CHECK_INTERVAL_MS of this process's loop time, room for a few dozen ticks; the default would let all
 * of them run. A tick never comes sooner than its interval, and a stalled process runs fewer of them, not more, so
 * the count tells the two apart on any host.
 */
const TRICKLE_INTERVAL_MS = 20;
const MAX_TRICKLE_BYTES = DEFAULT_HEADERS_TIMEOUT_MS / 2 / TRICKLE_INTERVAL_MS;
/** libuv starts timers from its cached loop time, which can lag performance.now() by a few ms: a timer may fire that early here. */
const TIMER_EARLY_SLACK_MS = 20;
/** Bounds for loops that wait on the other side: never more iterations than this. */
const MAX_ROUNDS = 100_000;

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createNetServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('RX-03: slowloris with a short headers timeout', { timeout: SUITE_TIMEOUT_MS }, () => {
  it('closes a trickled head at the headers timeout with no 200, frees its slot and counts it', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: `version: 1\nnetwork_policies:\n${l7Policy('api.example.test', [origin.port])}`, limits: { headersTimeoutMs: HEADERS_TIMEOUT_MS, maxConnections: 1 } });
    let trickle: NodeJS.Timeout | undefined;
    t.after(async () => {
      clearInterval(trickle);
      await b.close();
      await origin.close();
    });
    // The count only tells the short timeout from the default if the short one (with its sweep) fits well inside it.
    assert.ok(2 * (HEADERS_TIMEOUT_MS + CONNECTIONS_CHECK_INTERVAL_MS) < MAX_TRICKLE_BYTES * TRICKLE_INTERVAL_MS);
    const socket = await rawClient(b.proxyPort);
    const started = performance.now();
    socket.write(`GET http://api.example.test:${origin.port}/slow HTTP/1.1\r\nHost: api.example.test\r\nX-Trickle: `);
    // Pacing, not waiting: the slow trickle is the attack under test. One byte per tick of a short interval:
    // the head never completes; bounded by the count. The test waits on the close (readAll), not on time.
    let sent = 0;
    trickle = setInterval(() => {
      if (socket.destroyed || sent >= MAX_TRICKLE_BYTES) clearInterval(trickle);
      else {
        sent++;
        socket.write('a');
      }
    }, TRICKLE_INTERVAL_MS);
    const text = await readAll(socket);
    const elapsed = performance.now() - started;
    clearInterval(trickle);
    assert.match(text, /^HTTP\/1\.1 408/);
    assert.equal(text.includes(' 200 '), false);
    assert.ok(elapsed >= HEADERS_TIMEOUT_MS - TIMER_EARLY_SLACK_MS, `closed after ${elapsed} ms`);
    assert.ok(sent < MAX_TRICKLE_BYTES, `closed after ${elapsed} ms and ${sent} ticks of the trickle: not by the short headers timeout`);
    assert.equal(origin.seen.length, 0);
    assert.equal(await metric(b, 'boundary_proxy_client_errors_total{reason="timeout"}'), 1);
    // maxConnections is 1: this succeeds only because the slowloris slot was given back.
    const next = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/next` });
    assert.equal(next.status, 200);
    await b.log.waitFor((e) => e.class_uid === 4002 && e.action === 'Allowed' && e.http_request?.url.path === '/next');
  });
});

describe('RX-05: idle CONNECT tunnels', { timeout: SUITE_TIMEOUT_MS }, () => {
  let echoOrigin: TcpOrigin;
  let plain: Origin;
  let b: RunningBoundary;
  before(async () => {
    echoOrigin = await tcpOrigin(echo);
    plain = await httpOrigin();
    b = await startBoundary({
      names: NAMES,
      limits: { tunnelIdleTimeoutMs: TUNNEL_IDLE_MS },
      policy: `version: 1\nnetwork_policies:\n${l7Policy('api.example.test', [plain.port])}${l4Policy('raw', 'raw.example.test', [echoOrigin.port])}`,
    });
  });
  after(async () => {
    await b?.close();
    await Promise.all([echoOrigin?.close(), plain?.close()]);
  });

  it('closes a silent raw tunnel at the idle timeout and logs it, while a tunnel with traffic survives', async () => {
    // The busy tunnel first, its traffic under way before the quiet one opens. The clock starts before the quiet
    // CONNECT: its idle timer starts later, so the time measured is never shorter than its idle, however slow the host.
    const busy = await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`);
    assert.equal(busy.status, 200);
    assert.equal(await echoRoundTrip(busy.socket, 'first'), 'first');
    const started = performance.now();
    const quiet = await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`);
    assert.equal(quiet.status, 200);
    const quietClosed = once(quiet.socket, 'close');
    let quietGone = false;
    void quietClosed.then(() => {
      quietGone = true;
    });
    // Ping-pong on the busy tunnel until the quiet one is gone: each round trip waits on its echo.
    let rounds = 0;
    while (!quietGone && rounds < MAX_ROUNDS) {
      assert.equal(await echoRoundTrip(busy.socket, `ping ${rounds}`), `ping ${rounds}`);
      rounds++;
    }
    await quietClosed;
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= TUNNEL_IDLE_MS - TIMER_EARLY_SLACK_MS, `closed after ${elapsed} ms`);
    assert.ok(rounds > 0, 'the busy tunnel had traffic while the quiet one idled');
    assert.equal(await echoRoundTrip(busy.socket, 'still open'), 'still open', 'the tunnel with traffic outlived the idle timeout');
    const event = await b.log.waitFor((e) => e.class_uid === 4001 && e.activity_name === 'Close' && e.unmapped.reason_code === 'idle-timeout');
    assert.equal(event.dst_endpoint?.port, echoOrigin.port);
    busy.socket.destroy();
  });

  it('closes an inspected tunnel whose client never speaks at the idle timeout, and logs it', async () => {
    const before = b.log.events().length;
    const started = performance.now();
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
    assert.equal(tunnel.status, 200);
    await once(tunnel.socket, 'close');
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= TUNNEL_IDLE_MS - TIMER_EARLY_SLACK_MS, `closed after ${elapsed} ms`);
    await b.log.waitFor((e) => e.activity_name === 'Close' && e.unmapped.reason_code === 'idle-timeout' && e.dst_endpoint?.port === plain.port);
    assert.ok(b.log.events().length > before);
  });
});

describe('RX-11: dial refused vs dial timeout vs reset', { timeout: SUITE_TIMEOUT_MS }, () => {
  let refusedPort = 0;
  let hangPort = 0;
  let resetOrigin: TcpOrigin;
  let b: RunningBoundary;
  before(async () => {
    refusedPort = await closedPort();
    hangPort = await closedPort();
    // Accepts, then resets as soon as the client's first bytes arrive.
    resetOrigin = await tcpOrigin((socket) => socket.once('data', () => socket.resetAndDestroy()));
    const ports = [refusedPort, hangPort, resetOrigin.port];
    b = await startBoundary({
      names: NAMES,
      limits: { connectTimeoutMs: CONNECT_TIMEOUT_MS },
      // The hang port is never dialled for real: the injected dial just never connects.
      dial: (target) => (target.port === hangPort ? new Promise<Socket>(() => undefined) : netDial(target)),
      policy: `version: 1\nnetwork_policies:\n${l4Policy('raw', 'raw.example.test', ports)}`,
    });
  });
  after(async () => {
    await b?.close();
    await resetOrigin?.close();
  });

  const connectFail = (port: number) => (e: { class_uid: number; activity_name: string; dst_endpoint?: { port?: number }; unmapped: Record<string, unknown> }) =>
    e.class_uid === 4001 && e.activity_name === 'Fail' && e.dst_endpoint?.port === port;

  it('CONNECT: refused answers 502 naming the refusal and logs dial_failure refused', async () => {
    const raw = await rawExchange(b.proxyPort, head(`CONNECT raw.example.test:${refusedPort} HTTP/1.1\nHost: x`));
    assert.match(raw, /^HTTP\/1\.1 502 Bad Gateway: upstream raw\.example\.test:\d+ refused the connection\r\n/);
    assert.equal(JSON.parse(raw.slice(raw.indexOf('{'))).dial_failure, 'refused');
    const event = await b.log.waitFor(connectFail(refusedPort));
    assert.equal(event.unmapped.reason_code, 'dial-failed');
    assert.equal(event.unmapped.dial_failure, 'refused');
  });

  it('CONNECT: a dial that never connects is given up at connectTimeoutMs, answered 504 and logged as dial_failure timeout', async () => {
    const started = performance.now();
    const raw = await rawExchange(b.proxyPort, head(`CONNECT raw.example.test:${hangPort} HTTP/1.1\nHost: x`));
    const elapsed = performance.now() - started;
    assert.match(raw, /^HTTP\/1\.1 504 Gateway Timeout: upstream raw\.example\.test:\d+ did not answer in time\r\n/);
    assert.ok(elapsed >= CONNECT_TIMEOUT_MS - TIMER_EARLY_SLACK_MS, `gave up after ${elapsed} ms`);
    const event = await b.log.waitFor(connectFail(hangPort));
    assert.equal(event.unmapped.reason_code, 'dial-failed');
    assert.equal(event.unmapped.dial_failure, 'timeout');
  });

  it('CONNECT: an upstream that resets after accepting is a tunnel reset, not a dial failure', async () => {
    const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${resetOrigin.port}`);
    assert.equal(tunnel.status, 200);
    const closed = once(tunnel.socket, 'close');
    tunnel.socket.write('hello');
    await closed;
    const event = await b.log.waitFor((e) => e.activity_name === 'Reset' && e.dst_endpoint?.port === resetOrigin.port);
    assert.equal(event.unmapped.reason_code, 'upstream-reset');
    assert.equal(b.log.events().some(connectFail(resetOrigin.port)), false);
  });

  for (const [name, port, reason, detail, failure, status] of [
    ['refused', () => refusedPort, 'dial-failed', /ECONNREFUSED/, 'refused', 502],
    ['timeout', () => hangPort, 'dial-failed', /no answer in/, 'timeout', 504],
    ['reset', () => resetOrigin.port, 'upstream-failed', /./, undefined, 502],
  ] as const) {
    it(`forward: ${name} answers ${status} upstream_unreachable and logs reason ${reason}`, async () => {
      const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://raw.example.test:${port()}/x` });
      assert.equal(response.status, status);
      assert.equal(json(response).error, 'upstream_unreachable');
      const event = await b.log.waitFor((e) => e.unmapped.adapter === 'forward' && e.activity_name === 'Fail' && e.dst_endpoint?.port === port());
      assert.equal(event.unmapped.reason_code, reason);
      assert.equal(event.unmapped.dial_failure, failure);
      assert.match(String(event.unmapped.reason), detail);
    });
  }
});
