import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { encodeFrame, OPCODES } from '../../src/websocket/ws-frames.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { readHead } from '../harness/proxy-client.js';
import { httpOrigin } from '../harness/servers.js';
import { openWebSocket, type WsClient, type WsOrigin, wsOrigin, type WsTransport } from '../harness/ws.js';

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
    // The endpoint is inspected: frames are parsed. A control frame passes (the origin echoes raw bytes).
    const ping = encodeFrame({ opcode: OPCODES.ping, payload: Buffer.from('ping-frame'), maskKey: Buffer.from([1, 2, 3, 4]) });
    socket.write(ping);
    const [echo] = (await once(socket, 'data')) as [Buffer];
    assert.deepEqual(echo, ping);
    socket.destroy();

    const denied = connect({ host: '127.0.0.1', port: b.proxyPort });
    await once(denied, 'connect');
    denied.write(upgrade('/other'));
    assert.equal((await readHead(denied)).status, 403);
    denied.destroy();
  });
});

// ---------------------------------------------------------------------------------------------------
// Inspected relay after the 101 (docs/destinations.md#websocket-relay, docs/credentials.md#substitution-slots, docs/credentials.md#inspectable-routes-only, docs/destinations.md#reloads, RX-12, CR-18): a real WebSocket
// origin on loopback, over forward HTTP, a plaintext CONNECT tunnel and an intercepted TLS tunnel.

const SECRET = 'ws-secret-value-7f3a';

interface WsPolicy {
  readonly text?: boolean;
  readonly enforcement?: 'enforce' | 'audit';
  readonly rewrite?: boolean;
}

function wsPolicy(port: number, options: WsPolicy = {}): string {
  return `version: 1
network_policies:
  ws:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: websocket
        enforcement: ${options.enforcement ?? 'enforce'}
${options.rewrite === undefined ? '' : `        websocket_credential_rewrite: ${options.rewrite}\n`}        rules:
          - allow: { method: GET, path: "/socket" }
${options.text === false ? '' : '          - allow: { method: WEBSOCKET_TEXT, path: "/socket" }\n'}    binaries: [{ path: "/**" }]
`;
}

interface WsStack {
  readonly b: RunningBoundary;
  readonly origin: WsOrigin;
  open(path?: string): Promise<WsClient>;
}

async function wsStack(t: TestContext, transport: WsTransport, policy: WsPolicy, options: { credentials?: boolean } = {}): Promise<WsStack> {
  const pki = transport === 'connect-tls' ? await makeTestPki() : undefined;
  const origin = await wsOrigin(pki === undefined ? {} : { tls: { ca: pki.ca, names: ['api.example.test'] } });
  let source: FileCredentialSource | undefined;
  let dir: string | undefined;
  if (options.credentials === true) {
    dir = await mkdtemp(join(tmpdir(), 'boundary-ws-'));
    const file = await credentialsFile(
      dir,
      `providers:\n  acme:\n    env:\n      API_TOKEN: "${SECRET}"\n    endpoints:\n      - { host: api.example.test, port: ${origin.port} }\n`,
    );
    source = file.source;
  }
  const b = await startBoundary({
    policy: wsPolicy(origin.port, policy),
    ...(pki === undefined ? {} : { upstreamCaPem: pki.ca.certPem }),
    ...(source === undefined ? {} : { credentials: source }),
  });
  t.after(async () => {
    await b.close();
    await origin.close();
    await source?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });
  return {
    b,
    origin,
    async open(path = '/socket') {
      const opened = await openWebSocket({ proxyPort: b.proxyPort, transport, host: 'api.example.test', port: origin.port, path, caPem: b.caPem });
      assert.equal(opened.status, 101, opened.head);
      t.after(() => opened.client.socket.destroy());
      return opened.client;
    },
  };
}

function textDecision(b: RunningBoundary): Promise<OcsfEvent> {
  return b.log.waitFor((e) => e.http_request?.http_method === 'WEBSOCKET_TEXT');
}

