// Regression of issue 15, "Holds against a hostile workload" (`issues show 15`), soak finding: `boundary run` exited
// about 10 s after logging "drained" on SIGTERM when an inspected WebSocket relay's client had left without a close
// frame. The client's FIN was passed upstream; the origin never answered it with its own, so at shutdown the client
// side closed (the drain saw nothing left) while the upstream socket stayed half-open for TUNNEL_LINGER_MS and kept
// the process alive. This runs the real CLI child and waits on its 'exit' with a deadline of the linger's length,
// started before the client leaves.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { EXIT_OK } from '../../src/app/cli/run.js';
import { TUNNEL_LINGER_MS } from '../../src/proxy/tunnel.js';
import { spawnBoundaryCli } from '../harness/cli-boundary.js';
import { withStateDir } from '../harness/state-dir.js';
import { startDnsFixture } from '../harness/dns-upstream.js';
import { openWebSocket, wsOrigin } from '../harness/ws.js';
import { withinDeadline } from '../harness/waiters.js';

const HOST = 'ws.example.test';
/**
 * The bug held the process for the whole linger, which the relay arms once the client's FIN reaches it (or at the
 * shutdown after it): a timer of the linger's length started before the client leaves always fires before such an
 * exit. So the exit is held to the linger itself, the product's own constant, not to a guess of how fast a loaded
 * host exits.
 */
const EXIT_DEADLINE_MS = TUNNEL_LINGER_MS;

type Exit = [number | null, NodeJS.Signals | null];

describe('issue 15: SIGTERM after a WebSocket client left without a close frame', () => {
  it('exits 0 before the linger could end it, with no relay socket left behind', async (t) => {
    // The harness origin never FINs back on an upgraded socket: a server that ignores a peer's half-close.
    const origin = await wsOrigin();
    t.after(() => origin.close());
    const dns = await startDnsFixture({ [HOST]: { a: ['127.0.0.1'], ttl: 300 } });
    t.after(() => dns.close());
    // dir holds boundary's --state-dir: removed after the hook that kills boundary.
    await withStateDir(t, 'boundary-issue-15-ws-', async (dir) => {
      await writeFile(
        join(dir, 'policy.yaml'),
        `version: 1
network_policies:
  ws:
    endpoints:
      - host: ${HOST}
        port: ${origin.port}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/socket" }
          - allow: { method: WEBSOCKET_TEXT, path: "/socket" }
    binaries: [{ path: "/**" }]
`,
      );
      // prettier-ignore
      const cli = spawnBoundaryCli([
        '--policy', join(dir, 'policy.yaml'),
        '--proxy-listen', '127.0.0.1:0',
        '--admin-listen', '127.0.0.1:0',
        '--dns-listen', '127.0.0.1:0',
        '--upstream-dns', `${dns.host}:${dns.port}`,
        '--unsafe-allow-loopback-upstream',
        '--state-dir', join(dir, 'state'),
      ]);
      // SIGKILL, not SIGTERM: on the bug a SIGTERM is what takes the linger to end it.
      t.after(() => (cli.child.exitCode === null && cli.child.signalCode === null ? cli.kill() : undefined));
      const listening = await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
      const proxyPort = Number(/:(\d+)$/.exec(listening.ocsf?.message ?? '')?.[1]);

      const ws = await openWebSocket({ proxyPort, transport: 'forward', host: HOST, port: origin.port, path: '/socket' });
      assert.equal(ws.status, 101, ws.head);
      ws.client.sendText('x');
      assert.equal((await ws.client.next()).payload.toString(), 'echo:x');
      // The deadline starts before the client leaves, so before any linger the relay could arm.
      const exited = withinDeadline(once(cli.child, 'exit') as Promise<Exit>, 'exit after SIGTERM', EXIT_DEADLINE_MS);
      exited.catch(() => undefined);
      // The client vanishes: a FIN, no close frame. The relay passes the FIN on; the origin keeps its side open.
      const gone = once(ws.client.socket, 'close');
      ws.client.socket.destroy();
      await gone;

      const started = performance.now();
      cli.child.kill('SIGTERM');
      const [code, signal] = await exited;
      t.diagnostic(`exit ${code} ${Math.round(performance.now() - started)} ms after SIGTERM`);
      assert.deepEqual({ code, signal }, { code: EXIT_OK, signal: null }, cli.stderr());
      assert.ok(cli.lines.some((line) => line.ocsf?.status_detail === 'boundary_drained'));
    });
  });
});
