// The corporate upstream proxy (docs/running.md#corporate-upstream-proxy) with a real squid started by the test:
// every adapter's dial becomes `CONNECT <validated IP>:<port>` to squid (forward HTTP, CONNECT passthrough and
// interception, HTTP/2 upstream, WebSocket, transparent capture), the bypass list dials directly, nothing denied reaches
// squid; proxy auth right and wrong (407 -> 502 naming it), a proxy that is down, and CONNECT by name.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { freePort } from '../harness/supervisor-cli.js';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { type H2Origin, h2TlsOrigin } from '../harness/h2-origin.js';
import { json, openTunnel, readAll, rawExchange, sendRequest, statusOf, tlsOverTunnel } from '../harness/proxy-client.js';
import { type EchoServer, echoServer, httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';
import { type AccessLine, type Squid, startSquid, startSquids } from '../harness/squid.js';
import { openWebSocket, type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
/** Bounds a hang only: a curl exchange that has not ended by then is not going to, however loaded the host. */
const CURL_HANG_BOUND_S = 60;
// No proxy variable reaches curl: it names boundary itself (or, for capture, none).
const CURL_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

async function curl(args: readonly string[]): Promise<string> {
  const { stdout } = await run('curl', ['-sS', '--max-time', String(CURL_HANG_BOUND_S), '-o', '/dev/null', '-w', '%{http_code} %{http_version}', ...args], { env: CURL_ENV });
  return stdout;
}

function policy(p: { plain: number; plain2: number; tls: number; h2: number; echo: number; ws: number }): string {
  return `version: 1
network_policies:
  plain:
    endpoints:
      - { host: api.example.test, port: ${p.plain} }
      - { host: direct.bypass.test, port: ${p.plain} }
      - { host: api.example.test, port: ${p.plain2} }
      - { host: meta.example.test, port: ${p.plain} }
    binaries: [{ path: "/**" }]
  passthrough:
    endpoints:
      - { host: pass.example.test, port: ${p.tls} }
    binaries: [{ path: "/**" }]
  inspected:
    endpoints:
      - host: api.example.test
        port: ${p.tls}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
      - host: h2.example.test
        port: ${p.h2}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
      - host: ws.example.test
        port: ${p.ws}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/socket" }
          - allow: { method: WEBSOCKET_TEXT, path: "/socket" }
    binaries: [{ path: "/**" }]
`;
}

const NAMES = {
  'pass.example.test': ['127.0.0.1'],
  'h2.example.test': ['127.0.0.1'],
  'ws.example.test': ['127.0.0.1'],
  'direct.bypass.test': ['127.0.0.1'],
  'meta.example.test': ['169.254.169.254'],
};

describe('upstream proxy: every adapter dials through squid by validated IP', () => {
  let pki: TestPki;
  let plain: Origin;
  let plain2: Origin;
  let tls: Origin;
  let h2: H2Origin;
  let echo: EchoServer;
  let ws: WsOrigin;
  let squid: Squid;
  let b: RunningBoundary;
  let boundaryCa = '';

  before(async () => {
    pki = await makeTestPki();
    [plain, plain2, tls, h2, echo, ws] = await Promise.all([
      httpOrigin(),
      httpOrigin(),
      tlsOrigin({ ca: pki.ca, names: ['api.example.test', 'pass.example.test', '127.0.0.1'] }),
      h2TlsOrigin({ ca: pki.ca, names: ['h2.example.test'] }),
      echoServer(),
      wsOrigin(),
    ]);
    // The echo port is open in squid but in no policy: a request that reached squid for it would show.
    squid = await startSquid({ ports: [plain.port, tls.port, h2.port, echo.port, ws.port] });
    b = await startBoundary({
      policy: policy({ plain: plain.port, plain2: plain2.port, tls: tls.port, h2: h2.port, echo: echo.port, ws: ws.port }),
      upstreamCaPem: pki.ca.certPem,
      names: NAMES,
      upstreamProxy: { upstreamProxy: squid.url, noUpstreamProxy: `bypass.test, 127.0.0.0/8:${plain2.port}` },
    });
    boundaryCa = join(b.dir, 'boundary-ca.pem');
    await writeFile(boundaryCa, b.caPem ?? '');
  });

  after(async () => {
    await b?.close();
    await squid?.close();
    await Promise.all([plain?.close(), plain2?.close(), tls?.close(), h2?.close(), echo?.close(), ws?.close()]);
  });

  const tunnelTo = (port: number) => (l: AccessLine) => l.method === 'CONNECT' && l.url === `127.0.0.1:${port}` && l.result === 'TCP_TUNNEL/200';

  it('forward HTTP: the request is relayed through a CONNECT to the validated address', async () => {
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/forward` });
    assert.equal(res.status, 200);
    assert.equal(plain.seen.at(-1)?.url, '/forward');
    assert.ok(b.dials.some((d) => d.host === '127.0.0.1' && d.port === squid.port), 'boundary dialled squid');
    assert.ok(!b.dials.some((d) => d.port === plain.port), 'and never the origin itself');
  });

  it('CONNECT passthrough: the client speaks TLS to the origin inside squid\'s tunnel', async () => {
    const tunnel = await openTunnel(b.proxyPort, `pass.example.test:${tls.port}`);
    assert.equal(tunnel.status, 200);
    const secured = await tlsOverTunnel(tunnel.socket, { servername: 'pass.example.test', ca: pki.ca.certPem });
    const res = await sendRequest({ socket: secured, path: '/passthrough' });
    assert.equal(res.status, 200);
    secured.destroy();
    const event = await b.log.waitFor((e) => e.class_uid === 4001 && e.unmapped?.endpoint !== undefined && e.dst_endpoint?.domain === 'pass.example.test');
    assert.equal(event.unmapped?.dial_mode, 'upstream-proxy');
    await squid.waitForLines(tunnelTo(tls.port));
  });

  it('CONNECT with interception: boundary\'s own upstream TLS rides inside squid\'s tunnel, rules still apply', async () => {
    const ask = async (path: string): Promise<number> => {
      const tunnel = await openTunnel(b.proxyPort, `api.example.test:${tls.port}`);
      assert.equal(tunnel.status, 200);
      const secured = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem ?? '' });
      const res = await sendRequest({ socket: secured, path, headers: { host: `api.example.test:${tls.port}` } });
      secured.destroy();
      return res.status;
    };
    assert.equal(await ask('/allowed/inspected'), 200);
    assert.equal(tls.seen.at(-1)?.url, '/allowed/inspected');
    assert.equal(await ask('/denied'), 403);
    assert.notEqual(tls.seen.at(-1)?.url, '/denied');
  });

  it('HTTP/2 upstream through interception: curl --http2 reaches an h2-only origin through the tunnel', async () => {
    const args = ['--http2', '--cacert', boundaryCa, '--proxy', `http://127.0.0.1:${b.proxyPort}`];
    assert.equal(await curl([...args, `https://h2.example.test:${h2.port}/over-h2`]), '200 2');
    assert.equal(h2.seen.at(-1)?.httpVersion, '2.0');
    assert.ok(h2.sessions() >= 1);
  });

  it('WebSocket through the forward proxy: the relay dials through squid too', async () => {
    const opened = await openWebSocket({ proxyPort: b.proxyPort, transport: 'forward', host: 'ws.example.test', port: ws.port, path: '/socket' });
    assert.equal(opened.status, 101);
    opened.client.sendText('over the proxy');
    await ws.waitFor((r) => r.kind === 'text' && r.text === 'over the proxy');
    opened.client.socket.destroy();
  });

  it('transparent capture: a connection to a synthetic address is dialled through squid too', async () => {
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+tries=1', '+time=3', '+short', 'api.example.test', 'A']);
    const synthetic = stdout.trim();
    const code = await curl(['--noproxy', '*', '--resolve', `api.example.test:${tls.port}:${synthetic}`, '--cacert', boundaryCa, `https://api.example.test:${tls.port}/allowed/capture`]);
    assert.match(code, /^200 /);
    assert.equal(tls.seen.at(-1)?.url, '/allowed/capture');
    const open = await b.log.waitFor((e) => e.status_detail === 'transparent_tcp_allowed');
    assert.equal(open.unmapped?.dial_mode, 'upstream-proxy');
    assert.equal(open.unmapped?.connected_real_destination, `127.0.0.1:${tls.port}`);
    assert.equal(open.unmapped?.upstream_socket_peer, `127.0.0.1:${squid.port}`);
  });

  it('--no-upstream-proxy: a suffix entry and a CIDR:port entry are dialled directly', async () => {
    const bySuffix = await sendRequest({ proxyPort: b.proxyPort, path: `http://direct.bypass.test:${plain.port}/by-suffix` });
    assert.equal(bySuffix.status, 200);
    assert.ok(b.dials.some((d) => d.host === '127.0.0.1' && d.port === plain.port && d.viaProxy !== true), 'direct dial of the origin');
    // Squid's ACL does not even allow this port: only a direct dial can succeed.
    const byCidr = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain2.port}/by-cidr` });
    assert.equal(byCidr.status, 200);
    assert.equal(plain2.seen.at(-1)?.url, '/by-cidr');
    assert.ok(b.dials.some((d) => d.host === '127.0.0.1' && d.port === plain2.port && d.viaProxy !== true), 'direct dial inside the CIDR');
  });

  it('denied destinations never reach squid: not in policy, and refused by the SSRF check', async () => {
    const notInPolicy = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${echo.port}/x` });
    assert.equal(notInPolicy.status, 403);
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${echo.port}`);
    assert.equal(tunnel.status, 403);
    tunnel.socket.destroy();
    const ssrf = await sendRequest({ proxyPort: b.proxyPort, path: `http://meta.example.test:${plain.port}/x` });
    assert.equal(ssrf.status, 403);
    assert.equal(json(ssrf).error, 'ssrf_denied');
  });

  it('squid saw exactly the expected CONNECTs: validated IPs and allowed ports only', async () => {
    // Squid logs a tunnel when it closes: closing boundary ends its pooled upstream connections.
    await b.close();
    await squid.waitForLines(tunnelTo(plain.port));
    await squid.waitForLines(tunnelTo(h2.port));
    await squid.waitForLines(tunnelTo(ws.port));
    // passthrough, two inspected tunnels, capture
    await squid.waitForLines(tunnelTo(tls.port), 4);
    const lines = await squid.accessLog();
    for (const line of lines) {
      assert.equal(line.method, 'CONNECT', JSON.stringify(line));
      assert.equal(line.result, 'TCP_TUNNEL/200', JSON.stringify(line));
    }
    const counts: Record<string, number> = {};
    for (const line of lines) counts[line.url] = (counts[line.url] ?? 0) + 1;
    // One pooled forward connection, one HTTP/2 session, four TLS tunnels, one WebSocket; no name, no denied or bypassed port.
    assert.deepEqual(counts, { [`127.0.0.1:${plain.port}`]: 1, [`127.0.0.1:${tls.port}`]: 4, [`127.0.0.1:${h2.port}`]: 1, [`127.0.0.1:${ws.port}`]: 1 });
  });
});

