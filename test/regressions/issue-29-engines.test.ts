// Issue 29 (what boundary tells users is what it does): every proxy decision event said `engine: opa`, and there is no
// OPA. The engine now names what made the outcome: the L4 policy decision, request rules, the parser, the upstream.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ENGINES } from '../../src/telemetry/event.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { openTunnel, sendRequest } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';
import { freePort } from '../harness/supervisor-cli.js';

describe('issue 29: the event engine names what decided', () => {
  let origin: Origin;
  let refused: number;
  let b: RunningBoundary;
  before(async () => {
    origin = await httpOrigin();
    refused = await freePort();
    b = await startBoundary({
      names: { 'raw.example.test': ['127.0.0.1'] },
      policy: `version: 1
network_policies:
  raw:
    endpoints: [{ host: raw.example.test, ports: [${origin.port}, ${refused}] }]
    binaries: [{ path: "/**" }]
  api:
    endpoints:
      - host: api.example.test
        port: ${origin.port}
        protocol: rest
        enforcement: enforce
        rules: [{ allow: { method: GET, path: "/ok/**" } }]
    binaries: [{ path: "/**" }]
`,
    });
  });
  after(async () => {
    await b?.close();
    await origin?.close();
  });

  const engineOf = async (match: (e: OcsfEvent) => boolean): Promise<string | undefined> => (await b.log.waitFor((e) => e.unmapped.verdict !== undefined && match(e))).firewall_rule?.type;
  const net = (host: string, port: number) => (e: OcsfEvent) => e.class_uid === 4001 && e.dst_endpoint?.domain === host && e.dst_endpoint?.port === port;
  const http = (path: string) => (e: OcsfEvent) => e.class_uid === 4002 && (e.http_request?.url?.path ?? '').startsWith(path);

  it('has no engine named opa', () => {
    assert.equal((ENGINES as readonly string[]).includes('opa'), false);
  });

  it('a CONNECT allowed or denied by host and port: policy', async () => {
    const allowed = await openTunnel(b.proxyPort, `raw.example.test:${origin.port}`);
    allowed.socket.destroy();
    assert.equal(allowed.status, 200);
    assert.equal(await engineOf(net('raw.example.test', origin.port)), 'policy');
    const denied = await openTunnel(b.proxyPort, 'other.example.test:443');
    denied.socket.destroy();
    assert.equal(denied.status, 403);
    assert.equal(await engineOf(net('other.example.test', 443)), 'policy');
  });

  it('a request allowed or denied by a rule: l7', async () => {
    const ok = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/ok/1` });
    assert.equal(ok.status, 200);
    assert.equal(await engineOf(http('/ok/1')), 'l7');
    const missed = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/nope` });
    assert.equal(missed.status, 403);
    assert.equal(await engineOf(http('/nope')), 'l7');
  });

  it('a request refused as it was read: protocol', async () => {
    const folded = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/ok/folded`, headers: { transfer_encoding: 'chunked' } });
    assert.equal(folded.status, 400);
    assert.equal(await engineOf(http('/ok/folded')), 'protocol');
  });

  it('a dial the upstream refused: upstream', async () => {
    const tunnel = await openTunnel(b.proxyPort, `raw.example.test:${refused}`);
    tunnel.socket.destroy();
    assert.equal(tunnel.status, 502);
    assert.equal(await engineOf(net('raw.example.test', refused)), 'upstream');
  });
});
