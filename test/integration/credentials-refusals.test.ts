import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { exchange, PH, type ProbeOrigin, probeOrigin, proxySocket, readResponse } from '../harness/credential-parts.js';
import { type CredentialStack, credentialStack, HOSTS, type RequestSpec, type Transport } from '../harness/credential-stack.js';
import { json, openTunnel } from '../harness/proxy-client.js';

const TOKEN = 'tok-7d02be';
const PROBE = 'probe.example.test';
const ENCODED = 'openshell%3Aresolve%3Aenv%3AAPI_TOKEN';
const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

let s: CredentialStack;
let probe: ProbeOrigin;

before(async () => {
  probe = await probeOrigin();
  s = await credentialStack({
    values: { token: TOKEN, query: 'q-7d02be', basic: 'pw-7d02be' },
    extraNames: [PROBE],
    extraPolicy: `      - host: ${PROBE}
        ports: [${probe.port}]
        protocol: rest
        enforcement: enforce
        access: full
`,
  });
});

after(async () => {
  await s?.close();
  await probe?.close();
});

interface Case {
  readonly name: string;
  readonly host: string;
  readonly spec: RequestSpec;
  readonly status: number;
  readonly error: string;
  readonly reason: string;
}

const CASES: readonly Case[] = [
  {
    name: 'a placeholder bound to another endpoint',
    host: HOSTS.other,
    spec: { path: '/r/mismatch', headers: { authorization: `Bearer ${PH}API_TOKEN` } },
    status: 403,
    error: 'credential_endpoint_mismatch',
    reason: 'credential-endpoint-mismatch',
  },
  {
    name: 'an unknown key',
    host: HOSTS.api,
    spec: { path: '/r/unknown', headers: { authorization: `Bearer ${PH}NO_SUCH_KEY` } },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'an unknown key inside Basic credentials',
    host: HOSTS.api,
    spec: { path: '/r/basic-unknown', headers: { authorization: `Basic ${b64(`user:${PH}NO_SUCH_KEY`)}` } },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a leftover marker in a header shape that is not substituted',
    host: HOSTS.api,
    spec: { path: '/r/leftover', headers: { 'x-note': `see ${PH}API_TOKEN here` } },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a percent-encoded placeholder in the query',
    host: HOSTS.api,
    spec: { path: `/r/encoded-query?k=${ENCODED}` },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a percent-encoded placeholder in the path',
    host: HOSTS.api,
    spec: { path: `/r/encoded-path/${ENCODED}` },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a double percent-encoded placeholder in the query',
    host: HOSTS.api,
    spec: { path: '/r/double?k=openshell%253Aresolve%253Aenv%253AAPI_TOKEN' },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a percent-encoded placeholder in a header',
    host: HOSTS.api,
    spec: { path: '/r/encoded-header', headers: { 'x-api-key': ENCODED } },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a resolved value that is unsafe as a path segment',
    host: HOSTS.api,
    spec: { path: `/r/slashy/${PH}SLASHY/x` },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a placeholder in a body on an endpoint without body rewrite',
    host: HOSTS.api,
    spec: { method: 'POST', path: '/r/body', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ t: `${PH}API_TOKEN` }) },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a percent-encoded placeholder in a form body without body rewrite',
    host: HOSTS.api,
    spec: { method: 'POST', path: '/r/form', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `a=1&k=${ENCODED}` },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'an unknown key in a body on an endpoint with body rewrite',
    host: HOSTS.rewrite,
    spec: { method: 'POST', path: '/r/rewrite-unknown', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ t: `${PH}NO_SUCH_KEY` }) },
    status: 500,
    error: 'credential_unavailable',
    reason: 'credential-unavailable',
  },
  {
    name: 'a body over 256 KiB on an endpoint with body rewrite',
    host: HOSTS.rewrite,
    spec: { method: 'POST', path: '/r/too-large', headers: { 'content-type': 'text/plain' }, body: 'x'.repeat(262_145) },
    status: 413,
    error: 'credential_body_too_large',
    reason: 'credential-body-too-large',
  },
];

