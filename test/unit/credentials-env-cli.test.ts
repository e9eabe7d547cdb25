import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { envCommand, placeholderEnvironment } from '../../src/app/cli/env.js';
import type { CliIo } from '../../src/app/cli/io.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/credentials/', import.meta.url));

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: {},
    cwd: FIXTURES,
    signal: new AbortController().signal,
    now: () => 0,
  };
  const code = await envCommand(argv, io);
  return { code, stdout, stderr };
}

describe('boundary env', () => {
  it('prints every key of every provider as its canonical placeholder, sorted, without values', async () => {
    const { code, stdout, stderr } = await run(['--credentials', 'valid-basic.yaml']);
    assert.equal(code, 0, stderr);
    assert.equal(
      stdout,
      'API_TOKEN=openshell:resolve:env:API_TOKEN\nGITHUB_TOKEN=openshell:resolve:env:GITHUB_TOKEN\nOTHER=openshell:resolve:env:OTHER\n',
    );
    assert.ok(!stdout.includes('tok-acme-123'));
  });

  it('prints one JSON object with --format json, and needs no value_from source to be readable', async () => {
    const { code, stdout } = await run(['--credentials=valid-basic.yaml', '--format', 'json']);
    assert.equal(code, 0);
    assert.deepEqual(JSON.parse(stdout), {
      API_TOKEN: 'openshell:resolve:env:API_TOKEN',
      GITHUB_TOKEN: 'openshell:resolve:env:GITHUB_TOKEN',
      OTHER: 'openshell:resolve:env:OTHER',
    });
  });

  it('prints the ryno family with --placeholder-family ryno', async () => {
    const { code, stdout } = await run(['--credentials', 'valid-basic.yaml', '--placeholder-family', 'ryno', '--format', 'json']);
    assert.equal(code, 0);
    assert.equal((JSON.parse(stdout) as Record<string, string>).API_TOKEN, 'ryno:resolve:env:API_TOKEN');
  });

  it('lists each key once when two providers define it', () => {
    assert.deepEqual(placeholderEnvironment(['B', 'A', 'B']), [
      ['A', 'openshell:resolve:env:A'],
      ['B', 'openshell:resolve:env:B'],
    ]);
  });

  it('prints help with --help', async () => {
    const { code, stdout } = await run(['--help']);
    assert.equal(code, 0);
    assert.match(stdout, /--credentials FILE/);
  });

  for (const argv of [[], ['--credentials'], ['--format', 'yaml', '--credentials', 'x'], ['--bogus'], ['--credentials', 'x', '--placeholder-family', 'RYNO']]) {
    it(`exits 2 with USAGE for ${JSON.stringify(argv)}`, async () => {
      const { code, stderr } = await run(argv);
      assert.equal(code, 2);
      assert.match(stderr, /USAGE/);
    });
  }

  it('exits 1 and lists located issues for an invalid file', async () => {
    const { code, stderr } = await run(['--credentials', 'invalid-key-reserved-revision.yaml']);
    assert.equal(code, 1);
    assert.match(stderr, /CREDENTIALS_INVALID/);
    assert.match(stderr, /:4:12 providers\.acme\.env\.v12_TOKEN: .*\(CREDENTIALS_KEY_INVALID\)/);
  });

  it('exits 1 for a file that cannot be read', async () => {
    const { code, stderr } = await run(['--credentials', 'does-not-exist.yaml']);
    assert.equal(code, 1);
    assert.match(stderr, /CREDENTIALS_UNREADABLE/);
  });
});
