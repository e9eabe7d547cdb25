import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { FRAME, PREFACE, readFrames, settings } from '../harness/h2-frames.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { json, openTunnel, rawExchange, readAll, readHead, sendRequest, statusOf, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

let plain: Origin;
let secure: Origin;
let b: RunningBoundary;
let P = 0;

before(async () => {
  const pki = await makeTestPki();
  plain = await httpOrigin();
  secure = await tlsOrigin({ ca: pki.ca, names: ['api.example.test', 'other.example.test', '127.0.0.1'] });
  P = plain.port;
  b = await startBoundary({
    upstreamCaPem: pki.ca.certPem,
    policy: `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        ports: [${plain.port}, ${secure.port}]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
          - allow: { method: POST, path: "/upload/**" }
        deny_rules:
          - { method: "*", path: "/secret/**" }
    binaries: [{ path: "/**" }]
`,
  });
});

after(async () => {
  await b?.close();
  await plain?.close();
  await secure?.close();
});

const head = (lines: string): string => `${lines.replaceAll('\n', '\r\n')}\r\n\r\n`;

describe('framing and smuggling on the forward path', () => {
  const url = (path: string): string => `http://api.example.test:${P}${path}`;
  const rows: readonly (readonly [string, () => string, number])[] = [
    ['CL + TE (SM-01)', () => `${head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nContent-Length: 5\nTransfer-Encoding: chunked`)}0\r\n\r\n`, 400],
    ['TE + CL (SM-01)', () => `${head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nTransfer-Encoding: chunked\nContent-Length: 5`)}0\r\n\r\n`, 400],
    ['differing CL (SM-02)', () => `${head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nContent-Length: 1\nContent-Length: 2`)}ab`, 400],
    ['identical CL (SM-03)', () => `${head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nContent-Length: 1\nContent-Length: 1`)}a`, 400],
    ['CL +2 (SM-04)', () => `${head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nContent-Length: +2`)}ab`, 400],
    ['TE xchunked (SM-05)', () => head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nTransfer-Encoding: xchunked`), 400],
    ['TE chunked, identity (SM-05)', () => `${head(`POST ${url('/upload/a')} HTTP/1.1\nHost: api.example.test\nTransfer-Encoding: chunked, identity`)}0\r\n\r\n`, 400],
    ['TE on HTTP/1.0 (SM-06)', () => `${head(`POST ${url('/upload/a')} HTTP/1.0\nHost: api.example.test\nTransfer-Encoding: chunked`)}0\r\n\r\n`, 400],
    ['bare LF (SM-11)', () => `GET ${url('/a')} HTTP/1.1\nHost: api.example.test\n\n`, 400],
    ['obs-fold (SM-12)', () => head(`GET ${url('/a')} HTTP/1.1\nHost: api.example.test\nX-A: b\n c`), 400],
    ['space before colon (SM-13)', () => head(`GET ${url('/a')} HTTP/1.1\nHost : api.example.test`), 400],
    ['two Host headers (HA-24)', () => head(`GET ${url('/a')} HTTP/1.1\nHost: api.example.test\nHost: other.example.test`), 400],
    ['head over 16 KiB (RX-01)', () => head(`GET ${url('/a')} HTTP/1.1\nHost: api.example.test\nX-Big: ${'a'.repeat(17_000)}`), 431],
    ['encoded slash (SM-19)', () => head(`GET ${url('/public/..%2fsecret')} HTTP/1.1\nHost: api.example.test`), 400],
    ['climbing above the root (SM-20)', () => head(`GET ${url('/a/../../b')} HTTP/1.1\nHost: api.example.test`), 400],
    ['encoded dot segments (SM-21)', () => head(`GET ${url('/%2e%2e/x')} HTTP/1.1\nHost: api.example.test`), 400],
    ['target over 4 KiB (SM-22)', () => head(`GET ${url(`/${'a'.repeat(4_200)}`)} HTTP/1.1\nHost: api.example.test`), 400],
  ];
  for (const [name, build, status] of rows) {
    it(`answers ${status} to ${name} and sends nothing upstream`, async () => {
      const seen = plain.seen.length;
      const raw = await rawExchange(b.proxyPort, build());
      assert.equal(statusOf(raw), status, raw.slice(0, 200));
      assert.equal(plain.seen.length, seen);
    });
  }

  for (const [path, upstream] of [
    ['/a/..;/b', '/b'],
    ['//admin', '/admin'],
    ['/%7Euser/./x', '/~user/x'],
  ] as const) {
    it(`evaluates and forwards ${path} as ${upstream} (SM-21)`, async () => {
      const response = await sendRequest({ proxyPort: b.proxyPort, path: url(path) });
      assert.equal(response.status, 200);
      assert.equal(json(response).url, upstream);
    });
  }

  it('denies /secret/../secret/x after canonicalisation (deny rules see the canonical path)', async () => {
    const response = await sendRequest({ proxyPort: b.proxyPort, path: url('/x/../secret/x') });
    assert.equal(response.status, 403);
  });

  it('answers 403 without 100 Continue to Expect on a denied request (SM-16)', async () => {
    const raw = await rawExchange(b.proxyPort, head(`POST ${url('/secret/x')} HTTP/1.1\nHost: api.example.test\nExpect: 100-continue\nContent-Length: 5`));
    assert.equal(statusOf(raw), 403);
    assert.equal(raw.includes('100 Continue'), false);
  });

  it('refuses an h2c upgrade on an L7 route (SM-17)', async () => {
    const raw = await rawExchange(b.proxyPort, head(`GET ${url('/a')} HTTP/1.1\nHost: api.example.test\nConnection: Upgrade, HTTP2-Settings\nUpgrade: h2c\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA`));
    assert.equal(statusOf(raw), 403);
    assert.ok(raw.includes('unsupported_l7_protocol'));
  });
});

