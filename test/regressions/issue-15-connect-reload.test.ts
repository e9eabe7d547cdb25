// Regression of issue 15, "Holds against a hostile workload" (`issues show 15`), soak finding: an allowed CONNECT
// (or captured connection) was refused 403 policy-changed whenever any reload landed while it resolved or dialled,
// so a workload reloading an unrelated part of its policy every second saw random refusals. The new generation now
// decides again, as it does for open tunnels, and only a changed decision refuses.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import type { DialTarget } from '../../src/chain/dial.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { echo, echoRoundTrip, tcpOrigin } from '../harness/liveness.js';
import { openTunnel } from '../harness/proxy-client.js';

const run = promisify(execFile);

const policy = (host: string, port: number, extra = '', l7 = ''): string => `version: 1
network_policies:
  t:
    endpoints:
      - { host: ${host}, port: ${port}${l7} }
${extra}    binaries: [{ path: "/**" }]
`;
const INSPECTED = ', protocol: rest, enforcement: enforce, rules: [{ allow: { method: GET, path: "/**" } }]';
const UNRELATED = '      - { host: unrelated.example.test, port: 9 }\n';

/**
 * A boundary whose first upstream dial waits for a reload to `next` to be applied before connecting: the reload
 * lands deterministically between the decision and the tunnel opening.
 */
async function reloadWhileDialling(t: TestContext, initial: (port: number) => string, next: (port: number) => string): Promise<{ b: RunningBoundary; port: number }> {
  const origin = await tcpOrigin(echo);
  let pending: (() => Promise<void>) | undefined;
  const b = await startBoundary({
    policy: initial(origin.port),
    names: { 'api.example.test': ['127.0.0.1'] },
    dial: async (target: DialTarget) => {
      const reload = pending;
      pending = undefined;
      await reload?.();
      const socket = connect({ host: '127.0.0.1', port: target.port });
      await once(socket, 'connect');
      return socket;
    },
  });
  t.after(async () => {
    await b.close();
    await origin.close();
  });
  pending = async () => {
    const loaded = b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped?.policy_generation === 2);
    await b.writePolicy(next(origin.port));
    await loaded;
  };
  return { b, port: origin.port };
}

async function tunnelThrough(t: TestContext, b: RunningBoundary, authority: string): Promise<{ status: number; head: string; socket: Socket }> {
  const tunnel = await openTunnel(b.proxyPort, authority);
  t.after(() => tunnel.socket.destroy());
  return tunnel;
}

describe('issue 15: a reload while a connection opens', () => {
  it('an allowed CONNECT survives an unrelated reload that lands while it dials', async (t) => {
    const { b, port } = await reloadWhileDialling(
      t,
      (p) => policy('api.example.test', p),
      (p) => policy('api.example.test', p, UNRELATED),
    );
    const tunnel = await tunnelThrough(t, b, `api.example.test:${port}`);
    assert.equal(tunnel.status, 200, tunnel.head);
    assert.equal(await echoRoundTrip(tunnel.socket, 'still open\n'), 'still open\n');
  });

  it('a CONNECT is still refused policy-changed when the reload denies it', async (t) => {
    const { b, port } = await reloadWhileDialling(
      t,
      (p) => policy('api.example.test', p),
      (p) => policy('other.example.test', p),
    );
    const tunnel = await tunnelThrough(t, b, `api.example.test:${port}`);
    assert.equal(tunnel.status, 403, tunnel.head);
    const event = await b.log.waitFor((e) => e.class_uid === 4001 && e.action_id === 2 && e.unmapped?.reason_code === 'policy-changed');
    assert.equal(event.unmapped?.policy_generation, 1);
  });

  it('a CONNECT is refused policy-changed when the reload makes its endpoint inspected', async (t) => {
    const { b, port } = await reloadWhileDialling(
      t,
      (p) => policy('api.example.test', p),
      (p) => policy('api.example.test', p, '', INSPECTED),
    );
    const tunnel = await tunnelThrough(t, b, `api.example.test:${port}`);
    assert.equal(tunnel.status, 403, tunnel.head);
  });

  it('a captured connection survives an unrelated reload that lands while it dials', async (t) => {
    const { b, port } = await reloadWhileDialling(
      t,
      (p) => policy('api.example.test', p),
      (p) => policy('api.example.test', p, UNRELATED),
    );
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+tries=1', '+time=3', '+short', 'api.example.test', 'A']);
    const synthetic = stdout.trim();
    const socket = connect({ host: synthetic, port });
    t.after(() => socket.destroy());
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    assert.equal(await echoRoundTrip(socket, 'captured\n'), 'captured\n');
    const open = await b.log.waitFor((e) => e.status_detail !== undefined && e.unmapped?.normalized_domain === 'api.example.test');
    assert.equal(open.status_detail, 'transparent_tcp_allowed');
  });
});
