// Issue 29 (what boundary tells users is what it does): a request boundary decrypted in an intercepted tunnel was
// recorded as `http://host:443/...` in the OCSF http_request URL. A TLS-terminated request is https, and its port is
// printed only when it is not 443.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { openTunnel, sendRequest, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

describe('issue 29: the event URL of a TLS-terminated request says https', () => {
  let plain: Origin;
  let secure: Origin;
  let b: RunningBoundary;
  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca, names: ['api.example.test'] });
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
        rules: [{ allow: { method: GET, path: "/ok/**" } }]
    binaries: [{ path: "/**" }]
`,
    });
  });
  after(async () => {
    await b?.close();
    await plain?.close();
    await secure?.close();
  });

  const urlOf = async (path: string): Promise<NonNullable<OcsfEvent['http_request']>['url']> =>
    (await b.log.waitFor((e) => e.class_uid === 4002 && e.http_request?.url.path === path)).http_request?.url as NonNullable<OcsfEvent['http_request']>['url'];

  it('records a request inside an intercepted tunnel as https://host:port/path', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${secure.port}`);
    assert.equal(tunnel.status, 200);
    const tls = await tlsOverTunnel(tunnel.socket, { servername: 'api.example.test', ca: b.caPem as string });
    const response = await sendRequest({ socket: tls, path: '/ok/tls', headers: { host: `api.example.test:${secure.port}` } });
    tls.destroy();
    assert.equal(response.status, 200);
    const url = await urlOf('/ok/tls');
    assert.equal(url.scheme, 'https');
    assert.equal(url.url_string, `https://api.example.test:${secure.port}/ok/tls`);
  });

  it('keeps http for a plain forward request', async () => {
    const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${plain.port}/ok/plain` });
    assert.equal(response.status, 200);
    const url = await urlOf('/ok/plain');
    assert.equal(url.scheme, 'http');
    assert.equal(url.url_string, `http://api.example.test:${plain.port}/ok/plain`);
  });
});
