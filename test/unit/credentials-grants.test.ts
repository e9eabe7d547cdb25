import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { checkCredentialsFile } from '../../src/app/cli/policy-check.js';
import { placeholderEnvironment } from '../../src/app/cli/env.js';
import { parseCredentials } from '../../src/credentials/parse.js';
import { Secret } from '../../src/credentials/secret.js';
import { RETRY_INITIAL_MS, RETRY_MAX_MS, retryDelayMs } from '../../src/grants/runner.js';
import { requestToken } from '../../src/grants/token-client.js';
import type { TokenGrantInput } from '../../src/credentials/grant.js';
import { GLOBAL_TIMERS } from '../../src/shared/timers.js';
import { isBoundaryError } from '../../src/shared/errors.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { recordingIo } from '../harness/cli-io.js';

// Token grants in the credentials file (docs/credentials.md#token-grants): validation with codes, and the token
// endpoint's destination checks, which refuse before any dial.

function grantYaml(fields: string, extra = ''): string {
  return `providers:
  p:
${extra}    token_grants:
      TOKEN:
${fields
  .trim()
  .split('\n')
  .map((line) => `        ${line.trim()}`)
  .join('\n')}
`;
}

const GOOD = `grant_type: client_credentials
token_endpoint: https://auth.example.test/token
client_id: c
client_secret: { value_from: { file: secret } }`;

function codes(text: string): string[] {
  try {
    parseCredentials(text);
    return [];
  } catch (err) {
    assert.ok(isBoundaryError(err));
    return err.issues.map((issue) => `${issue.code} ${issue.path}`);
  }
}

describe('token_grants in the credentials file', () => {
  it('parses a client credentials and a refresh token grant; boundary env lists their keys', () => {
    const doc = parseCredentials(
      grantYaml(`${GOOD}
scope: "a b"
audience: https://api.example.test
resource: https://api.example.test
client_auth: client_secret_post
placement: { header: X-Api-Token }`),
    );
    const [grant] = doc.providers[0]?.grants ?? [];
    assert.equal(grant?.grantType, 'client_credentials');
    assert.deepEqual(grant?.placement, { kind: 'header', name: 'X-Api-Token' });
    assert.equal(grant?.privateTokenEndpoint, false);
    const refresh = parseCredentials(
      grantYaml(`grant_type: refresh_token
token_endpoint: https://auth.example.test/token
client_id: c
refresh_token: { value_from: { env: RT } }
private_token_endpoint: true`),
    );
    assert.equal(refresh.providers[0]?.grants[0]?.privateTokenEndpoint, true);
    assert.deepEqual(placeholderEnvironment(['TOKEN']), [['TOKEN', 'openshell:resolve:env:TOKEN']]);
  });

  it('refuses malformed grants with coded, located issues', () => {
    const cases: [string, string][] = [
      [GOOD.replace('client_secret: { value_from: { file: secret } }', 'client_secret: inline-secret'), 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.client_secret'],
      [GOOD.replace('https://', 'http://'), 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.token_endpoint'],
      [GOOD.replace('https://auth', 'https://user:pw@auth'), 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.token_endpoint'],
      [GOOD.replace('client_credentials', 'password'), 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.grant_type'],
      [GOOD.replace('client_id: c\n', ''), 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.client_id'],
      [GOOD.replace('client_secret: { value_from: { file: secret } }', ''), 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.client_secret'],
      [GOOD.replace('client_credentials', 'refresh_token'), 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.refresh_token'],
      [`${GOOD}\nrefresh_token: { value_from: { file: rt } }`, 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.refresh_token'],
      [`${GOOD}\nplacement: { header: Host }`, 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.placement.header'],
      [`${GOOD}\nplacement: cookie`, 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.placement'],
      [`${GOOD}\nclient_auth: private_key_jwt`, 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.client_auth'],
      [`${GOOD}\nscope: "a\\nb"`, 'CREDENTIALS_GRANT_INVALID providers.p.token_grants.TOKEN.scope'],
      [`${GOOD}\ncache_ttl: 0s`, 'CREDENTIALS_UNKNOWN_KEY providers.p.token_grants.TOKEN.cache_ttl'],
      [`${GOOD}\nprivate_token_endpoint: "yes"`, 'CREDENTIALS_TYPE providers.p.token_grants.TOKEN.private_token_endpoint'],
    ];
    for (const [fields, expected] of cases) assert.deepEqual(codes(grantYaml(fields)), [expected], fields);
    assert.deepEqual(codes(grantYaml(GOOD, '    env:\n      TOKEN: x\n')), ['CREDENTIALS_KEY_INVALID providers.p.token_grants.TOKEN']);
    assert.deepEqual(codes('providers:\n  p:\n    token_grant: { grant_type: client_credentials }\n'), ['CREDENTIALS_UNKNOWN_KEY providers.p.token_grant']);
  });

  it('policy check --credentials reports the same codes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'boundary-grants-check-'));
    try {
      await writeFile(join(dir, 'creds.yaml'), grantYaml(GOOD.replace('https://', 'http://')));
      const report = await checkCredentialsFile('creds.yaml', recordingIo(dir).io);
      assert.equal(report.ok, false);
      assert.deepEqual(
        report.problems.map((p) => p.code),
        ['CREDENTIALS_GRANT_INVALID'],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the token endpoint as a destination', () => {
  const grant = (endpoint: string, privateTokenEndpoint = false): TokenGrantInput => ({
    key: 'TOKEN',
    grantType: 'client_credentials',
    tokenEndpoint: endpoint,
    clientId: 'c',
    clientSecret: new Secret('s3cret-value'),
    clientAuth: 'client_secret_basic',
    privateTokenEndpoint,
  });
  const deps = (names: Record<string, string[]>, selves: { ip: string; port: number }[] = []) => ({
    resolver: fakeResolver(names),
    timers: GLOBAL_TIMERS,
    extraCaPem: () => undefined,
    allowLoopback: false,
    selfAddresses: () => selves,
  });

  it('refuses private addresses unless the grant opts in, and metadata and self addresses always, before any dial', async () => {
    const names = { 'auth.internal.test': ['10.1.2.3'], 'meta.test': ['169.254.169.254'], 'loop.test': ['127.0.0.1'] };
    const cases: [TokenGrantInput, string][] = [
      [grant('https://auth.internal.test/token'), 'destination-refused'],
      [grant('https://meta.test/token', true), 'destination-refused'],
      [grant('https://loop.test/token', true), 'destination-refused'],
      [grant('https://localhost/token', true), 'destination-refused'],
      [grant('https://metadata.google.internal/token', true), 'destination-refused'],
      [grant('https://10.1.2.3:6443/token', true), 'destination-refused'],
      [grant('https://missing.test/token'), 'resolve-failed'],
    ];
    for (const [g, reason] of cases) {
      const outcome = await requestToken(g, undefined, deps(names));
      assert.deepEqual(outcome.ok ? 'ok' : outcome.reason, reason, g.tokenEndpoint);
      assert.ok(outcome.ok || !outcome.detail.includes('s3cret-value'));
    }
  });

  it('backs off by doubling from RETRY_INITIAL_MS up to RETRY_MAX_MS', () => {
    assert.deepEqual([1, 2, 3].map(retryDelayMs), [RETRY_INITIAL_MS, 2 * RETRY_INITIAL_MS, 4 * RETRY_INITIAL_MS]);
    assert.equal(retryDelayMs(40), RETRY_MAX_MS);
  });
});
