// Issue 17 (SigV4): requests on `credential_signing` endpoints are re-signed with the provider's AWS keys, checked by
// a real verifier (s3rver behind an aws4 signature check), driven by @aws-sdk/client-s3 holding placeholder keys.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { openTunnel, sendRequest, tlsOverTunnel } from '../harness/proxy-client.js';
import { BUCKET, forwardProxyHandler, S3RVER_KEYS, type VerifyingS3, verifyingS3 } from '../harness/sigv4-verifier.js';

const HOSTS = { auto: 's3.example.test', noBody: 'nobody.example.test', body: 'body.example.test', noKeys: 'nokeys.example.test' } as const;
/** An L4 endpoint (no protocol) over TLS: boundary intercepts it because it signs. */
const TLS_HOST = 'tls.s3.example.test';
/** The same, with no provider bound: it must still be intercepted, so the request is refused rather than tunnelled unsigned. */
const TLS_UNBOUND = 'unbound.s3.example.test';
const SESSION_TOKEN = 'session-token-value';

function policy(port: number, tlsPort = 0): string {
  const endpoint = (host: string, mode: string) => `      - host: ${host}
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
          - allow: { method: PUT, path: "/**" }
        credential_signing: ${mode}
        signing_service: s3
        signing_region: us-east-1
`;
  return `version: 1
network_policies:
  aws:
    endpoints:
${endpoint(HOSTS.auto, 'sigv4')}${endpoint(HOSTS.noBody, 'sigv4:no_body')}${endpoint(HOSTS.body, 'sigv4:body')}${endpoint(HOSTS.noKeys, 'sigv4')}      - host: ${TLS_HOST}
        port: ${tlsPort}
        credential_signing: sigv4:body
        signing_service: s3
        signing_region: us-east-1
      - host: ${TLS_UNBOUND}
        port: ${tlsPort}
        credential_signing: sigv4
        signing_service: s3
        signing_region: us-east-1
    binaries: [{ path: "/**" }]
`;
}

function credentials(port: number, tlsPort: number): string {
  return `providers:
  aws:
    env:
      AWS_ACCESS_KEY_ID: ${S3RVER_KEYS.accessKeyId}
      AWS_SECRET_ACCESS_KEY: ${S3RVER_KEYS.secretAccessKey}
      AWS_SESSION_TOKEN: ${SESSION_TOKEN}
    endpoints:
      - { host: ${HOSTS.auto}, port: ${port} }
      - { host: ${HOSTS.noBody}, port: ${port} }
      - { host: ${HOSTS.body}, port: ${port} }
      - { host: ${TLS_HOST}, port: ${tlsPort} }
`;
}

