import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { encodeUnreserved } from '../../src/credentials/substitute.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { PH } from '../harness/credential-parts.js';
import { type CredentialStack, credentialStack, HOSTS, type RequestSpec, type Transport } from '../harness/credential-stack.js';
import { json, openTunnel, readAll, sendRequest, tlsOverTunnel } from '../harness/proxy-client.js';
import type { SeenRequest } from '../harness/servers.js';

const run = promisify(execFile);
const CURL_TIMEOUT_S = '10';
const TOKEN = 'tok-3f9a1c';
const QUERY = 'q v+&=3f9a1c';
const BASIC = 'pw:3f9a1c';
const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

let s: CredentialStack;

before(async () => {
  s = await credentialStack({ values: { token: TOKEN, query: QUERY, basic: BASIC } });
});

after(async () => {
  await s?.close();
});

interface Slot {
  readonly name: string;
  readonly host: string;
  readonly spec: RequestSpec;
  readonly check: (seen: SeenRequest) => void;
}

const SLOTS: readonly Slot[] = [
  {
    name: 'a whole header value',
    host: HOSTS.api,
    spec: { path: '/v1/whole', headers: { 'x-api-key': `${PH}API_TOKEN` } },
    check: (seen) => assert.equal(seen.headers['x-api-key'], TOKEN),
  },
  {
    name: 'a Bearer token (exactly one Authorization header)',
    host: HOSTS.api,
    spec: { path: '/v1/bearer', headers: { authorization: `Bearer ${PH}API_TOKEN` } },
    check: (seen) => {
      assert.equal(seen.headers.authorization, `Bearer ${TOKEN}`);
      assert.equal(seen.rawHeaders.filter((h) => h.toLowerCase() === 'authorization').length, 1);
    },
  },
  {
    name: 'Basic credentials, decoded and re-encoded',
    host: HOSTS.api,
    spec: { path: '/v1/basic', headers: { authorization: `Basic ${b64(`user:${PH}BASIC_PASS`)}` } },
    check: (seen) => assert.equal(seen.headers.authorization, `Basic ${b64(`user:${BASIC}`)}`),
  },
  {
    name: 'a query value, percent-encoded for its slot',
    host: HOSTS.api,
    spec: { path: `/v1/query?k=${PH}QUERY_KEY&x=1` },
    check: (seen) => assert.equal(seen.url, `/v1/query?k=${encodeUnreserved(QUERY)}&x=1`),
  },
  {
    name: 'a path segment joined with other text',
    host: HOSTS.api,
    spec: { path: `/v1/bot${PH}API_TOKEN/send` },
    check: (seen) => assert.equal(seen.url, `/v1/bot${TOKEN}/send`),
  },
  {
    name: 'a JSON body on an endpoint with request_body_credential_rewrite (Content-Length recomputed)',
    host: HOSTS.rewrite,
    spec: {
      method: 'POST',
      path: '/v1/body',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: `${PH}API_TOKEN`, note: 'keep' }),
    },
    check: (seen) => {
      assert.deepEqual(JSON.parse(seen.body), { token: TOKEN, note: 'keep' });
      assert.equal(seen.headers['content-length'], String(Buffer.byteLength(seen.body)));
      assert.equal(seen.rawHeaders.filter((h) => h.toLowerCase() === 'content-length').length, 1);
    },
  },
];

function originFor(transport: Transport) {
  return transport === 'forward' ? s.plain : s.secure;
}

function httpEvents(path: string): OcsfEvent[] {
  return s.b.log.events().filter((e) => e.class_uid === 4002 && e.http_request?.url?.path?.startsWith(path) === true);
}

