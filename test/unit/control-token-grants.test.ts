// Token grants on the control channel (docs/supervisor.md#token-grants): the wire shape is checked by readMessage
// (CONTROL_MESSAGE_INVALID), what each field may hold by providersFromWire with the credentials file's rules
// (CREDENTIALS_INVALID with located CREDENTIALS_GRANT_INVALID issues); neither ever puts a secret in an issue.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeMessage, encodeMessage, type WireProvider, type WireTokenGrant } from '../../src/control/messages.js';
import { providersFromWire } from '../../src/control/wire-credentials.js';
import { Secret } from '../../src/credentials/secret.js';
import { BoundaryError } from '../../src/shared/errors.js';

const CLIENT_SECRET = 'wire-client-secret-5f0c1a';
const REFRESH = 'wire-refresh-token-9b3e27';

const GRANT: WireTokenGrant = {
  key: 'CRM_TOKEN',
  grantType: 'refresh_token',
  tokenEndpoint: 'https://login.example.test/token',
  clientId: 'crm',
  clientSecret: CLIENT_SECRET,
  clientAuth: 'client_secret_post',
  refreshToken: REFRESH,
  scope: 'read',
  placement: { kind: 'header', name: 'X-Api-Token' },
  privateTokenEndpoint: true,
};

function push(grants: readonly unknown[], env: Record<string, string> = {}) {
  return JSON.stringify({
    kind: 'credentials',
    generation: 3,
    credentialsHash: 'h1',
    credentials: [{ name: 'crm', env, endpoints: [{ host: 'api.crm.example.test', port: 443 }], tokenGrants: grants }],
  });
}

function rejected(run: () => unknown): BoundaryError {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof BoundaryError);
    return err;
  }
  assert.fail('expected a BoundaryError');
}

const noSecretIn = (err: BoundaryError) => {
  const text = `${err.message} ${JSON.stringify(err.issues)}`;
  assert.ok(!text.includes(CLIENT_SECRET) && !text.includes(REFRESH), 'a secret in the error');
};

describe('token grants on the control channel', () => {
  it('round-trips a grant and turns it into a definition with its secrets as Secrets', () => {
    const message = decodeMessage(encodeMessage(JSON.parse(push([GRANT]))), ['credentials']);
    const [provider] = providersFromWire(message.credentials);
    const [grant] = provider?.grants ?? [];
    assert.ok(grant?.clientSecret instanceof Secret && grant.refreshToken instanceof Secret);
    assert.equal(grant.clientSecret.reveal(), CLIENT_SECRET);
    assert.equal(grant.refreshToken.reveal(), REFRESH);
    assert.deepEqual({ ...grant, clientSecret: undefined, refreshToken: undefined }, { ...GRANT, clientSecret: undefined, refreshToken: undefined, audience: undefined, resource: undefined });
    assert.ok(!JSON.stringify(provider).includes(CLIENT_SECRET));
  });

  it('a provider without grants is handed over as before', () => {
    const wire: WireProvider = { name: 'plain', env: { KEY: 'v' } };
    assert.deepEqual(providersFromWire([wire]), [wire]);
  });

  it('refuses a malformed shape with CONTROL_MESSAGE_INVALID, naming the field and never the value', () => {
    const err = rejected(() => decodeMessage(push([{ ...GRANT, clientSecret: 7, extra: CLIENT_SECRET, placement: { kind: 'cookie' } }])));
    assert.equal(err.code, 'CONTROL_MESSAGE_INVALID');
    const paths = err.issues.map((i) => i.path).sort();
    assert.deepEqual(paths, ['credentials[0].tokenGrants[0].clientSecret', 'credentials[0].tokenGrants[0].extra', 'credentials[0].tokenGrants[0].placement']);
    noSecretIn(err);
  });

  it('refuses with the credentials file rules: CREDENTIALS_INVALID with located issues', () => {
    const bad = [
      { ...GRANT, key: 'A_TOKEN', grantType: 'password' },
      { ...GRANT, key: 'B_TOKEN', tokenEndpoint: 'http://login.example.test/token' },
      { ...GRANT, key: 'C_TOKEN', grantType: 'client_credentials', clientSecret: undefined },
      { ...GRANT, key: 'D_TOKEN', placement: { kind: 'header', name: 'Content-Length' } },
      { ...GRANT, key: 'E_TOKEN', refreshToken: `${REFRESH}\r\n` },
      { ...GRANT, key: 'KEY' },
    ].map((g) => JSON.parse(JSON.stringify(g)));
    const message = decodeMessage(push(bad, { KEY: 'v' }), ['credentials']);
    const err = rejected(() => providersFromWire(message.credentials));
    assert.equal(err.code, 'CREDENTIALS_INVALID');
    const at = (p: string) => `providers.crm.tokenGrants.${p}`;
    assert.deepEqual(
      err.issues.map((i) => [i.code, i.path]),
      [
        ['CREDENTIALS_GRANT_INVALID', at('A_TOKEN.grantType')],
        ['CREDENTIALS_GRANT_INVALID', at('B_TOKEN.tokenEndpoint')],
        ['CREDENTIALS_GRANT_INVALID', at('C_TOKEN.clientSecret')],
        ['CREDENTIALS_GRANT_INVALID', at('C_TOKEN.refreshToken')],
        ['CREDENTIALS_GRANT_INVALID', at('D_TOKEN.placement.name')],
        ['CREDENTIALS_GRANT_INVALID', at('E_TOKEN.refreshToken')],
        ['CREDENTIALS_KEY_INVALID', at('KEY')],
      ],
    );
    noSecretIn(err);
  });
});