describe('credential refusals: exact status and error code, nothing of the request reaches an origin', () => {
  for (const transport of ['forward', 'connect'] as const satisfies readonly Transport[]) {
    for (const c of CASES) {
      it(`${transport}: ${c.name} -> ${c.status} ${c.error}`, async () => {
        const origins = [s.plain, s.secure, s.otherPlain, s.otherSecure];
        const seen = origins.map((o) => o.seen.length);
        const response = await s.through(transport, c.host, c.spec);
        assert.equal(response.status, c.status, response.body);
        assert.equal(json(response).error, c.error);
        assert.equal(typeof json(response).message, 'string');
        assert.deepEqual(
          origins.map((o) => o.seen.length),
          seen,
          'no origin received the request',
        );
        const path = c.spec.path.split('?')[0]?.split('/').slice(0, 3).join('/') ?? '';
        const event = await s.b.log.waitFor((e) => e.class_uid === 4002 && e.http_request?.url?.path?.startsWith(path) === true);
        assert.equal(event.action, 'Denied');
        assert.equal(event.unmapped.reason_code, c.reason);
        assert.equal(event.unmapped.status_code, c.status);
        const line = JSON.stringify(event);
        for (const banned of ['openshell', 'NO_SUCH_KEY', 'API_TOKEN', 'SLASHY', '?k=']) assert.equal(line.includes(banned), false, `event holds ${banned}`);
      });
    }
  }
});

/** A request head to the probe origin, in absolute form (forward) or origin form (inside a tunnel). */
function probeHead(transport: Transport, path: string, framing: string): string {
  const authority = `${PROBE}:${probe.port}`;
  const target = transport === 'forward' ? `http://${authority}${path}` : path;
  return `POST ${target} HTTP/1.1\r\nHost: ${authority}\r\nContent-Type: text/plain\r\n${framing}\r\n`;
}

async function probeSocket(transport: Transport): Promise<Socket> {
  if (transport === 'forward') return proxySocket(s.b.proxyPort);
  const tunnel = await openTunnel(s.b.proxyPort, `${PROBE}:${probe.port}`);
  assert.equal(tunnel.status, 200);
  return tunnel.socket;
}

/** Waits (on the origin's own events, bounded) until it has received exactly `bytes` body bytes. */
async function untilReceived(bytes: number): Promise<void> {
  for (let i = 0; i < 1_000 && probe.received().length < bytes; i++) await once(probe, 'body');
  assert.equal(probe.received().length, bytes);
}

describe('split markers in a streamed body (CR-12/13): refused before any of the marker reaches upstream', () => {
  const PAD = 'a'.repeat(2_000);
  const FIRST = `${PAD}openshell:reso`;
  const SECOND = 'lve:env:API_TOKEN and the rest';
  // The scanner holds back 3 x the longest marker; everything before that is released upstream.
  const RELEASED = FIRST.length - 69;

  for (const transport of ['forward', 'connect'] as const satisfies readonly Transport[]) {
    it(`${transport}: a marker split across two TCP writes -> 500 credential_unavailable; the origin saw only the padding`, async () => {
      const completed = probe.completed();
      const socket = await probeSocket(transport);
      try {
        const response = readResponse(socket);
        socket.write(probeHead(transport, '/split-writes', `Content-Length: ${FIRST.length + SECOND.length}\r\n`) + FIRST);
        // The first write was released (minus the held tail) before the second is sent: two reads for sure.
        await untilReceived(RELEASED);
        socket.write(SECOND);
        const answer = await response;
        assert.equal(answer.status, 500);
        assert.equal((JSON.parse(answer.body) as { error: string }).error, 'credential_unavailable');
        assert.equal(probe.received().toString('latin1'), PAD.slice(0, RELEASED));
        assert.equal(probe.completed(), completed, 'the upstream request never completed');
      } finally {
        socket.destroy();
      }
    });

    it(`${transport}: a marker split across two chunks of a chunked body -> 500 credential_unavailable`, async () => {
      const completed = probe.completed();
      const socket = await probeSocket(transport);
      try {
        const a = 'b'.repeat(50) + 'openshell:re';
        const c = 'solve:env:API_TOKEN';
        const body = `${a.length.toString(16)}\r\n${a}\r\n${c.length.toString(16)}\r\n${c}\r\n0\r\n\r\n`;
        const answer = await exchange(socket, probeHead(transport, '/split-chunks', 'Transfer-Encoding: chunked\r\n') + body);
        assert.equal(answer.status, 500);
        assert.equal((JSON.parse(answer.body) as { error: string }).error, 'credential_unavailable');
        assert.equal(probe.received().toString('latin1').includes('openshell'), false);
        assert.equal(probe.completed(), completed);
      } finally {
        socket.destroy();
      }
    });
  }

  it('forward: a clean streamed body larger than the held tail arrives whole and unchanged', async () => {
    const socket = await proxySocket(s.b.proxyPort);
    try {
      const body = 'z'.repeat(100_000);
      const answer = await exchange(socket, probeHead('forward', '/clean', `Content-Length: ${body.length}\r\n`) + body);
      assert.equal(answer.status, 200);
      assert.equal(probe.received().toString('latin1'), body);
    } finally {
      socket.destroy();
    }
  });
});