/** The workload's view: placeholder keys only, boundary as its proxy, or (`direct`) the verifier itself. */
function client(host: string, port: number, via: { proxyPort: number } | 'direct', keys = { accessKeyId: `${PH}AWS_ACCESS_KEY_ID`, secretAccessKey: 'placeholder-secret' }): S3Client {
  const config: S3ClientConfig = {
    region: 'us-east-1',
    endpoint: `http://${via === 'direct' ? '127.0.0.1' : host}:${port}`,
    forcePathStyle: true,
    credentials: keys,
    maxAttempts: 1,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    ...(via === 'direct' ? {} : { requestHandler: forwardProxyHandler(via.proxyPort) }),
  };
  return new S3Client(config);
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** The HTTP status of a failed SDK call: boundary's JSON refusals are not S3 XML, so the SDK reports a parse error. */
function statusOf(err: unknown): number | undefined {
  const e = err as { $metadata?: { httpStatusCode?: number }; $response?: { statusCode?: number } };
  return e.$metadata?.httpStatusCode ?? e.$response?.statusCode;
}

describe('issue 17: SigV4 signing on credential_signing endpoints', () => {
  let s3: VerifyingS3;
  let s3tls: VerifyingS3;
  let b: RunningBoundary;
  let dir: string;
  let source: FileCredentialSource;

  before(async () => {
    s3 = await verifyingS3();
    const pki = await makeTestPki();
    s3tls = await verifyingS3({ tls: await issueCertificate({ ca: pki.ca, kind: 'server', names: [TLS_HOST, TLS_UNBOUND], now: Date.now }) });
    dir = await mkdtemp(join(tmpdir(), 'boundary-sigv4-'));
    source = (await credentialsFile(dir, credentials(s3.port, s3tls.port))).source;
    const names = Object.fromEntries([...Object.values(HOSTS), TLS_HOST, TLS_UNBOUND].map((host) => [host, ['127.0.0.1']]));
    b = await startBoundary({ policy: policy(s3.port, s3tls.port), names, credentials: source, upstreamCaPem: pki.ca.certPem });
  });

  after(async () => {
    await b.close();
    source.close();
    await s3.close();
    await s3tls.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('s3rver alone accepts a wrong SigV4 signature, so the aws4 front is what verifies', async () => {
    const wrong = client(HOSTS.auto, s3.s3rverPort, 'direct', { accessKeyId: S3RVER_KEYS.accessKeyId, secretAccessKey: 'not-the-secret' });
    await wrong.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'unverified', Body: 'x' }));
  });

  it('the verifier rejects the placeholder keys and a wrong secret, and accepts the real keys, without boundary', async () => {
    const before = s3.seen.length;
    await assert.rejects(client(HOSTS.auto, s3.port, 'direct').send(new GetObjectCommand({ Bucket: BUCKET, Key: 'k' })), { name: 'SignatureDoesNotMatch' });
    const wrongSecret = client(HOSTS.auto, s3.port, 'direct', { accessKeyId: S3RVER_KEYS.accessKeyId, secretAccessKey: 'not-the-secret' });
    await assert.rejects(wrongSecret.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'k', Body: 'x' })), { name: 'SignatureDoesNotMatch' });
    await client(HOSTS.auto, s3.port, 'direct', { ...S3RVER_KEYS }).send(new PutObjectCommand({ Bucket: BUCKET, Key: 'direct', Body: 'x' }));
    assert.deepEqual(s3.seen.slice(before).map((r) => r.verdict), ['unknown-key', 'bad-signature', 'valid']);
  });

  it('signs an allowed PUT and GET with the provider keys (sigv4 auto: the body hash), accepted by the verifier', async () => {
    const before = s3.seen.length;
    const s3c = client(HOSTS.auto, s3.port, { proxyPort: b.proxyPort });
    await s3c.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'hello.txt', Body: 'hello through boundary' }));
    const got = await s3c.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'hello.txt' }));
    assert.equal(await got.Body?.transformToString(), 'hello through boundary');
    const [put, get] = s3.seen.slice(before);
    assert.equal(put?.verdict, 'valid');
    assert.equal(put?.contentSha256, sha256('hello through boundary'));
    assert.equal(put?.sessionToken, SESSION_TOKEN);
    assert.ok(put?.signedHeaders.includes('x-amz-security-token'));
    assert.equal(put?.region, 'us-east-1');
    assert.equal(get?.verdict, 'valid');
    const signed = b.log.decisions().map((e) => (e.unmapped as Record<string, unknown> | undefined)?.sigv4);
    const s3Body = { service: 's3', region: 'us-east-1', mode: 'sign_body' };
    assert.deepEqual(signed.slice(-2), [s3Body, s3Body], 'each decision event says how its request was signed');
    assert.ok(!b.log.text().includes(SESSION_TOKEN), 'the session token never reaches a log line');
  });

  it('signs keys that need percent-encoding and a query string as S3 expects', async () => {
    const before = s3.seen.length;
    const s3c = client(HOSTS.auto, s3.port, { proxyPort: b.proxyPort });
    const key = 'dir/with space+plus é~(1).txt';
    await s3c.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'odd key' }));
    const got = await s3c.send(new GetObjectCommand({ Bucket: BUCKET, Key: key, ResponseContentType: 'text/plain; charset=utf-8' }));
    assert.equal(await got.Body?.transformToString(), 'odd key');
    assert.deepEqual(s3.seen.slice(before).map((r) => r.verdict), ['valid', 'valid']);
  });

  it('sigv4:no_body signs UNSIGNED-PAYLOAD and streams the body; sigv4:body signs the real body hash', async () => {
    const before = s3.seen.length;
    await client(HOSTS.noBody, s3.port, { proxyPort: b.proxyPort }).send(new PutObjectCommand({ Bucket: BUCKET, Key: 'nb', Body: 'unsigned body' }));
    await client(HOSTS.body, s3.port, { proxyPort: b.proxyPort }).send(new PutObjectCommand({ Bucket: BUCKET, Key: 'b', Body: 'signed body' }));
    const [noBody, body] = s3.seen.slice(before);
    assert.equal(noBody?.verdict, 'valid');
    assert.equal(noBody?.contentSha256, 'UNSIGNED-PAYLOAD');
    assert.equal(body?.verdict, 'valid');
    assert.equal(body?.contentSha256, sha256('signed body'));
  });

  it('refuses with 403 credential_endpoint_mismatch, unsigned and unsent, when the AWS keys are bound to other endpoints', async () => {
    const before = s3.seen.length;
    const dials = b.dials.length;
    await assert.rejects(
      client(HOSTS.noKeys, s3.port, { proxyPort: b.proxyPort }).send(new PutObjectCommand({ Bucket: BUCKET, Key: 'nk', Body: 'x' })),
      (err) => statusOf(err) === 403,
    );
    assert.equal(s3.seen.length, before);
    assert.equal(b.dials.length, dials);
    assert.equal(b.log.decisions().at(-1)?.unmapped?.reason_code, 'credential-endpoint-mismatch');
  });

  it('refuses with 500 and a coded reason, sending nothing upstream, when the bound provider lacks the AWS secret', async () => {
    const lonely = await mkdtemp(join(tmpdir(), 'boundary-sigv4-nokey-'));
    const partial = (await credentialsFile(lonely, `providers:\n  aws:\n    env: { AWS_ACCESS_KEY_ID: ${S3RVER_KEYS.accessKeyId} }\n    endpoints: [{ host: ${HOSTS.auto}, port: ${s3.port} }]\n`)).source;
    const other = await startBoundary({ policy: policy(s3.port, s3tls.port), names: { [HOSTS.auto]: ['127.0.0.1'] }, credentials: partial });
    try {
      const before = s3.seen.length;
      await assert.rejects(
        client(HOSTS.auto, s3.port, { proxyPort: other.proxyPort }).send(new PutObjectCommand({ Bucket: BUCKET, Key: 'nk', Body: 'x' })),
        (err) => statusOf(err) === 500,
      );
      assert.equal(s3.seen.length, before);
      assert.equal(other.dials.length, 0);
      const event = other.log.decisions().at(-1);
      assert.equal(event?.unmapped?.reason_code, 'credential-unavailable');
      assert.equal((event?.unmapped as Record<string, unknown> | undefined)?.credential_reason, 'signing-keys-missing');
    } finally {
      await other.close();
      partial.close();
      await rm(lonely, { recursive: true, force: true });
    }
  });

  it('intercepts and signs a CONNECT to an L4 signing endpoint, replacing the workload\'s own signature headers', async () => {
    const before = s3tls.seen.length;
    const tunnel = await openTunnel(b.proxyPort, `${TLS_HOST}:${s3tls.port}`);
    assert.equal(tunnel.status, 200);
    const socket = await tlsOverTunnel(tunnel.socket, { servername: TLS_HOST, ca: b.caPem as string });
    try {
      const response = await sendRequest({
        socket,
        method: 'PUT',
        path: `/${BUCKET}/over-tls.txt`,
        headers: {
          host: `${TLS_HOST}:${s3tls.port}`,
          authorization: `AWS4-HMAC-SHA256 Credential=${PH}AWS_ACCESS_KEY_ID/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=${'0'.repeat(64)}`,
          'x-amz-date': '20260101T000000Z',
          'x-amz-content-sha256': 'UNSIGNED-PAYLOAD',
          'content-type': 'text/plain',
        },
        body: 'over tls',
      });
      assert.equal(response.status, 200, response.body);
    } finally {
      socket.destroy();
    }
    const [put] = s3tls.seen.slice(before);
    assert.equal(put?.verdict, 'valid');
    assert.equal(put?.contentSha256, sha256('over tls'), 'sigv4:body signs the body hash whatever the workload claimed');
  });

  it('intercepts a CONNECT to an L4 signing endpoint no provider binds and refuses its request instead of tunnelling it unsigned', async () => {
    const before = s3tls.seen.length;
    const tunnel = await openTunnel(b.proxyPort, `${TLS_UNBOUND}:${s3tls.port}`);
    assert.equal(tunnel.status, 200);
    const socket = await tlsOverTunnel(tunnel.socket, { servername: TLS_UNBOUND, ca: b.caPem as string });
    try {
      const response = await sendRequest({ socket, method: 'GET', path: `/${BUCKET}/over-tls.txt`, headers: { host: `${TLS_UNBOUND}:${s3tls.port}` } });
      assert.equal(response.status, 403, response.body);
      assert.equal(JSON.parse(response.body).error, 'credential_endpoint_mismatch');
    } finally {
      socket.destroy();
    }
    assert.equal(s3tls.seen.length, before);
  });

  it('does not sign or send a request the policy denies', async () => {
    const before = s3.seen.length;
    await assert.rejects(
      client(HOSTS.auto, s3.port, { proxyPort: b.proxyPort }).send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'hello.txt' })),
      (err) => statusOf(err) === 403,
    );
    assert.equal(s3.seen.length, before);
    assert.match(String(b.log.decisions().at(-1)?.unmapped?.reason), /^no rule of policy aws allows DELETE/);
  });
});
