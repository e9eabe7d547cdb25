// Issue 17 (SigV4): a WebSocket upgrade on a `credential_signing` endpoint is re-signed with the provider's AWS keys
// like any request (API Gateway WebSocket APIs authorise the handshake with IAM), checked by an independent aws4
// verification of the handshake the origin received. Before this, the upgrade went upstream with the workload's
// placeholder signature.

import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { verifySigV4 } from '../harness/sigv4-verifier.js';
import { openWebSocket, type OriginRecord, type WsOrigin, wsOrigin, type WsTransport } from '../harness/ws.js';

const KEYS = { accessKeyId: 'AKIDWEBSOCKET', secretAccessKey: 'websocket-secret-key' } as const;
const PLAIN_HOST = 'ws.execute-api.us-east-1.example.test';
const TLS_HOST = 'wss.execute-api.us-east-1.example.test';

function policy(plainPort: number, tlsPort: number): string {
  const endpoint = (host: string, port: number) => `      - host: ${host}
        port: ${port}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/socket" }
          - allow: { method: WEBSOCKET_TEXT, path: "/socket" }
        credential_signing: sigv4
        signing_service: execute-api
        signing_region: us-east-1
`;
  return `version: 1
network_policies:
  aws_ws:
    endpoints:
${endpoint(PLAIN_HOST, plainPort)}${endpoint(TLS_HOST, tlsPort)}    binaries: [{ path: "/**" }]
`;
}

function credentials(plainPort: number, tlsPort: number): string {
  return `providers:
  aws:
    env:
      AWS_ACCESS_KEY_ID: ${KEYS.accessKeyId}
      AWS_SECRET_ACCESS_KEY: ${KEYS.secretAccessKey}
    endpoints:
      - { host: ${PLAIN_HOST}, port: ${plainPort} }
      - { host: ${TLS_HOST}, port: ${tlsPort} }
`;
}

/** The handshake as the origin received it, in the shape the verifier reads. */
function asRequest(record: Extract<OriginRecord, { kind: 'upgrade' }>): IncomingMessage {
  return { method: 'GET', url: record.url, headers: record.headers } as IncomingMessage;
}

describe('issue 17: SigV4 on WebSocket upgrades', () => {
  let plain: WsOrigin;
  let secure: WsOrigin;
  let b: RunningBoundary;
  let dir: string;
  let source: FileCredentialSource;

  before(async () => {
    const pki = await makeTestPki();
    plain = await wsOrigin();
    secure = await wsOrigin({ tls: { ca: pki.ca, names: [TLS_HOST] } });
    dir = await mkdtemp(join(tmpdir(), 'boundary-sigv4-ws-'));
    source = (await credentialsFile(dir, credentials(plain.port, secure.port))).source;
    b = await startBoundary({
      policy: policy(plain.port, secure.port),
      names: { [PLAIN_HOST]: ['127.0.0.1'], [TLS_HOST]: ['127.0.0.1'] },
      credentials: source,
      upstreamCaPem: pki.ca.certPem,
    });
  });

  after(async () => {
    await b.close();
    source.close();
    await plain.close();
    await secure.close();
    await rm(dir, { recursive: true, force: true });
  });

  const cases: ReadonlyArray<{ transport: WsTransport; host: string; origin: () => WsOrigin }> = [
    { transport: 'forward', host: PLAIN_HOST, origin: () => plain },
    { transport: 'connect-tls', host: TLS_HOST, origin: () => secure },
  ];
  for (const { transport, host, origin } of cases) {
    it(`re-signs the upgrade with the provider keys (${transport}); the verifier accepts it and frames still flow`, async () => {
      const seen = origin().records.length;
      const opened = await openWebSocket({
        proxyPort: b.proxyPort,
        transport,
        host,
        port: origin().port,
        path: '/socket?stage=prod',
        caPem: b.caPem,
        // The workload's own signature, made with placeholder keys: it must never reach the origin.
        headers: { authorization: `AWS4-HMAC-SHA256 Credential=${PH}AWS_ACCESS_KEY_ID/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host, Signature=${'0'.repeat(64)}`, 'x-amz-date': '20260101T000000Z' },
      });
      assert.equal(opened.status, 101, opened.head);
      const upgrade = (await origin().waitFor((r) => r.kind === 'upgrade' && origin().records.indexOf(r) >= seen)) as Extract<OriginRecord, { kind: 'upgrade' }>;
      const verified = verifySigV4(asRequest(upgrade), Buffer.alloc(0), KEYS);
      assert.equal(verified.verdict, 'valid');
      assert.equal(verified.region, 'us-east-1');
      assert.equal(verified.contentSha256, 'UNSIGNED-PAYLOAD');
      assert.equal(upgrade.headers['x-amz-date'] === '20260101T000000Z', false, 'the workload x-amz-date is replaced');
      assert.equal(upgrade.headers['sec-websocket-extensions'], undefined, 'the extension offer is dropped before signing');
      opened.client.sendText('hello');
      const echoed = await opened.client.next();
      assert.equal(echoed.payload.toString(), 'echo:hello');
      const signed = b.log.decisions().map((e) => (e.unmapped as Record<string, unknown> | undefined)?.sigv4).filter((s) => s !== undefined);
      assert.deepEqual(signed.at(-1), { service: 'execute-api', region: 'us-east-1', mode: 'unsigned_payload' });
      assert.ok(!b.log.text().includes(KEYS.secretAccessKey), 'the secret never reaches a log line');
      opened.client.socket.destroy();
    });
  }
});
