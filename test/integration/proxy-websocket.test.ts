import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { startBoundary } from '../harness/boundary.js';
import { readHead } from '../harness/proxy-client.js';
import { httpOrigin } from '../harness/servers.js';

describe('WebSocket upgrades', () => {
  it('relays an allowed upgrade on a websocket endpoint after the 101, and refuses one on a denied path', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({
      policy: `version: 1
network_policies:
  ws:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/socket" }
    binaries: [{ path: "/**" }]
`,
    });
    t.after(async () => {
      await b.close();
      await origin.close();
    });
    const upgrade = (path: string): string =>
      `GET http://api.example.test:${origin.port}${path} HTTP/1.1\r\nHost: api.example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;
    const socket = connect({ host: '127.0.0.1', port: b.proxyPort });
    await once(socket, 'connect');
    socket.write(upgrade('/socket'));
    const answer = await readHead(socket);
    assert.equal(answer.status, 101);
    assert.equal(/x-boundary-/i.test(answer.head), false, 'upstream X-Boundary headers are dropped');
    socket.resume();
    socket.write('ping-frame');
    const [echo] = (await once(socket, 'data')) as [Buffer];
    assert.equal(echo.toString(), 'ping-frame');
    socket.destroy();

    const denied = connect({ host: '127.0.0.1', port: b.proxyPort });
    await once(denied, 'connect');
    denied.write(upgrade('/other'));
    assert.equal((await readHead(denied)).status, 403);
    denied.destroy();
  });
});