describe('upstream proxy: auth, https, failures, connect-by-name', () => {
  let pki: TestPki;
  let plain: Origin;
  let tls: Origin;
  let squid: Squid;
  let byName: Squid;
  let secure: Squid;
  const started: RunningBoundary[] = [];
  const PASSWORD = 'corp-s3cret-pw';
  let authDir = '';

  before(async () => {
    authDir = await mkdtemp(join(tmpdir(), 'boundary-proxy-auth-'));
    pki = await makeTestPki();
    [plain, tls] = await Promise.all([httpOrigin(), tlsOrigin({ ca: pki.ca })]);
    const proxyCert = await issueCertificate({ ca: pki.ca, kind: 'server', names: ['127.0.0.1'], now: Date.now });
    const ports = [plain.port, tls.port];
    [squid, byName, secure] = await startSquids([
      { ports, auth: { user: 'corp', password: PASSWORD } },
      { ports, hosts: ['127.0.0.1 api.example.test'] },
      { ports, auth: { user: 'corp', password: PASSWORD }, tls: { certPem: proxyCert.certPem, keyPem: proxyCert.keyPem } },
    ]);
    await writeFile(join(authDir, 'proxy-ca.pem'), pki.ca.certPem);
  });

  after(async () => {
    for (const b of started) await b.close();
    await Promise.all([squid?.close(), byName?.close(), secure?.close(), plain?.close(), tls?.close()]);
    await rm(authDir, { recursive: true, force: true });
  });

  async function boundaryVia(proxy: Record<string, unknown>, authText?: string): Promise<RunningBoundary> {
    const keys = { ...proxy };
    if (authText !== undefined) {
      const file = join(authDir, `auth-${started.length}`);
      await writeFile(file, authText, { mode: 0o600 });
      Object.assign(keys, { upstreamProxyAuthFile: file });
      if (String(keys.upstreamProxy).startsWith('http:')) Object.assign(keys, { upstreamProxyAuthInsecure: true });
    }
    const b = await startBoundary({
      policy: `version: 1
network_policies:
  plain:
    endpoints:
      - { host: api.example.test, port: ${plain.port} }
      - { host: api.example.test, port: ${tls.port}, protocol: rest, enforcement: enforce, rules: [{ allow: { method: GET, path: "/**" } }] }
    binaries: [{ path: "/**" }]
`,
      upstreamCaPem: pki.ca.certPem,
      upstreamProxy: keys,
    });
    started.push(b);
    return b;
  }

  it('proxy auth: the right user:pass opens the tunnel, and the secret never reaches a log line', async () => {
    const b = await boundaryVia({ upstreamProxy: squid.url }, `corp:${PASSWORD}\n`);
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/authed` });
    assert.equal(res.status, 200);
    await b.close();
    const [line] = await squid.waitForLines((l) => l.result === 'TCP_TUNNEL/200');
    assert.equal(line?.user, 'corp');
    assert.equal(line?.url, `127.0.0.1:${plain.port}`);
    assert.ok(!b.log.text().includes(PASSWORD));
    assert.ok(!b.log.text().includes(Buffer.from(`corp:${PASSWORD}`).toString('base64')));
  });

  it('https:// proxy: verified with --upstream-proxy-ca, auth without the insecure flag, boundary\'s TLS inside the proxy\'s', async () => {
    const b = await boundaryVia({ upstreamProxy: secure.url, upstreamProxyCa: join(authDir, 'proxy-ca.pem') }, `corp:${PASSWORD}\n`);
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/over-https-proxy` });
    assert.equal(res.status, 200);
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${tls.port}`);
    assert.equal(tunnel.status, 200);
    const secured = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem ?? '' });
    const inspected = await sendRequest({ socket: secured, path: '/tls-in-tls', headers: { host: `api.example.test:${tls.port}` } });
    secured.destroy();
    assert.equal(inspected.status, 200);
    assert.equal(tls.seen.at(-1)?.url, '/tls-in-tls');
    await b.close();
    const lines = await secure.waitForLines((l) => l.result === 'TCP_TUNNEL/200', 2);
    assert.deepEqual(lines.map((l) => [l.url, l.user]).sort(), [[`127.0.0.1:${plain.port}`, 'corp'], [`127.0.0.1:${tls.port}`, 'corp']].sort());
  });

  it('https:// proxy whose certificate is not trusted: 502 upstream_proxy_unreachable, nothing sent', async () => {
    const connects = async (): Promise<number> => (await secure.accessLog()).filter((l) => l.method === 'CONNECT').length;
    const before = await connects();
    const b = await boundaryVia({ upstreamProxy: secure.url }, `corp:${PASSWORD}\n`);
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/untrusted` });
    assert.equal(res.status, 502);
    assert.equal(json(res).error, 'upstream_proxy_unreachable');
    await b.close();
    assert.equal(await connects(), before);
  });

  it('proxy auth wrong: squid\'s 407 is a 502 upstream_proxy_refused naming 407, forward and CONNECT', async () => {
    const b = await boundaryVia({ upstreamProxy: squid.url }, 'corp:wrong\n');
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/wrong` });
    assert.equal(res.status, 502);
    assert.equal(json(res).error, 'upstream_proxy_refused');
    assert.equal(json(res).upstream_proxy_status, 407);
    const forward = await b.log.waitFor((e) => e.unmapped?.reason_code === 'upstream-proxy-refused');
    assert.equal(forward.unmapped?.upstream_proxy_status, 407);
    const raw = await rawExchange(b.proxyPort, `CONNECT api.example.test:${plain.port} HTTP/1.1\r\nHost: api.example.test:${plain.port}\r\n\r\n`);
    assert.equal(statusOf(raw), 502);
    assert.match(raw.split('\r\n')[0] ?? '', /407/);
    assert.equal(JSON.parse(raw.slice(raw.indexOf('{'))).error, 'upstream_proxy_refused');
    const connect = await b.log.waitFor((e) => e.class_uid === 4001 && e.unmapped?.reason_code === 'upstream-proxy-refused');
    assert.equal(connect.unmapped?.upstream_proxy_status, 407);
    assert.equal(plain.seen.filter((r) => r.url === '/wrong').length, 0);
    assert.ok((await squid.waitForLines((l) => l.result === 'TCP_DENIED/407')).length >= 1);
  });

  it('proxy down: 502 upstream_proxy_unreachable, forward and CONNECT', async () => {
    const b = await boundaryVia({ upstreamProxy: `http://127.0.0.1:${await freePort()}` });
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/down` });
    assert.equal(res.status, 502);
    assert.equal(json(res).error, 'upstream_proxy_unreachable');
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${plain.port}`);
    assert.equal(tunnel.status, 502);
    assert.equal(JSON.parse((await readAll(tunnel.socket, tunnel.rest)).replace(/^[^{]*/, '')).error, 'upstream_proxy_unreachable');
    const event = await b.log.waitFor((e) => e.class_uid === 4001 && e.unmapped?.reason_code === 'upstream-proxy-unreachable');
    assert.equal(event.unmapped?.dial_failure, 'proxy-unreachable');
  });

  it('--upstream-proxy-connect-by-name: squid is asked for the name, and resolves it itself', async () => {
    const b = await boundaryVia({ upstreamProxy: byName.url, upstreamProxyConnectByName: true });
    const res = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/by-name` });
    assert.equal(res.status, 200);
    await b.close();
    const lines = await byName.waitForLines((l) => l.method === 'CONNECT');
    assert.deepEqual(lines.map((l) => l.url), [`api.example.test:${plain.port}`]);
  });
});
