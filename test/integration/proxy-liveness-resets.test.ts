// Liveness rows for connection limits and resets (docs/destinations.md#denial-responses RX-08, RX-10) through
// the real proxy on loopback: connections above maxConnections get a 503 while open tunnels keep working, and a
// reset on either side of a tunnel closes the other and leaks nothing. Every row asserts what the client sees
// and the event or metric that records it.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { echo, echoRoundTrip, l4Policy, metric, NAMES, rawClient, SUITE_TIMEOUT_MS, type TcpOrigin, tcpOrigin } from '../harness/liveness.js';
import { openTunnel, readAll, statusOf } from '../harness/proxy-client.js';

describe('RX-08: concurrent connections above the limit', { timeout: SUITE_TIMEOUT_MS }, () => {
  it('answers 503 with an event and a metric, and the open tunnels keep working', async (t) => {
    const echoOrigin = await tcpOrigin(echo);
    const b = await startBoundary({ names: NAMES, limits: { maxConnections: 2, maxConnectionsPerSourcePercent: 100 }, policy: `version: 1\nnetwork_policies:\n${l4Policy('raw', 'raw.example.test', [echoOrigin.port])}` });
    t.after(async () => {
      await b.close();
      await echoOrigin.close();
    });
    const open = [await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`), await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`)];
    assert.deepEqual(
      open.map((o) => o.status),
      [200, 200],
    );
    // Refused at accept, before any request is read: read what the proxy says without writing.
    const extra = await readAll(await rawClient(b.proxyPort));
    assert.equal(statusOf(extra), 503);
    assert.ok(extra.includes('too_many_connections'));
    await b.log.waitFor((e) => e.activity_name === 'Refuse' && e.unmapped.reason_code === 'too-many-connections');
    assert.equal(await metric(b, 'boundary_proxy_refused_connections_total{reason="too-many-connections"}'), 1);
    for (const [i, o] of open.entries()) assert.equal(await echoRoundTrip(o.socket, `tunnel ${i}`), `tunnel ${i}`);
    for (const o of open) o.socket.destroy();
  });
});

describe('RX-10: a reset in the middle of a tunnel', { timeout: SUITE_TIMEOUT_MS }, () => {
  let echoOrigin: TcpOrigin;
  let b: RunningBoundary;
  before(async () => {
    echoOrigin = await tcpOrigin(echo);
    b = await startBoundary({ names: NAMES, policy: `version: 1\nnetwork_policies:\n${l4Policy('raw', 'raw.example.test', [echoOrigin.port])}` });
  });
  after(async () => {
    await b?.close();
    await echoOrigin?.close();
  });

  async function established(): Promise<{ client: Socket; upstream: Socket }> {
    const accepted = echoOrigin.next();
    const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${echoOrigin.port}`);
    assert.equal(tunnel.status, 200);
    assert.equal(await echoRoundTrip(tunnel.socket, 'hello'), 'hello');
    return { client: tunnel.socket, upstream: await accepted };
  }

  async function assertNoLeaks(): Promise<void> {
    assert.equal(await metric(b, 'boundary_proxy_connections'), 0, 'client connections back to zero');
    assert.equal(await metric(b, 'boundary_proxy_tunnels'), 0, 'tunnels back to zero');
  }

  it('closes the client side when upstream resets, logs NET:RESET upstream-reset, and leaks nothing', async () => {
    const { client, upstream } = await established();
    const clientClosed = once(client, 'close');
    upstream.resetAndDestroy();
    await clientClosed;
    const event = await b.log.waitFor((e) => e.activity_name === 'Reset' && e.unmapped.reason_code === 'upstream-reset');
    assert.equal(event.dst_endpoint?.port, echoOrigin.port);
    await assertNoLeaks();
  });

  it('closes the upstream side when the client resets, logs NET:RESET client-reset, and leaks nothing', async () => {
    const { client, upstream } = await established();
    const upstreamClosed = once(upstream, 'close');
    client.resetAndDestroy();
    await upstreamClosed;
    await b.log.waitFor((e) => e.activity_name === 'Reset' && e.unmapped.reason_code === 'client-reset');
    await assertNoLeaks();
  });
});
