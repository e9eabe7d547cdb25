// SigV4 signing without sockets: region derivation, payload modes, the signature checked by aws4 (an independent
// implementation), key resolution refusals, and what policy and credentials loading refuse (issue 17).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import aws4 from 'aws4';
import { parseCredentials } from '../../src/credentials/parse.js';
import { scopeFor } from '../../src/credentials/scope.js';
import { payloadMode, type SignInput, signRequest } from '../../src/credentials/sigv4.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';
import { isBoundaryError } from '../../src/shared/errors.js';
import { regionFromHost } from '../../src/net/aws-region.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { E0, endpoint, expectIssue } from '../harness/policy-parse-fixtures.js';

const KEYS = { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

function scope(env: Record<string, string>, boundHost = 'bucket.s3.eu-west-2.amazonaws.com') {
  const source = createStaticCredentialSource({ providers: [{ name: 'aws', env, endpoints: [{ host: boundHost, port: 443 }] }] });
  return scopeFor({ source, host: 'bucket.s3.eu-west-2.amazonaws.com', port: 443, path: '/k' });
}

function input(overrides: Partial<SignInput> = {}): SignInput {
  return {
    scope: scope(KEYS),
    service: 's3',
    region: undefined,
    host: 'bucket.s3.eu-west-2.amazonaws.com',
    port: 443,
    tls: true,
    method: 'PUT',
    target: '/k?x-id=PutObject&b=2',
    headers: ['host', 'bucket.s3.eu-west-2.amazonaws.com', 'content-type', 'text/plain', 'user-agent', 'sdk/1', 'content-length', '5'],
    mode: 'sign_body',
    body: Buffer.from('hello'),
    ...overrides,
  };
}

function header(flat: readonly string[], name: string): string | undefined {
  for (let i = 0; i < flat.length; i += 2) if (flat[i] === name) return flat[i + 1];
  return undefined;
}

describe('SigV4 region from host', () => {
  const cases: [string, string | undefined][] = [
    ['bedrock-runtime.us-east-1.amazonaws.com', 'us-east-1'],
    ['bucket.s3.eu-west-2.amazonaws.com', 'eu-west-2'],
    ['s3.dualstack.ap-south-1.amazonaws.com', 'ap-south-1'],
    ['s3.cn-north-1.amazonaws.com.cn', 'cn-north-1'],
    ['s3.amazonaws.com', undefined],
    ['bucket.s3.amazonaws.com', undefined],
    ['api.example.test', undefined],
  ];
  for (const [host, region] of cases) it(`derives ${region ?? 'no region'} from ${host}`, () => assert.equal(regionFromHost(host), region));
});

describe('SigV4 payload modes', () => {
  it('maps the three credential_signing values and the client hash as OpenShell does', () => {
    assert.equal(payloadMode({ signing: 'sigv4:body', clientHash: 'UNSIGNED-PAYLOAD', hasContentLength: true }), 'sign_body');
    assert.equal(payloadMode({ signing: 'sigv4:no_body', clientHash: undefined, hasContentLength: true }), 'unsigned_payload');
    assert.equal(payloadMode({ signing: 'sigv4', clientHash: 'UNSIGNED-PAYLOAD', hasContentLength: true }), 'unsigned_payload');
    assert.equal(payloadMode({ signing: 'sigv4', clientHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER', hasContentLength: false }), 'streaming_unsigned_trailer');
    assert.equal(payloadMode({ signing: 'sigv4', clientHash: 'ab'.repeat(32), hasContentLength: true }), 'sign_body');
    assert.equal(payloadMode({ signing: 'sigv4', clientHash: undefined, hasContentLength: true }), 'sign_body');
    assert.equal(payloadMode({ signing: 'sigv4', clientHash: undefined, hasContentLength: false }), 'unsigned_payload');
  });

  it('refuses a streaming signed payload it cannot re-sign, pointing at sigv4:no_body', () => {
    const mode = payloadMode({ signing: 'sigv4', clientHash: 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD', hasContentLength: true });
    assert.equal(typeof mode === 'string' ? mode : mode.reason, 'signing-mode-unsupported');
    assert.match(typeof mode === 'string' ? '' : mode.message, /sigv4:no_body/);
  });
});

describe('signRequest', () => {
  it('signs with the derived region and the body hash, and aws4 computes the same signature', async () => {
    const signed = await signRequest(input());
    assert.ok(signed.ok);
    assert.equal(signed.region, 'eu-west-2');
    assert.equal(header(signed.headers, 'x-amz-content-sha256'), createHash('sha256').update('hello').digest('hex'));
    const auth = header(signed.headers, 'authorization') ?? '';
    const match = /SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
    assert.ok(match, auth);
    assert.ok(!(match[1] ?? '').split(';').includes('user-agent'), 'user-agent is forwarded unsigned');
    const signedNames = (match[1] ?? '').split(';');
    const headers = Object.fromEntries(signedNames.map((name) => [name, header(signed.headers, name) ?? '']));
    const again = aws4.sign(
      { host: 'bucket.s3.eu-west-2.amazonaws.com', method: 'PUT', path: '/k?x-id=PutObject&b=2', service: 's3', region: 'eu-west-2', headers },
      { accessKeyId: KEYS.AWS_ACCESS_KEY_ID, secretAccessKey: KEYS.AWS_SECRET_ACCESS_KEY },
    );
    assert.equal(String(again.headers?.Authorization), auth);
  });

  it('signs UNSIGNED-PAYLOAD in unsigned mode and adds the session token when the provider has one', async () => {
    const signed = await signRequest(input({ mode: 'unsigned_payload', body: undefined, scope: scope({ ...KEYS, AWS_SESSION_TOKEN: 'tok' }) }));
    assert.ok(signed.ok);
    assert.equal(header(signed.headers, 'x-amz-content-sha256'), 'UNSIGNED-PAYLOAD');
    assert.equal(header(signed.headers, 'x-amz-security-token'), 'tok');
  });

  it('refuses without keys, with keys bound elsewhere, and without a region', async () => {
    const missing = await signRequest(input({ scope: scope({ AWS_ACCESS_KEY_ID: 'AKID' }) }));
    assert.equal(missing.ok ? 'signed' : missing.reason, 'signing-keys-missing');
    const elsewhere = await signRequest(input({ scope: scope(KEYS, 'other.example.test') }));
    assert.equal(elsewhere.ok ? 'signed' : elsewhere.reason, 'endpoint-mismatch');
    const global = await signRequest(input({ host: 's3.amazonaws.com' }));
    assert.equal(global.ok ? 'signed' : global.reason, 'signing-region-unknown');
    assert.ok(!JSON.stringify([missing, elsewhere, global]).includes(KEYS.AWS_SECRET_ACCESS_KEY));
  });
});

describe('loading refuses what would not sign', () => {
  it('refuses an exact non-AWS host without signing_region, naming signing_region', () => {
    expectIssue(endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, credential_signing: sigv4, signing_service: s3 }'), 'POLICY_SIGNING_INVALID', `${E0}.signing_region`);
  });

  it('accepts an AWS host or an explicit signing_region', () => {
    parsePolicy(endpoint('{ host: s3.us-east-1.amazonaws.com, port: 443, protocol: rest, access: full, credential_signing: sigv4, signing_service: s3 }'));
    parsePolicy(endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, credential_signing: sigv4:body, signing_service: s3, signing_region: us-east-1 }'));
  });

  it('refuses credential_signing with tls: skip', () => {
    expectIssue(endpoint('{ host: s3.us-east-1.amazonaws.com, port: 443, tls: skip, credential_signing: sigv4, signing_service: s3 }'), 'POLICY_SIGNING_INVALID', `${E0}.credential_signing`);
  });

  it('refuses an OpenShell token_grant in a provider by name', () => {
    assert.throws(
      () => parseCredentials('providers:\n  idp:\n    env: { A: b }\n    token_grant: { token_endpoint: "https://idp.example.test/token" }\n'),
      (err: unknown) =>
        isBoundaryError(err) && err.issues.some((i) => i.code === 'CREDENTIALS_UNKNOWN_KEY' && i.path === 'providers.idp.token_grant' && /token grants/.test(i.message)),
    );
  });
});