for (const transport of ['forward', 'connect', 'connect-tls'] as const) {
  describe(`inspected WebSocket relay (${transport})`, () => {
    it('relays an allowed text message, a binary frame and a ping, and strips the compression offer', async (t) => {
      const { origin, open } = await wsStack(t, transport, {});
      const ws = await open();
      ws.sendText('hello');
      assert.equal((await ws.next()).payload.toString(), 'echo:hello');
      assert.deepEqual(await origin.waitFor((r) => r.kind === 'text'), { kind: 'text', text: 'hello' });
      ws.sendText('frag', { fin: false });
      ws.sendFrame(OPCODES.ping, Buffer.from('p'));
      ws.sendText('mented', { opcode: OPCODES.continuation });
      const pong = await ws.next();
      assert.equal(pong.opcode, OPCODES.pong, 'the ping between fragments went through at once');
      assert.equal((await ws.next()).payload.toString(), 'echo:fragmented');
      ws.sendBinary(Buffer.from([1, 2, 3]));
      assert.deepEqual([...(await ws.next()).payload], [1, 2, 3], 'binary frames pass on an uncredentialed upgrade');
      const upgrade = origin.records.find((r) => r.kind === 'upgrade');
      assert.ok(upgrade?.kind === 'upgrade');
      assert.equal(upgrade.headers['sec-websocket-extensions'], undefined);
    });

    it('closes with 1008 a text frame when the rules allow only the upgrade, and closes upstream too', async (t) => {
      const { b, origin, open } = await wsStack(t, transport, { text: false });
      const ws = await open();
      ws.sendText('not allowed');
      assert.equal(await ws.closeCode(), 1008);
      assert.deepEqual(await origin.waitFor((r) => r.kind === 'close'), { kind: 'close', code: 1008 });
      assert.equal(origin.records.some((r) => r.kind === 'text'), false, 'the text never reached the origin');
      const event = await textDecision(b);
      assert.equal(event.action, 'Denied');
      assert.equal(event.unmapped.verdict, 'deny');
      assert.equal(event.unmapped.reason_code, 'no-rule-matched');
      assert.equal(event.unmapped.close_code, 1008);
    });

    it('forwards and logs a text frame that only an audit endpoint lets through', async (t) => {
      const { b, origin, open } = await wsStack(t, transport, { text: false, enforcement: 'audit' });
      const ws = await open();
      ws.sendText('audited');
      assert.equal((await ws.next()).payload.toString(), 'echo:audited');
      await origin.waitFor((r) => r.kind === 'text' && r.text === 'audited');
      const event = await textDecision(b);
      assert.equal(event.unmapped.verdict, 'audit');
      assert.equal(event.action, 'Allowed');
    });

    it('rewrites a placeholder in a text frame when websocket_credential_rewrite is set', async (t) => {
      const { b, origin, open } = await wsStack(t, transport, { rewrite: true }, { credentials: true });
      const ws = await open();
      ws.sendText(`{"token":"${PH}API_TOKEN"}`);
      const seen = await origin.waitFor((r) => r.kind === 'text');
      assert.deepEqual(seen, { kind: 'text', text: `{"token":"${SECRET}"}` });
      await ws.next();
      assert.equal(b.log.text().includes(SECRET), false, 'the secret never reaches a log line');
      const metrics = await (await fetch(`http://127.0.0.1:${b.adminPort}/metrics`)).text();
      assert.match(metrics, /^boundary_credentials_substituted_total 1$/m, 'the rewritten message is counted as one substitution');
    });

    it('closes with 1008 a text frame holding a placeholder when the rewrite is off (CR-18)', async (t) => {
      const { b, origin, open } = await wsStack(t, transport, { rewrite: false }, { credentials: true });
      const ws = await open();
      ws.sendText(`{"token":"${PH}API_TOKEN"}`);
      assert.equal(await ws.closeCode(), 1008);
      await origin.waitFor((r) => r.kind === 'close');
      assert.equal(origin.records.some((r) => r.kind === 'text'), false);
      const event = await textDecision(b);
      assert.equal(event.unmapped.reason_code, 'credential-unavailable');
      assert.equal(b.log.text().includes('API_TOKEN'), false, 'no key name in any event');
    });

    it('closes with 1008 a binary frame on a credentialed upgrade (CR-18)', async (t) => {
      const { b, origin, open } = await wsStack(t, transport, { rewrite: true }, { credentials: true });
      const ws = await open();
      ws.sendBinary(Buffer.from('opaque'));
      assert.equal(await ws.closeCode(), 1008);
      await origin.waitFor((r) => r.kind === 'close');
      assert.equal(origin.records.some((r) => r.kind === 'binary'), false);
      const event = await b.log.waitFor((e) => e.http_request?.http_method === 'WEBSOCKET_BINARY');
      assert.equal(event.unmapped.reason_code, 'websocket-binary-credentialed');
    });

    it('closes with 1012 when a reload removes the text rule, and keeps the socket when the rule stays (RX-12)', async (t) => {
      const { b, origin, open } = await wsStack(t, transport, {});
      const kept = await open();
      kept.sendText('before');
      assert.equal((await kept.next()).payload.toString(), 'echo:before');
      // Same websocket rules plus an unrelated entry: a new generation that keeps this relay's decisions.
      await b.writePolicy(`${wsPolicy(origin.port, {})}  unrelated:\n    endpoints: [{ host: other.example.test, port: 443 }]\n    binaries: [{ path: "/**" }]\n`);
      await b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped.policy_generation === 2);
      kept.sendText('after');
      assert.equal((await kept.next()).payload.toString(), 'echo:after', 'a reload that keeps the rule keeps the socket');

      await b.writePolicy(wsPolicy(origin.port, { text: false }));
      assert.equal(await kept.closeCode(), 1012);
      await origin.waitFor((r) => r.kind === 'close' && r.code === 1012);
      const closed = await b.log.waitFor((e) => e.activity_name === 'Close' && e.unmapped.close_code === 1012);
      assert.equal(closed.class_uid, 4001);
    });

    it('closes with 1012 when a reload removes the websocket endpoint altogether', async (t) => {
      const { b, origin, open } = await wsStack(t, transport, {});
      const ws = await open();
      ws.sendText('before');
      assert.equal((await ws.next()).payload.toString(), 'echo:before');
      await b.writePolicy(`version: 1\nnetwork_policies:\n  unrelated:\n    endpoints: [{ host: other.example.test, port: 443 }]\n    binaries: [{ path: "/**" }]\n`);
      assert.equal(await ws.closeCode(), 1012);
      await origin.waitFor((r) => r.kind === 'close' && r.code === 1012);
    });
  });
}