describe('credential injection: the real value arrives in every slot on a bound endpoint', () => {
  for (const transport of ['forward', 'connect'] as const) {
    for (const slot of SLOTS) {
      it(`${transport}: substitutes ${slot.name}`, async () => {
        const origin = originFor(transport);
        const before = origin.seen.length;
        const response = await s.through(transport, slot.host, slot.spec);
        assert.equal(response.status, 200, response.body);
        assert.equal(origin.seen.length, before + 1);
        const seen = origin.seen[origin.seen.length - 1] as SeenRequest;
        slot.check(seen);
        assert.equal(JSON.stringify(seen).includes('openshell'), false, 'no placeholder reaches the bound origin either');
        const [event] = httpEvents(slot.spec.path.split('?')[0]?.split('openshell')[0] ?? '/');
        assert.equal(event?.action, 'Allowed');
        assert.equal(JSON.stringify(event).includes('openshell'), false, 'events carry no placeholder');
      });
    }
  }

  it('connect: terminates TLS on an L4 endpoint a provider is bound to, and injects there', async () => {
    const response = await s.through('connect', HOSTS.l4, { path: '/forced', headers: { authorization: `Bearer ${PH}API_TOKEN` } });
    assert.equal(response.status, 200, response.body);
    assert.equal(s.secure.seen.at(-1)?.headers.authorization, `Bearer ${TOKEN}`);
    // The origin's echo of it is masked on the way back (docs/credentials.md#echoed-secrets).
    assert.match(String((json(response).headers as Record<string, string>).authorization), /^Bearer \[redacted\]/);
    const open = s.b.log.events().find((e) => e.class_uid === 4001 && e.dst_endpoint?.domain === HOSTS.l4 && e.activity_name === 'Open');
    assert.equal(open?.unmapped.inspect, true);
  });

  it('curl through intercepted CONNECT gets the real Bearer value to the origin', async () => {
    const caFile = join(s.b.dir, 'boundary-ca.pem');
    await writeFile(caFile, s.b.caPem as string);
    const url = `https://${HOSTS.api}:${s.ports.secure}/v1/curl`;
    const args = ['-sS', '--max-time', CURL_TIMEOUT_S, '--noproxy', '', '-x', `http://127.0.0.1:${s.b.proxyPort}`, '--cacert', caFile];
    const { stdout } = await run('curl', [...args, '-H', `Authorization: Bearer ${PH}API_TOKEN`, url]);
    const echoed = JSON.parse(stdout) as SeenRequest;
    assert.equal(echoed.url, '/v1/curl');
    assert.equal(s.secure.seen.at(-1)?.headers.authorization, `Bearer ${TOKEN}`);
    assert.ok(!stdout.includes(TOKEN), 'the origin echoed it; curl got it masked');
  });
});

describe('credential binding: a placeholder never reaches another origin', () => {
  for (const transport of ['forward', 'connect'] as const) {
    it(`${transport}: refuses a placeholder sent to another allowed host with 403 credential_endpoint_mismatch; zero bytes reach it`, async () => {
      const front = transport === 'forward' ? s.frontPlain : s.frontSecure;
      const origin = transport === 'forward' ? s.otherPlain : s.otherSecure;
      const bytes = front.bytes();
      const seen = origin.seen.length;
      const path = `/mismatch-${transport}`;
      const response = await s.through(transport, HOSTS.other, { path, headers: { authorization: `Bearer ${PH}API_TOKEN` } });
      assert.equal(response.status, 403);
      assert.equal(response.headers.connection, 'close');
      assert.equal(json(response).error, 'credential_endpoint_mismatch');
      assert.equal(typeof json(response).message, 'string');
      assert.equal(front.bytes(), bytes, 'not one byte reached the other origin');
      assert.equal(origin.seen.length, seen);
      const event = await s.b.log.waitFor((e) => e.class_uid === 4002 && e.http_request?.url?.path === path);
      assert.equal(event.action, 'Denied');
      assert.equal(event.severity, 'High');
      assert.equal(event.firewall_rule?.type, 'credential-binding');
      assert.equal(event.unmapped.reason_code, 'credential-endpoint-mismatch');
      const finding = await s.b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'credential-endpoint-mismatch');
      assert.equal(finding.severity, 'High');
      assert.equal(s.b.log.text().includes('API_TOKEN'), false, 'no key name in any log line');
    });

    it(`${transport}: the same origin gets an unrelated request fine (the host itself is allowed)`, async () => {
      const response = await s.through(transport, HOSTS.other, { path: `/plain-${transport}` });
      assert.equal(response.status, 200);
    });
  }

  it('forward: a provider endpoint path glob scopes the key: outside /v1/** the same host gets a mismatch', async () => {
    const seen = s.plain.seen.length;
    const inside = await s.through('forward', HOSTS.scoped, { path: '/v1/in', headers: { 'x-api-key': `${PH}API_TOKEN` } });
    assert.equal(inside.status, 200);
    assert.equal(s.plain.seen.at(-1)?.headers['x-api-key'], TOKEN);
    const outside = await s.through('forward', HOSTS.scoped, { path: '/v2/out', headers: { 'x-api-key': `${PH}API_TOKEN` } });
    assert.equal(outside.status, 403);
    assert.equal(json(outside).error, 'credential_endpoint_mismatch');
    // Dot segments are resolved before the scope is chosen: /v1/../v2 is /v2.
    const climbed = await s.through('forward', HOSTS.scoped, { path: '/v1/../v2/out', headers: { 'x-api-key': `${PH}API_TOKEN` } });
    assert.equal(climbed.status, 403);
    assert.equal(s.plain.seen.length, seen + 1);
  });
});

