import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { inspect } from 'node:util';
import type { BoundaryError } from '../../src/shared/errors.js';
import { parseCredentials } from '../../src/credentials/parse.js';

const DIR = new URL('../../fixtures/credentials/', import.meta.url);
const files = readdirSync(DIR).filter((name) => name.endsWith('.yaml'));

describe('credentials fixtures', () => {
  for (const name of files.filter((n) => n.startsWith('invalid-'))) {
    const text = readFileSync(new URL(name, DIR), 'utf8');
    const [, code = '', path = ''] = /^# expect: (\S+) ?(.*)$/.exec(text.split('\n')[0] ?? '') ?? [];
    it(`refuses ${name} with ${code} at '${path}', located by line and column`, () => {
      assert.throws(
        () => parseCredentials(text, { source: name }),
        (err: BoundaryError) => {
          assert.equal(err.code, 'CREDENTIALS_INVALID');
          const issue = err.issues.find((i) => i.code === code && i.path === path);
          assert.ok(issue, inspect(err.issues));
          assert.ok((issue.line ?? 0) >= 2 && (issue.column ?? 0) >= 1, inspect(issue));
          assert.equal(issue.source, name);
          return true;
        },
      );
    });
  }

  for (const name of files.filter((n) => n.startsWith('valid-'))) {
    it(`accepts ${name}`, () => {
      parseCredentials(readFileSync(new URL(name, DIR), 'utf8'));
    });
  }
});

describe('parseCredentials', () => {
  it('describes literal, file and env values without resolving them', () => {
    const doc = parseCredentials(
      [
        'providers:',
        '  acme:',
        '    env:',
        '      API_TOKEN: "literal value"',
        '      DB_PASSWORD: { value_from: { file: /run/secrets/db } }',
        '      OTHER: { value_from: { env: HOST_ENV_NAME } }',
        '    endpoints:',
        '      - { host: api.example.test, port: 443, path: "/v1/**" }',
        '      - { host: "**.example.test", port: 8443 }',
      ].join('\n'),
    );
    const [acme] = doc.providers;
    assert.equal(acme?.name, 'acme');
    assert.deepEqual(
      acme?.env.map((e) => [e.key, e.value.kind, e.at.line]),
      [
        ['API_TOKEN', 'literal', 4],
        ['DB_PASSWORD', 'file', 5],
        ['OTHER', 'env', 6],
      ],
    );
    const literal = acme?.env[0]?.value;
    assert.equal(literal?.kind === 'literal' && literal.value.reveal(), 'literal value');
    assert.deepEqual(acme?.endpoints, [
      { host: 'api.example.test', port: 443, path: '/v1/**' },
      { host: '**.example.test', port: 8443 },
    ]);
  });

  it('lists every problem in one error, never the secret value', () => {
    const text = 'providers:\n  a:\n    env: { GOOD: "s3cr3t-value", "bad-key": "x", EMPTY: "" }\n    endpoints: [{ host: "*.com", port: 0 }]\n';
    assert.throws(
      () => parseCredentials(text),
      (err: BoundaryError) => {
        assert.deepEqual(
          err.issues.map((i) => i.code),
          ['CREDENTIALS_KEY_INVALID', 'CREDENTIALS_VALUE_INVALID', 'CREDENTIALS_ENDPOINT_INVALID', 'CREDENTIALS_ENDPOINT_INVALID'],
        );
        assert.ok(!inspect(err, { depth: 10 }).includes('s3cr3t-value'));
        return true;
      },
    );
  });

  it('refuses an empty document and a non-map root', () => {
    assert.throws(() => parseCredentials(''), { code: 'CREDENTIALS_INVALID' });
    assert.throws(() => parseCredentials('- a\n- b\n'), { code: 'CREDENTIALS_INVALID' });
  });

  it('refuses a file over the size limit', () => {
    assert.throws(
      () => parseCredentials(`providers: {}\n#${'x'.repeat(1_048_576)}`),
      (err: BoundaryError) => err.issues[0]?.code === 'CREDENTIALS_LIMIT',
    );
  });
});