describe('uninspected WebSocket relay', () => {
  it('relays an upgrade on an uncredentialed L4 endpoint as raw bytes, unparsed, and keeps it across a reload', async (t) => {
    const origin = await httpOrigin();
    const l4 = (extra: string): string =>
      `version: 1\nnetwork_policies:\n  ws:\n    endpoints: [{ host: api.example.test, port: ${origin.port} }]\n    binaries: [{ path: "/**" }]\n${extra}`;
    const b = await startBoundary({ policy: l4('') });
    t.after(async () => {
      await b.close();
      await origin.close();
    });
    const socket = connect({ host: '127.0.0.1', port: b.proxyPort });
    t.after(() => socket.destroy());
    await once(socket, 'connect');
    socket.write(
      `GET http://api.example.test:${origin.port}/any HTTP/1.1\r\nHost: api.example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    );
    assert.equal((await readHead(socket)).status, 101);
    socket.resume();
    socket.write('not a frame');
    const [echo] = (await once(socket, 'data')) as [Buffer];
    assert.equal(echo.toString(), 'not a frame', 'no frame parser on the fast path');
    await b.writePolicy(l4('  unrelated:\n    endpoints: [{ host: other.example.test, port: 443 }]\n    binaries: [{ path: "/**" }]\n'));
    await b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped.policy_generation === 2);
    socket.write('still here');
    const [again] = (await once(socket, 'data')) as [Buffer];
    assert.equal(again.toString(), 'still here');
  });
});
