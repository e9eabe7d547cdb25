// Regression of issue 15, "Method-override headers": `X-HTTP-Method-Override`, `X-HTTP-Method` and
// `X-Method-Override` turned an allowed POST into a DELETE at frameworks that honour them, past `deny DELETE`.
// On L7 endpoints a request is now decided as its wire method and as its override method, and allowed only
// when both are; a malformed or repeated override is refused with 400 method_override_invalid.
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { head, SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { json, openTunnel, readAll, sendRequest, statusOf, tlsOverTunnel } from '../harness/proxy-client.js';
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
        deny_rules:
          - { method: DELETE, path: "/**" }
    binaries: [{ path: "/**" }]
`;

describe('issue 15: method-override headers on L7 endpoints', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: Origin;
  /** The origin of inspected tunnels: the boundary dials it over TLS. */
  let secure: Origin;
  let b: RunningBoundary;
  const url = (path: string): string => `http://api.example.test:${origin.port}${path}`;

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

  it('allows a plain POST', async () => {
    const seen = origin.seen.length;
    const res = await sendRequest({ proxyPort: b.proxyPort, method: 'POST', path: url('/items/1'), body: 'x' });
    assert.equal(res.status, 200);
    assert.equal(origin.seen.length, seen + 1);
  });

  for (const name of ['X-HTTP-Method-Override', 'X-HTTP-Method', 'X-Method-Override']) {
    it(`denies POST with ${name}: DELETE as the DELETE it becomes (403), sending nothing upstream`, async () => {
      const seen = origin.seen.length;
      const path = `/items/${name}`;
      const res = await sendRequest({ proxyPort: b.proxyPort, method: 'POST', path: url(path), headers: { [name]: 'delete' }, body: 'x' });
      assert.equal(res.status, 403, res.body);
      const body = json(res);
      assert.equal(body.error, 'policy_denied');
      assert.equal(body.reason, 'deny-rule-matched');
      assert.equal(body.method, 'DELETE');
      assert.equal(origin.seen.length, seen, 'nothing reached the origin');
      await b.log.waitFor((e) => e.class_uid === 4002 && e.action === 'Denied' && e.unmapped.reason_code === 'deny-rule-matched' && e.http_request?.url.path === path);
    });
  }

  it('relays POST with an override to an allowed method (both methods are allowed)', async () => {
    const seen = origin.seen.length;
    const res = await sendRequest({ proxyPort: b.proxyPort, method: 'POST', path: url('/items/get'), headers: { 'x-http-method-override': 'GET' }, body: 'x' });
    assert.equal(res.status, 200, res.body);
    assert.equal(origin.seen.length, seen + 1);
  });

  for (const [what, headers] of [
    ['two override headers', { 'x-http-method-override': 'GET', 'x-http-method': 'DELETE' }],
    ['a list value', { 'x-http-method-override': 'GET, DELETE' }],
    ['a value that is not a method token', { 'x-method-override': 'DE LETE' }],
    ['an empty value', { 'x-method-override': '' }],
  ] as const) {
    it(`refuses ${what} with 400 method_override_invalid and an event`, async () => {
      const seen = origin.seen.length;
      const path = `/invalid/${what.replaceAll(' ', '-')}`;
      const res = await sendRequest({ proxyPort: b.proxyPort, method: 'POST', path: url(path), headers, body: 'x' });
      assert.equal(res.status, 400, res.body);
      assert.equal(json(res).error, 'method_override_invalid');
      assert.equal(origin.seen.length, seen, 'nothing reached the origin');
      await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'method-override-invalid' && e.http_request?.url.path === path);
    });
  }

  it('denies POST with X-HTTP-Method-Override: DELETE inside a TLS-intercepted tunnel, and allows plain POST there', async () => {
    const seen = secure.seen.length;
    assert.ok(b.caPem !== undefined, 'the boundary CA is available');
    const allowed = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    const tlsAllowed = await tlsOverTunnel(allowed.socket, { servername: 'api.example.test', ca: b.caPem });
    tlsAllowed.write(head(`POST /tunnel/plain HTTP/1.1\nHost: api.example.test:${secure.port}\nContent-Length: 0\nConnection: close`));
    assert.equal(statusOf(await readAll(tlsAllowed as unknown as Socket)), 200);
    assert.equal(secure.seen.length, seen + 1);

    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    assert.equal(tunnel.status, 200);
    const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem });
    tls.write(head(`POST /tunnel/override HTTP/1.1\nHost: api.example.test:${secure.port}\nContent-Length: 0\nX-HTTP-Method-Override: DELETE`));
    const text = await readAll(tls as unknown as Socket);
    assert.equal(statusOf(text), 403, text.slice(0, 200));
    assert.equal(secure.seen.length, seen + 1, 'the overridden request never reached the origin');
    await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.adapter === 'l7' && e.action === 'Denied' && e.http_request?.url.path === '/tunnel/override');
  });
});