describe('inside CONNECT tunnels', () => {
  it('evaluates two pipelined requests separately (SM-14)', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${P}`);
    assert.equal(tunnel.status, 200);
    tunnel.socket.write(head(`GET /ok HTTP/1.1\nHost: api.example.test:${P}`) + head(`GET /secret/x HTTP/1.1\nHost: api.example.test:${P}`));
    const text = await readAll(tunnel.socket);
    assert.match(text, /^HTTP\/1\.1 200/);
    assert.match(text, /HTTP\/1\.1 403[\s\S]*deny-rule-matched/);
  });

  it('answers 403 request_authority_mismatch with a finding for another Host (HA-21)', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${P}`);
    const seen = plain.seen.length;
    const response = await sendRequest({ socket: tunnel.socket, path: '/a', headers: { host: 'other.example.test' } });
    assert.equal(response.status, 403);
    assert.equal(json(response).error, 'request_authority_mismatch');
    assert.equal(plain.seen.length, seen);
    await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'authority-mismatch');
  });

  it('checks the authority port after TLS: 443 implied, another port refused (HA-22, HA-23)', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    const socket = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem as string });
    const response = await sendRequest({ socket, path: '/a', headers: { host: 'api.example.test:8443' } });
    assert.equal(response.status, 403);
    assert.equal(json(response).error, 'request_authority_mismatch');
  });

  it('answers the HTTP/2 preface on an L7 route as HTTP/2, never as a raw relay (SM-18; issue 18: decided per stream)', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${P}`);
    const frames = readFrames(tunnel.socket);
    tunnel.socket.write(Buffer.concat([PREFACE, settings()]));
    const first = await frames.next(() => true);
    assert.equal(first?.type, FRAME.SETTINGS, "boundary's own HTTP/2 server answered");
    tunnel.socket.destroy();
  });

  it('refuses unrecognised bytes on an L7 route with unsupported_l7_protocol', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${P}`);
    tunnel.socket.write('\x00\x01binary nonsense that is no protocol\r\n');
    const text = await readAll(tunnel.socket);
    assert.equal(statusOf(text), 403);
    assert.ok(text.includes('unsupported_l7_protocol'));
  });

  it('closes a TLS handshake whose SNI names another host, with a finding (HA-25)', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    const socket = tlsConnect({ socket: tunnel.socket, servername: 'other.example.test', ca: b.caPem as string });
    const [err] = (await once(socket, 'error')) as [Error];
    assert.ok(err instanceof Error);
    await b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'sni-mismatch');
  });
});

