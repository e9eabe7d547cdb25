// Regression of issue 15, "Header names that fold into framing headers": `Transfer_Encoding`, `Content_Length`
// and the other `_` lookalikes of framing and hop-by-hop headers were forwarded, and an origin behind a
// CGI/WSGI-style mapping (`-` and `_` both become `_`) read them as the real header, smuggling a body past a
// deny rule. They are refused with 400 framing_header_lookalike on every path, before anything goes upstream.
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { head, SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openTunnel, rawExchange, readAll, statusOf, tlsOverTunnel } from '../harness/proxy-client.js';
import { makeTestPki } from '../harness/certs.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

const policy = (port: number, tlsPort: number): string => `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        ports: [${port}, ${tlsPort}]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
          - allow: { method: POST, path: "/**" }
    binaries: [{ path: "/**" }]
  plain:
    endpoints:
      - { host: other.example.test, port: ${port} }
    binaries: [{ path: "/**" }]
`;

function bodyOf(raw: string): Record<string, unknown> {
  return JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
}

describe('issue 15: header names that fold into framing headers', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: Origin;
  /** The origin of inspected tunnels: the boundary dials it over TLS. */
  let secure: Origin;
  let b: RunningBoundary;

  before(async () => {
    const pki = await makeTestPki();
    origin = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca });
    b = await startBoundary({ upstreamCaPem: pki.ca.certPem, policy: policy(origin.port, secure.port) });
  });

  after(async () => {
    await b?.close();
    await Promise.all([origin?.close(), secure?.close()]);
  });

  for (const [name, value, host] of [
    ['Transfer_Encoding', 'chunked', 'api.example.test'],
    ['content_length', '5', 'api.example.test'],
    ['Proxy_Connection', 'keep-alive', 'api.example.test'],
    ['Keep_Alive', 'timeout=5', 'other.example.test'],
  ] as const) {
    it(`refuses a forward request carrying ${name} to ${host} with a coded 400 and an event, sending nothing upstream`, async () => {
      const seen = origin.seen.length;
      const raw = await rawExchange(
        b.proxyPort,
        head(`POST http://${host}:${origin.port}/x HTTP/1.1\nHost: ${host}:${origin.port}\nContent-Length: 0\n${name}: ${value}`),
      );
      assert.equal(statusOf(raw), 400, raw.slice(0, 200));
      assert.equal(bodyOf(raw).error, 'framing_header_lookalike');
      assert.equal(origin.seen.length, seen, 'nothing reached the origin');
      await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'framing-header-lookalike' && e.http_request?.url.path === '/x');
    });
  }

  it('refuses Transfer_Encoding inside a TLS-intercepted tunnel with a coded 400 and an event', async () => {
    const seen = secure.seen.length;
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    assert.equal(tunnel.status, 200);
    assert.ok(b.caPem !== undefined, 'the boundary CA is available');
    const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem });
    tls.write(head(`POST /tunnelled HTTP/1.1\nHost: api.example.test:${secure.port}\nContent-Length: 0\nTransfer_Encoding: chunked`));
    const text = await readAll(tls as unknown as Socket);
    assert.equal(statusOf(text), 400, text.slice(0, 200));
    assert.equal(bodyOf(text).error, 'framing_header_lookalike');
    assert.equal(secure.seen.length, seen, 'nothing reached the origin');
    await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'framing-header-lookalike' && e.unmapped.adapter === 'l7');
  });

  it('still relays ordinary underscore names and the real framing headers', async () => {
    const seen = origin.seen.length;
    const raw = await rawExchange(
      b.proxyPort,
      head(`POST http://api.example.test:${origin.port}/ok HTTP/1.1\nHost: api.example.test:${origin.port}\nContent-Length: 2\nX_Custom_Name: 1\nConnection: close`) + 'hi',
    );
    assert.equal(statusOf(raw), 200, raw.slice(0, 200));
    assert.equal(origin.seen.length, seen + 1);
    assert.equal(origin.seen.at(-1)?.body, 'hi');
  });
});
