// Regression of issue 15, "A refused body sends the request head upstream first": a credential placeholder in a
// body on an endpoint without body rewrite was caught by the streaming scanner only after the head (injected
// credentials and all) had gone upstream, so the origin saw a truncated, authenticated request. On a route that
// can carry credentials the body is now held (up to MAX_BODY_CHECK_BYTES) and decided before the head leaves.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_BODY_CHECK_BYTES } from '../../src/chain/credential-injection.js';
import { exchange, PH, proxySocket } from '../harness/credential-parts.js';
import { type CredentialStack, credentialStack, HOSTS, type RequestSpec, type Transport } from '../harness/credential-stack.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { json } from '../harness/proxy-client.js';

const TOKEN = 'tok-15b0d7';

describe('issue 15: a refused body is decided before the request head leaves', { timeout: SUITE_TIMEOUT_MS }, () => {
  let s: CredentialStack;

  before(async () => {
    // other.example.test is reached only through byte-counting fronts: bind the credentials to it there too.
    s = await credentialStack({
      values: { token: TOKEN, query: 'q-15b0d7', basic: 'pw-15b0d7' },
      // The stack hands over all its ports, though extraEndpoints' type names three.
      extraEndpoints: (ports) => {
        const { otherPlain, otherSecure } = ports as CredentialStack['ports'];
        return `      - { host: ${HOSTS.other}, port: ${otherPlain} }\n      - { host: ${HOSTS.other}, port: ${otherSecure} }\n`;
      },
    });
  });

  after(async () => {
    await s?.close();
  });

  const front = (transport: Transport) => (transport === 'forward' ? s.frontPlain : s.frontSecure);

  const refused: readonly { name: string; spec: RequestSpec; status: number; error: string; reason: string }[] = [
    {
      name: 'a placeholder in a JSON body',
      spec: { method: 'POST', path: '/b/json', headers: { authorization: `Bearer ${PH}API_TOKEN`, 'content-type': 'application/json' }, body: JSON.stringify({ t: `${PH}API_TOKEN` }) },
      status: 500,
      error: 'credential_unavailable',
      reason: 'credential-unavailable',
    },
    {
      name: 'a percent-encoded placeholder at the end of a long body',
      spec: { method: 'POST', path: '/b/long', headers: { 'content-type': 'text/plain' }, body: `${'a'.repeat(100_000)}openshell%3Aresolve%3Aenv%3AAPI_TOKEN` },
      status: 500,
      error: 'credential_unavailable',
      reason: 'credential-unavailable',
    },
    {
      name: 'a placeholder within the held prefix of a body over MAX_BODY_CHECK_BYTES',
      spec: {
        method: 'POST',
        path: '/b/large',
        headers: { 'content-type': 'text/plain' },
        body: `${'x'.repeat(1_000)}${PH}API_TOKEN${'x'.repeat(MAX_BODY_CHECK_BYTES)}`,
      },
      status: 500,
      error: 'credential_unavailable',
      reason: 'credential-unavailable',
    },
  ];

  for (const transport of ['forward', 'connect'] as const satisfies readonly Transport[]) {
    for (const c of refused) {
      it(`${transport}: ${c.name} -> ${c.status} ${c.error}, and not one byte of the request reached the origin`, async () => {
        // A warm upstream socket (forward pool): the old code wrote the head to it at once.
        assert.equal((await s.through(transport, HOSTS.other, { path: '/b/warm' })).status, 200);
        const bytes = front(transport).bytes();
        const response = await s.through(transport, HOSTS.other, c.spec);
        assert.equal(response.status, c.status, response.body);
        assert.equal(json(response).error, c.error);
        assert.equal(front(transport).bytes(), bytes, 'nothing was written upstream');
        const event = await s.b.log.waitFor((e) => e.class_uid === 4002 && e.http_request?.url?.path === c.spec.path);
        assert.equal(event.action, 'Denied');
        assert.equal(event.unmapped.reason_code, c.reason);
      });
    }

    for (const size of [70_000, 3 * MAX_BODY_CHECK_BYTES]) {
      it(`${transport}: a clean ${size}-byte body on a credentialed route arrives whole, after the head with the credential`, async () => {
        // Over MAX_BODY_CHECK_BYTES the held prefix and the rest stream on: an upload is never refused for its size.
        const body = `${'z'.repeat(size)} no placeholder here`;
        const seen = s.otherPlain.seen.length + s.otherSecure.seen.length;
        const response = await s.through(transport, HOSTS.other, {
          method: 'POST',
          path: '/b/clean',
          headers: { authorization: `Bearer ${PH}API_TOKEN`, 'content-type': 'text/plain' },
          body,
        });
        assert.equal(response.status, 200, response.body);
        const origin = transport === 'forward' ? s.otherPlain : s.otherSecure;
        assert.equal(s.otherPlain.seen.length + s.otherSecure.seen.length, seen + 1);
        const got = origin.seen.at(-1);
        assert.equal(got?.body, body);
        assert.equal(got?.headers.authorization, `Bearer ${TOKEN}`);
        assert.equal(got?.headers['content-length'], String(body.length));
      });
    }
  }

  it('forward: a marker split across two chunks of a chunked body is refused with nothing written upstream', async () => {
    assert.equal((await s.through('forward', HOSTS.other, { path: '/b/warm' })).status, 200);
    const bytes = s.frontPlain.bytes();
    const socket = await proxySocket(s.b.proxyPort);
    try {
      const a = `${'b'.repeat(50)}openshell:re`;
      const c = 'solve:env:API_TOKEN';
      const authority = `${HOSTS.other}:${s.ports.otherPlain}`;
      const answer = await exchange(
        socket,
        `POST http://${authority}/b/chunked HTTP/1.1\r\nHost: ${authority}\r\nTransfer-Encoding: chunked\r\n\r\n` +
          `${a.length.toString(16)}\r\n${a}\r\n${c.length.toString(16)}\r\n${c}\r\n0\r\n\r\n`,
      );
      assert.equal(answer.status, 500);
      assert.equal((JSON.parse(answer.body) as { error: string }).error, 'credential_unavailable');
      assert.equal(s.frontPlain.bytes(), bytes, 'nothing was written upstream');
    } finally {
      socket.destroy();
    }
  });
});
