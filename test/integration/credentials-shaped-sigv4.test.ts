// Shaped AWS placeholders with SigV4 (docs/credentials.md#shaped-placeholders): @aws-sdk/client-s3 holds an access
// key id of `AKIA` + 16 and a 40-character secret that boundary derived, signs with them, and boundary re-signs with
// the real keys; the aws4 verifier in front of s3rver accepts the signature, and never sees a placeholder.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { FORMAT_CATALOGUE, shapedPlaceholder } from '../../src/credentials/shaped.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { credentialsFile } from '../harness/credential-parts.js';
import { BUCKET, forwardProxyHandler, S3RVER_KEYS, type VerifyingS3, verifyingS3 } from '../harness/sigv4-verifier.js';

const HOST = 's3.example.test';
const shaped = (key: string, format: string) => shapedPlaceholder('aws', key, { id: format, parts: FORMAT_CATALOGUE[format] ?? [] });

describe('shaped AWS placeholders re-signed with SigV4', () => {
  let s3: VerifyingS3;
  let b: RunningBoundary;
  let dir: string;
  let source: FileCredentialSource;

  before(async () => {
    s3 = await verifyingS3();
    dir = await mkdtemp(join(tmpdir(), 'boundary-shaped-sigv4-'));
    await writeFile(join(dir, 'id'), S3RVER_KEYS.accessKeyId);
    await writeFile(join(dir, 'secret'), S3RVER_KEYS.secretAccessKey);
    source = (
      await credentialsFile(
        dir,
        `providers:\n  aws:\n    env:\n      AWS_ACCESS_KEY_ID: { value_from: { file: id }, format: aws-access-key-id }\n` +
          `      AWS_SECRET_ACCESS_KEY: { value_from: { file: secret }, format: aws-secret-access-key }\n    endpoints: [{ host: ${HOST}, port: ${s3.port} }]\n`,
      )
    ).source;
    const policy = `version: 1\nnetwork_policies:\n  aws:\n    endpoints:\n      - host: ${HOST}\n        port: ${s3.port}\n        protocol: rest\n        access: full\n        credential_signing: sigv4\n        signing_service: s3\n        signing_region: us-east-1\n    binaries: [{ path: "/**" }]\n`;
    b = await startBoundary({ policy, names: { [HOST]: ['127.0.0.1'] }, credentials: source });
  });

  after(async () => {
    await b?.close();
    await source?.close();
    await s3?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('the SDK signs with the shaped keys; the verifier sees a valid signature by the real keys', async () => {
    const accessKeyId = shaped('AWS_ACCESS_KEY_ID', 'aws-access-key-id');
    const secretAccessKey = shaped('AWS_SECRET_ACCESS_KEY', 'aws-secret-access-key');
    assert.match(accessKeyId, /^AKIA[A-Z0-9]{16}$/);
    assert.match(secretAccessKey, /^[A-Za-z0-9/+]{40}$/);
    const client = new S3Client({
      region: 'us-east-1',
      endpoint: `http://${HOST}:${s3.port}`,
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
      maxAttempts: 1,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: forwardProxyHandler(b.proxyPort),
    });
    const before = s3.seen.length;
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'shaped.txt', Body: 'shaped keys' }));
    const got = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'shaped.txt' }));
    assert.equal(await got.Body?.transformToString(), 'shaped keys');
    assert.deepEqual(s3.seen.slice(before).map((r) => r.verdict), ['valid', 'valid']);
    assert.ok(!JSON.stringify(s3.seen).includes(accessKeyId), 'the placeholder key id never reached the origin');
  });
});
