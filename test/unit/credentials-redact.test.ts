import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { redactSecrets } from '../../src/credentials/redact.js';
import { scopeFor } from '../../src/credentials/scope.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';

const SECRET = 'echo-secret-4242/+=';
const source = createStaticCredentialSource({
  providers: [{ name: 'p', env: { K: SECRET }, endpoints: [{ host: 'api.example.test', port: 443 }] }],
});
const scope = scopeFor({ source, host: 'api.example.test', port: 443, path: '/' });

describe('redactSecrets (CR-23)', () => {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const echoes: [string, string][] = [
    ['raw', `value=${SECRET};`],
    ['Bearer', `Authorization: Bearer ${SECRET}`],
    ['Basic user:secret', `Authorization: Basic ${b64(`alice:${SECRET}`)}`],
    ['percent-encoded', `?token=${encodeURIComponent(SECRET)}`],
    ['base64', `{"t":"${b64(SECRET)}"}`],
    ['base64url', `t=${Buffer.from(SECRET).toString('base64url')}`],
  ];
  for (const [name, text] of echoes) {
    it(`redacts the ${name} form of a bound secret`, () => {
      const out = redactSecrets(text, scope);
      assert.ok(out.includes('[redacted]'), out);
      assert.ok(!out.includes(SECRET) && !out.includes(b64(SECRET).replace(/=+$/, '')), out);
    });
  }

  it('leaves text without secrets, and unrelated Basic credentials, untouched', () => {
    const text = `ok Authorization: Basic ${b64('bob:other')}`;
    assert.equal(redactSecrets(text, scope), text);
  });

  it('does nothing for a scope with no bound secrets', () => {
    const empty = scopeFor({ source, host: 'elsewhere.test', port: 443, path: '/' });
    assert.equal(redactSecrets(SECRET, empty), SECRET);
  });
});
