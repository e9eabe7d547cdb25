// Issue 18: gRPC through inspection. @grpc/grpc-js client and server, through CONNECT (the client's proxy setting)
// and transparently (policy DNS's synthetic address): the four call shapes, `path` rules on /package.Service/Method,
// a denial the client sees as PERMISSION_DENIED naming the policy, and a credential placeholder in metadata.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { type EchoClient, echoClient, type GrpcEcho, grpcEchoServer } from '../harness/grpc-echo.js';

const run = promisify(execFile);
const SECRET = 'grpc-secret-7Hq2';

function policy(port: number): string {
  return `version: 1
network_policies:
  echo_grpc:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: POST, path: "/boundary.test.Echo/*" }
        deny_rules:
          - method: POST
            path: /boundary.test.Echo/Forbidden
    binaries: [{ path: "/**" }]
`;
}

async function syntheticAddress(b: RunningBoundary, name: string): Promise<string> {
  const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+tries=1', '+time=3', '+short', name, 'A']);
  return stdout.trim();
}

describe('issue 18: gRPC through boundary', () => {
  let b: RunningBoundary;
  let server: GrpcEcho;
  let source: FileCredentialSource;
  let dir = '';
  const clients: EchoClient[] = [];

  before(async () => {
    const pki = await makeTestPki();
    server = await grpcEchoServer({ ca: pki.ca });
    dir = await mkdtemp(join(tmpdir(), 'boundary-grpc-'));
    ({ source } = await credentialsFile(
      dir,
      `providers:\n  acme:\n    env:\n      API_TOKEN: ${JSON.stringify(SECRET)}\n    endpoints:\n      - { host: api.example.test, port: ${server.port} }\n`,
    ));
    b = await startBoundary({ policy: policy(server.port), upstreamCaPem: pki.ca.certPem, credentials: source });
  });

  after(async () => {
    for (const c of clients) c.close();
    await b?.close();
    await server?.close();
    await source?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const through = {
    // grpc-js turns grpc_proxy / https_proxy into exactly this channel option, with the proxy as the channel target.
    connect: (): EchoClient =>
      echoClient(`ipv4:127.0.0.1:${b.proxyPort}`, {
        caPem: b.caPem as string,
        authority: `api.example.test:${server.port}`,
        channel: { 'grpc.http_connect_target': `dns:///api.example.test:${server.port}` },
      }),
    transparent: async (): Promise<EchoClient> =>
      echoClient(`ipv4:${await syntheticAddress(b, 'api.example.test')}:${server.port}`, { caPem: b.caPem as string, authority: `api.example.test:${server.port}` }),
  };

  for (const route of ['connect', 'transparent'] as const) {
    it(`runs unary, server-streaming, client-streaming and bidirectional calls (${route})`, async () => {
      const client = await through[route]();
      clients.push(client);
      assert.equal((await client.unary('hi')).text, 'unary:hi');
      assert.deepEqual((await client.serverStream('s')).map((n) => n.text), ['s:0', 's:1', 's:2']);
      assert.equal((await client.clientStream(['a', 'b', 'c'])).text, 'a+b+c');
      assert.deepEqual((await client.bidi(['x', 'y', 'z'])).map((n) => n.text), ['echo:x', 'echo:y', 'echo:z']);
      const events = b.log.events().filter((e) => e.class_uid === 4002 && e.unmapped?.http_version === '2');
      for (const method of ['Unary', 'ServerStream', 'ClientStream', 'Bidi']) {
        assert.ok(events.some((e) => e.http_request?.url?.path === `/boundary.test.Echo/${method}` && e.action_id === 1), `one allowed event for ${method}`);
      }
    });

    it(`denies a method a deny rule names: the client sees PERMISSION_DENIED with the policy and reason (${route})`, async () => {
      const client = await through[route]();
      clients.push(client);
      const before = server.calls.length;
      const err = (await client.forbidden('no').then(
        () => assert.fail('the call was allowed'),
        (e: unknown) => e,
      )) as ServiceError;
      assert.equal(err.code, GrpcStatus.PERMISSION_DENIED);
      assert.match(err.details, /policy echo_grpc/);
      assert.match(err.details, /reason deny-rule-matched/);
      assert.match(err.details, /\/boundary\.test\.Echo\/Forbidden/);
      assert.equal(server.calls.length, before, 'the server never saw the call');
      const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.action_id === 2 && e.http_request?.url?.path === '/boundary.test.Echo/Forbidden');
      assert.equal(event.unmapped?.reason_code, 'deny-rule-matched');
      assert.equal(event.unmapped?.status_code, 403);
    });

    it(`replaces a credential placeholder in metadata upstream and never lets it through (${route})`, async () => {
      const client = await through[route]();
      clients.push(client);
      const note = await client.unary('with-token', { authorization: `Bearer ${PH}API_TOKEN` });
      assert.equal(server.auths.at(-1), `Bearer ${SECRET}`);
      // The server's echo of it is masked length for length inside the message (docs/credentials.md#echoed-secrets).
      assert.match(String(note.auth), /^Bearer \[redacted\]\**$/);
      assert.equal(note.auth?.length, `Bearer ${SECRET}`.length);
      assert.ok(!JSON.stringify(b.log.events()).includes(SECRET), 'the secret is in no event');
    });
  }
});
