import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { type ClientResponse, json, openTunnel, readAll, sendRequest, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

const NAMES = ['api.example.test', 'audit.example.test', 'pass.example.test', 'denied.example.test'];

function policyFor(httpPort: number, tlsPort: number): string {
  return `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        ports: [${httpPort}, ${tlsPort}]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/allowed/**" }
          - allow: { method: POST, path: "/allowed/**" }
        deny_rules:
          - { method: "*", path: "/allowed/secret/**" }
    binaries: [{ path: "/**" }]
  audited:
    endpoints:
      - host: audit.example.test
        ports: [${httpPort}, ${tlsPort}]
        protocol: rest
        enforcement: audit
        rules:
          - allow: { method: GET, path: "/allowed/**" }
    binaries: [{ path: "/**" }]
  passthrough:
    endpoints:
      - host: pass.example.test
        ports: [${httpPort}, ${tlsPort}]
    binaries: [{ path: "/**" }]
`;
}

let pki: TestPki;
let plain: Origin;
let secure: Origin;
let b: RunningBoundary;

before(async () => {
  pki = await makeTestPki();
  plain = await httpOrigin();
  secure = await tlsOrigin({ ca: pki.ca, names: [...NAMES, '127.0.0.1'] });
  b = await startBoundary({
    policy: policyFor(plain.port, secure.port),
    upstreamCaPem: pki.ca.certPem,
    names: Object.fromEntries(NAMES.map((n) => [n, ['127.0.0.1']])),
  });
});

after(async () => {
  await b?.close();
  await plain?.close();
  await secure?.close();
});

type Transport = 'forward' | 'connect-intercepted' | 'connect-passthrough' | 'connect-plaintext';

/** One GET through the given transport; `host` is the destination name, `path` the request path. */
async function through(transport: Transport, host: string, path: string): Promise<ClientResponse> {
  if (transport === 'forward') return sendRequest({ proxyPort: b.proxyPort, path: `http://${host}:${plain.port}${path}` });
  const port = transport === 'connect-plaintext' ? plain.port : secure.port;
  const tunnel = await openTunnel(b.proxyPort, `${host}:${port}`);
  if (tunnel.status !== 200) {
    const body = await readAll(tunnel.socket, tunnel.rest);
    return { status: tunnel.status, statusMessage: /^HTTP\/1\.1 \d{3} (.*)/.exec(tunnel.head)?.[1] ?? '', headers: {}, body };
  }
  const socket =
    transport === 'connect-plaintext'
      ? tunnel.socket
      : await tlsOverTunnel(tunnel.socket, { servername: host, ca: transport === 'connect-intercepted' ? (b.caPem as string) : pki.ca.certPem });
  try {
    return await sendRequest({ socket, path, headers: { host: `${host}:${port}` } });
  } finally {
    socket.destroy();
  }
}

function httpEvents(path: string): OcsfEvent[] {
  return b.log.events().filter((e) => e.class_uid === 4002 && e.http_request?.url?.path === path);
}

function netEvents(host: string, port: number): OcsfEvent[] {
  return b.log.events().filter((e) => e.class_uid === 4001 && e.activity_name === 'Open' && e.dst_endpoint?.domain === host && e.dst_endpoint.port === port);
}

const TRANSPORTS: readonly Transport[] = ['forward', 'connect-intercepted', 'connect-passthrough', 'connect-plaintext'];

describe('proxy matrix: transport x verdict', () => {
  for (const transport of TRANSPORTS) {
    const inspected = transport !== 'connect-passthrough';
    const httpPort = (): number => (transport === 'forward' || transport === 'connect-plaintext' ? plain.port : secure.port);

    it(`${transport}: allows a request the policy allows and logs one allow event`, async () => {
      const path = `/allowed/${transport}-allow`;
      const host = inspected ? 'api.example.test' : 'pass.example.test';
      const response = await through(transport, host, path);
      assert.equal(response.status, 200);
      assert.equal(json(response).url, path);
      if (inspected) {
        assert.equal(response.headers['x-boundary-spoofed'], undefined, 'upstream X-Boundary headers are stripped');
        const [event, ...more] = httpEvents(path);
        assert.equal(more.length, 0);
        assert.equal(event?.action, 'Allowed');
        assert.equal(event?.unmapped.adapter, transport === 'forward' ? 'forward' : 'l7');
        assert.equal(event?.unmapped.reason_code, 'rule-allowed');
        assert.equal(event?.unmapped.status_code, 200);
        assert.equal(event?.firewall_rule?.name, 'api');
      } else {
        assert.equal(httpEvents(path).length, 0, 'a raw relay logs no HTTP events');
      }
      if (transport !== 'forward') {
        const [open] = netEvents(host, httpPort());
        assert.equal(open?.action, 'Allowed');
        assert.equal(open?.unmapped.inspect, inspected);
      }
    });

    it(`${transport}: denies a destination no policy names (L4) and dials nothing`, async () => {
      const dials = b.dials.length;
      const path = `/allowed/${transport}-l4`;
      const response = await through(transport, 'denied.example.test', path);
      assert.equal(response.status, 403);
      const body = JSON.parse(response.body.slice(response.body.indexOf('{'))) as { error: string; next_steps: { kind: string; yaml?: string }[] };
      assert.equal(body.error, 'policy_denied');
      const port = httpPort();
      assert.equal(response.statusMessage, `Forbidden by policy: no endpoint for denied.example.test:${port}`);
      assert.deepEqual(body.next_steps.map((step) => step.kind), ['add_policy_entry']);
      assert.match(body.next_steps[0]?.yaml ?? '', new RegExp(`host: denied\\.example\\.test\\n\\s+port: ${port}`));
      assert.equal(b.dials.length, dials);
      const event = transport === 'forward' ? httpEvents(path)[0] : netEvents('denied.example.test', httpPort())[0];
      assert.equal(event?.action, 'Denied');
      assert.equal(event?.unmapped.reason_code, 'no-endpoint-matched');
      assert.equal(event?.firewall_rule?.type, 'policy');
    });

    if (!inspected) continue;

    it(`${transport}: denies a path the rules do not allow (L7) with the policy header`, async () => {
      const path = `/denied/${transport}`;
      const seen = (transport === 'connect-intercepted' ? secure : plain).seen.length;
      const response = await through(transport, 'api.example.test', path);
      assert.equal(response.status, 403);
      assert.equal(response.headers['x-boundary-policy'], 'api');
      assert.equal(response.headers.connection, 'close');
      const body = json(response);
      assert.equal(body.error, 'policy_denied');
      assert.equal(body.layer, 'l7');
      assert.equal(body.path, path);
      // No rule matched: `rule` names the missing allow rule, as explain does; the step says what to add.
      assert.equal(body.rule, `GET ${path}`);
      assert.deepEqual((body.rule_missing as { method: string; path: string }).path, path);
      const steps = body.next_steps as { kind: string; yaml?: string }[];
      assert.deepEqual(steps.map((step) => step.kind), ['add_policy_entry']);
      assert.match(steps[0]?.yaml ?? '', new RegExp(`path: ${path}`));
      assert.equal(response.statusMessage, `Forbidden by policy: no rule allows GET on api.example.test:${transport === 'connect-intercepted' ? secure.port : plain.port}`);
      assert.equal((transport === 'connect-intercepted' ? secure : plain).seen.length, seen, 'nothing reached upstream');
      const [event, ...more] = httpEvents(path);
      assert.equal(more.length, 0);
      assert.equal(event?.action, 'Denied');
      assert.equal(event?.unmapped.reason_code, 'no-rule-matched');
      assert.equal(event?.firewall_rule?.type, 'l7');
    });

    it(`${transport}: deny rules win over allow rules`, async () => {
      const path = '/allowed/secret/x';
      const response = await through(transport, 'api.example.test', `${path}?t=${transport}`);
      assert.equal(response.status, 403);
      const body = json(response);
      assert.equal(body.reason, 'deny-rule-matched');
      // The deny rule is named; no allow rule is suggested around it.
      assert.equal(typeof body.rule, 'string');
      assert.equal(body.rule_missing, null);
      assert.deepEqual((body.next_steps as { kind: string }[]).map((step) => step.kind), ['narrow_deny_rule']);
      assert.doesNotMatch(`${response.statusMessage ?? ''} ${JSON.stringify(body)}`, /t=/, 'no query value anywhere');
    });

    it(`${transport}: forwards a violation on an audit endpoint and logs it as audit`, async () => {
      const path = `/denied/${transport}-audit`;
      const response = await through(transport, 'audit.example.test', path);
      assert.equal(response.status, 200);
      assert.equal(json(response).url, path);
      const [event] = httpEvents(path);
      assert.equal(event?.action, 'Allowed');
      assert.equal(event?.unmapped.verdict, 'audit');
      assert.equal(event?.firewall_rule?.name, 'audited');
    });
  }

  it('never writes the query string into an event', async () => {
    const response = await through('forward', 'api.example.test', '/allowed/query?token=s3cr3t-value');
    assert.equal(response.status, 200);
    assert.equal(b.log.text().includes('s3cr3t-value'), false);
  });

  it('answers 400 use_connect_for_https to an absolute https:// URL and 400 to other schemes', async () => {
    const https = await sendRequest({ proxyPort: b.proxyPort, path: `https://api.example.test:${secure.port}/allowed/x` });
    assert.equal(https.status, 400);
    assert.equal(json(https).error, 'use_connect_for_https');
    const ftp = await sendRequest({ proxyPort: b.proxyPort, path: 'ftp://api.example.test/x' });
    assert.equal(ftp.status, 400);
    assert.equal(json(ftp).error, 'unsupported_proxy_scheme');
  });

  it('enforces the same L7 deny on forward HTTP as inside a CONNECT tunnel (BY-12 parity)', async () => {
    const forward = await through('forward', 'api.example.test', '/parity/x');
    const tunnel = await through('connect-plaintext', 'api.example.test', '/parity/x');
    assert.equal(forward.status, 403);
    assert.equal(tunnel.status, 403);
    const { port: _fp, ...f } = json(forward);
    const { port: _tp, ...t } = json(tunnel);
    assert.deepEqual({ ...f, detail: '' }, { ...t, detail: '' });
  });

  it('replaces Host from the absolute URI and strips proxy and forwarding headers (HA-20, CR-01..04)', async () => {
    const response = await sendRequest({
      proxyPort: b.proxyPort,
      path: `http://api.example.test:${plain.port}/allowed/headers`,
      headers: {
        host: 'evil.example.test',
        'proxy-authorization': 'Basic eDp5',
        'proxy-connection': 'keep-alive',
        'x-forwarded-for': '6.6.6.6',
        forwarded: 'for=6.6.6.6',
        'x-boundary-policy': 'spoofed',
        connection: 'x-hop',
        'x-hop': '1',
      },
    });
    assert.equal(response.status, 200);
    const seen = json(response).headers as Record<string, string>;
    assert.equal(seen.host, `api.example.test:${plain.port}`);
    for (const name of ['proxy-authorization', 'proxy-connection', 'x-forwarded-for', 'forwarded', 'x-boundary-policy', 'x-hop']) {
      assert.equal(seen[name], undefined, name);
    }
    assert.equal(seen.via, '1.1 boundary');
  });

  it('relays a request body on an allowed POST', async () => {
    const response = await sendRequest({
      proxyPort: b.proxyPort,
      method: 'POST',
      path: `http://api.example.test:${plain.port}/allowed/post`,
      body: 'hello body',
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(response.status, 200);
    assert.equal(json(response).body, 'hello body');
  });
});