describe('CONNECT parsing', () => {
  for (const target of ['2606:4700::1111:443', '[::1:443', 'api.example.test', 'api.example.test:', ':443', 'api.example.test:0', 'api.example.test:65536', 'api.example.test:007', 'user@api.example.test:443', 'api.example.test:443/x', 'a..example.test:443', '[fe80::1%25eth0]:443']) {
    it(`answers 400 to CONNECT ${target} without resolving it`, async () => {
      const calls = b.resolver.calls.length;
      const raw = await rawExchange(b.proxyPort, head(`CONNECT ${target} HTTP/1.1\nHost: x`));
      assert.equal(statusOf(raw), 400);
      assert.equal(b.resolver.calls.length, calls);
    });
  }

  it('answers 431 to a CONNECT head over 8 KiB (RX-01)', async () => {
    const raw = await rawExchange(b.proxyPort, head(`CONNECT api.example.test:${P} HTTP/1.1\nHost: x\nX-Pad: ${'a'.repeat(9_000)}`));
    assert.equal(statusOf(raw), 431);
  });

  it('answers 502 and logs NET:FAIL when the dial fails', async () => {
    const closed = connect({ host: '127.0.0.1', port: 0 }).on('error', () => undefined);
    closed.destroy();
    const dead = await httpOrigin();
    const port = dead.port;
    await dead.close();
    await b.writePolicy(`version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${port} }
    binaries: [{ path: "/**" }]
`);
    await b.log.waitFor((e) => e.activity_name === 'LOADED' && e.unmapped.policy_generation === 2);
    const socket = connect({ host: '127.0.0.1', port: b.proxyPort });
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    socket.write(head(`CONNECT api.example.test:${port} HTTP/1.1\nHost: x`));
    assert.equal((await readHead(socket)).status, 502);
    await b.log.waitFor((e) => e.class_uid === 4001 && e.activity_name === 'Fail' && e.dst_endpoint?.port === port);
  });
});

describe('interception CA unavailable (CP-17)', () => {
  it('answers 503 tls_termination_unavailable before any 200, and SSRF 403 still wins', async () => {
    const broken = await startBoundary({
      caUnavailable: true,
      allowLoopback: false,
      names: { 'meta.example.test': ['169.254.169.254'], 'pub.example.test': ['93.184.216.34'] },
      dial: () => Promise.reject(new Error('this test never dials')),
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - { host: "*.example.test", port: 443, protocol: rest, enforcement: enforce, access: read-only }
      - { host: plain.example.test, port: 8080 }
    binaries: [{ path: "/**" }]
`,
    });
    try {
      const inspected = await openTunnel(broken.proxyPort, 'pub.example.test:443');
      assert.equal(inspected.status, 503);
      assert.ok((await readAll(inspected.socket, inspected.rest)).includes('tls_termination_unavailable'));
      assert.equal(broken.dials.length, 0);
      const ssrf = await openTunnel(broken.proxyPort, 'meta.example.test:443');
      assert.equal(ssrf.status, 403);
      const ready = await fetch(`http://127.0.0.1:${broken.adminPort}/readyz`);
      assert.equal(ready.status, 200, 'L4 routes still work, so the boundary stays ready');
    } finally {
      await broken.close();
    }
  });
});
