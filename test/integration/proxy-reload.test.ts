import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { startBoundary } from '../harness/boundary.js';
import { openTunnel, sendRequest } from '../harness/proxy-client.js';
import { echoServer, httpOrigin } from '../harness/servers.js';

function policy(echoPort: number, httpPort: number, options: { pass: boolean; apiPath: string }): string {
  return `version: 1
network_policies:
  stays:
    endpoints:
      - { host: other.example.test, port: ${echoPort} }
    binaries: [{ path: "/**" }]
${options.pass ? `  goes:\n    endpoints:\n      - { host: pass.example.test, port: ${echoPort} }\n    binaries: [{ path: "/**" }]\n` : ''}  api:
    endpoints:
      - host: api.example.test
        port: ${httpPort}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "${options.apiPath}" }
    binaries: [{ path: "/**" }]
`;
}

async function echoes(socket: import('node:net').Socket, text: string): Promise<boolean> {
  socket.write(text);
  const [chunk] = (await once(socket, 'data')) as [Buffer];
  return chunk.toString() === text;
}

describe('policy reload', () => {
  it('applies a new generation to new requests and closes only the tunnels whose decision changed', async (t) => {
    const echo = await echoServer();
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: policy(echo.port, origin.port, { pass: true, apiPath: '/v1/**' }), names: { 'pass.example.test': ['127.0.0.1'] } });
    t.after(async () => {
      await b.close();
      await echo.close();
      await origin.close();
    });
    const goes = await openTunnel(b.proxyPort, `pass.example.test:${echo.port}`);
    const stays = await openTunnel(b.proxyPort, `other.example.test:${echo.port}`);
    assert.equal(goes.status, 200);
    assert.equal(stays.status, 200);
    goes.socket.resume();
    stays.socket.resume();
    assert.ok(await echoes(stays.socket, 'before'));
    assert.equal((await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/a` })).status, 200);

    const closed = once(goes.socket, 'close');
    await b.writePolicy(policy(echo.port, origin.port, { pass: false, apiPath: '/v2/**' }));
    const loaded = await b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped.policy_generation === 2);
    assert.ok(b.log.events().some((e) => e.activity_name === 'DETECTED'));
    assert.equal(typeof loaded.unmapped.policy_hash, 'string');
    await closed;
    assert.ok(await echoes(stays.socket, 'after'), 'a tunnel that is still allowed keeps running');
    const metrics = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
    assert.match(metrics, /boundary_proxy_reload_closed_total 1/);

    const v1 = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/a` });
    const v2 = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v2/a` });
    assert.equal(v1.status, 403);
    assert.equal(v2.status, 200);
    const last = b.log.events().reverse().find((e) => e.class_uid === 4002);
    assert.equal(last?.unmapped.policy_generation, 2);
    stays.socket.destroy();
  });

  it('keeps the last good policy when the file becomes invalid, and logs why', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: policy(1, origin.port, { pass: false, apiPath: '/v1/**' }) });
    t.after(async () => {
      await b.close();
      await origin.close();
    });
    await b.writePolicy('version: 1\nnetwork_policies:\n  api:\n    endpoints: []\n');
    const failed = await b.log.waitFor((e) => e.activity_name === 'FAILED');
    assert.equal(failed.unmapped.policy_generation, 1);
    const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/a` });
    assert.equal(response.status, 200);
    assert.equal(b.boundary.store.current().generation, 1);
  });

  it('publishes deny-all on an invalid file with --on-invalid-policy deny-all', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: policy(1, origin.port, { pass: false, apiPath: '/v1/**' }), onInvalidPolicy: 'deny-all' });
    t.after(async () => {
      await b.close();
      await origin.close();
    });
    await b.writePolicy('version: 2\n');
    await b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped.policy_generation === 2);
    const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/a` });
    assert.equal(response.status, 403);
  });

  it('denies everything and reports not ready until a policy is loaded (CP-01)', async (t) => {
    const b = await startBoundary();
    t.after(() => b.close());
    const ready = await fetch(`http://127.0.0.1:${b.adminPort}/readyz`);
    assert.equal(ready.status, 503);
    const tunnel = await openTunnel(b.proxyPort, 'api.example.test:443');
    assert.equal(tunnel.status, 403);
    tunnel.socket.destroy();
    assert.equal(b.dials.length, 0);
  });
});