describe('uninspected credentialed routes (docs/credentials.md#inspectable-routes-only)', () => {
  it('refuses CONNECT to a tls: skip route a provider is bound to with 403 uninspected_credentials, a finding, and no dial', async () => {
    const dials = s.b.dials.length;
    const tunnel = await openTunnel(s.b.proxyPort, `${HOSTS.skip}:${s.ports.secure}`);
    assert.equal(tunnel.status, 403);
    const raw = await readAll(tunnel.socket, tunnel.rest);
    assert.match(tunnel.head, /connection: close/i);
    assert.equal((JSON.parse(raw.slice(raw.indexOf('{'))) as { error: string }).error, 'uninspected_credentials');
    assert.equal(s.b.dials.length, dials);
    const event = await s.b.log.waitFor((e) => e.class_uid === 4001 && e.dst_endpoint?.domain === HOSTS.skip);
    assert.equal(event.action, 'Denied');
    assert.equal(event.unmapped.reason_code, 'uninspected-credentials');
    await s.b.log.waitFor((e) => e.class_uid === 2004 && e.unmapped.finding === 'uninspected-credentials');
  });

  it('relays the raw tunnel when the endpoint sets allow_uninspected_credentials (the origin certificate is seen as is)', async () => {
    const tunnel = await openTunnel(s.b.proxyPort, `${HOSTS.hatch}:${s.ports.secure}`);
    assert.equal(tunnel.status, 200);
    const socket = await tlsOverTunnel(tunnel.socket, { servername: HOSTS.hatch, ca: s.pki.ca.certPem });
    try {
      const response = await sendRequest({ socket, path: '/raw', headers: { host: `${HOSTS.hatch}:${s.ports.secure}` } });
      assert.equal(response.status, 200);
    } finally {
      socket.destroy();
    }
  });
});

describe('echoed secrets in response headers (CR-23, pinned: headers redacted, bodies relayed as they are)', () => {
  it('redacts a bound secret an upstream echoes in a response header, in Bearer, Basic and raw form', async () => {
    const port = s.ports.echo;
    const bearer = await sendRequest({
      proxyPort: s.b.proxyPort,
      path: `http://${HOSTS.echo}:${port}/echo`,
      headers: { authorization: `Bearer ${PH}API_TOKEN`, 'x-api-key': `${PH}API_TOKEN` },
    });
    assert.equal(bearer.status, 200);
    assert.equal(bearer.headers['x-echo-authorization'], 'Bearer [redacted]');
    assert.equal(bearer.headers['x-echo-api-key'], '[redacted]');
    const basic = await sendRequest({
      proxyPort: s.b.proxyPort,
      path: `http://${HOSTS.echo}:${port}/echo`,
      headers: { authorization: `Basic ${b64(`user:${PH}BASIC_PASS`)}` },
    });
    assert.equal(basic.headers['x-echo-authorization'], 'Basic [redacted]');
  });
});
