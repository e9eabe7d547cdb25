import assert from 'node:assert/strict';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import type { BoundaryError } from '../../src/shared/errors.js';
import { createFileCredentialSource, type FileCredentialSource } from '../../src/credentials/file-source.js';
import { scopeFor } from '../../src/credentials/scope.js';
import type { CredentialSet, ProviderInput } from '../../src/credentials/set.js';
import { type CredentialSource, createStaticCredentialSource } from '../../src/credentials/source.js';
import { runCredentialSourceContract } from '../contracts/credential-source.contract.js';

function toYaml(providers: readonly ProviderInput[]): string {
  const entries = providers.map((p) => {
    const env = Object.fromEntries(Object.entries(p.env).map(([k, v]) => [k, typeof v === 'string' ? v : v.reveal()]));
    return [p.name, { env, endpoints: (p.endpoints ?? []).map((e) => ({ ...e })) }];
  });
  return stringify({ providers: Object.fromEntries(entries) });
}

// Write-then-rename, as editors and secret mounts do: the watcher never sees a half-written file.
async function replaceFile(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text);
  await rename(`${path}.tmp`, path);
}

function nextChange(source: CredentialSource): Promise<CredentialSet> {
  return new Promise((resolve) => {
    const off = source.subscribe((next) => {
      off();
      resolve(next);
    });
  });
}

async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'boundary-credentials-'));
}

runCredentialSourceContract('static (control channel)', async (providers) => {
  const source = createStaticCredentialSource({ providers });
  return {
    source,
    rotate: async (next) => {
      source.replace(next);
    },
    cleanup: async () => {},
  };
});

runCredentialSourceContract('file', async (providers) => {
  const dir = await tempDir();
  const path = join(dir, 'credentials.yaml');
  await writeFile(path, toYaml(providers));
  const source = await createFileCredentialSource({ path, env: {} });
  return {
    source,
    rotate: async (next) => {
      await replaceFile(path, toYaml(next));
      await source.reload();
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describe('file credential source', () => {
  async function setup(yamlText: string, extra: { env?: Record<string, string>; watch?: boolean } = {}) {
    const dir = await tempDir();
    const path = join(dir, 'credentials.yaml');
    await writeFile(path, yamlText);
    const errors: BoundaryError[] = [];
    let source: FileCredentialSource | undefined;
    const cleanup = async () => {
      await source?.close();
      await rm(dir, { recursive: true, force: true });
    };
    source = await createFileCredentialSource({
      path,
      env: extra.env ?? {},
      watch: extra.watch ?? true,
      onError: (err) => errors.push(err),
    });
    return { dir, path, source, errors, cleanup };
  }

  const v1 = 'providers:\n  acme:\n    env: { API_TOKEN: "rotate-v1" }\n    endpoints: [{ host: api.example.test, port: 443 }]\n';
  const v2 = v1.replace('rotate-v1', 'rotate-v2');

  it('applies a rotated file to the next scope without a restart', { timeout: 10_000 }, async (t) => {
    const { path, source, cleanup } = await setup(v1);
    t.after(cleanup);
    const before = scopeFor({ source, host: 'api.example.test', port: 443, path: '/' });
    const changed = nextChange(source);
    await replaceFile(path, v2);
    const next = await changed;
    assert.equal(next.revision, 2);
    assert.equal(before.stillCurrent(), false);
    const after = scopeFor({ source, host: 'api.example.test', port: 443, path: '/' });
    const resolved = after.resolve({ form: 'canonical', key: 'API_TOKEN' });
    assert.equal(resolved.kind === 'value' && resolved.secret.reveal(), 'rotate-v2');
  });

  it('keeps the last good set and reports when a reload is invalid', { timeout: 10_000 }, async (t) => {
    const { path, source, errors, cleanup } = await setup(v1);
    t.after(cleanup);
    await replaceFile(path, 'providers:\n  acme:\n    env: { v1_BAD: "x" }\n');
    await assert.rejects(source.reload(), { code: 'CREDENTIALS_INVALID' });
    assert.equal(source.current().revision, 1);
    assert.equal(source.current().providers.get('acme')?.keys.get('API_TOKEN')?.reveal(), 'rotate-v1');
    // The watcher reports the same failure through onError; then a good file is taken again.
    const changed = nextChange(source);
    await replaceFile(path, v2);
    assert.equal((await changed).revision, 2);
    assert.ok(errors.every((err) => err.code === 'CREDENTIALS_INVALID' || err.code === 'CREDENTIALS_UNREADABLE'));
  });

  it('follows a rotated value_from file in another directory', { timeout: 10_000 }, async (t) => {
    const secrets = await tempDir();
    t.after(() => rm(secrets, { recursive: true, force: true }));
    await writeFile(join(secrets, 'db'), 'db-pass-1\n');
    const yamlText = `providers:\n  db:\n    env:\n      DB_PASSWORD: { value_from: { file: ${join(secrets, 'db')} } }\n`;
    const { source, cleanup } = await setup(yamlText);
    t.after(cleanup);
    // One trailing newline of a secret file is not part of the value.
    assert.equal(source.current().providers.get('db')?.keys.get('DB_PASSWORD')?.reveal(), 'db-pass-1');
    const changed = nextChange(source);
    await replaceFile(join(secrets, 'db'), 'db-pass-2\n');
    assert.equal((await changed).providers.get('db')?.keys.get('DB_PASSWORD')?.reveal(), 'db-pass-2');
  });

  it('reads value_from.file relative to the credentials file and value_from.env from the injected env', async (t) => {
    const dir = await tempDir();
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'token.txt'), 'file-token');
    const path = join(dir, 'credentials.yaml');
    const text = 'providers:\n  p:\n    env:\n      A: { value_from: { file: token.txt } }\n      B: { value_from: { env: HOST_B } }\n';
    await writeFile(path, text);
    const source = await createFileCredentialSource({ path, env: { HOST_B: 'env-token' } });
    t.after(() => source.close());
    const keys = source.current().providers.get('p')?.keys;
    assert.equal(keys?.get('A')?.reveal(), 'file-token');
    assert.equal(keys?.get('B')?.reveal(), 'env-token');
  });

  it('fails the load, located by line, when a value_from source is missing or unsafe', async (t) => {
    const dir = await tempDir();
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'crlf.txt'), 'a\r\nb');
    const path = join(dir, 'credentials.yaml');
    const text =
      'providers:\n  p:\n    env:\n      A: { value_from: { env: UNSET } }\n      B: { value_from: { file: missing.txt } }\n' +
      '      C: { value_from: { file: crlf.txt } }\n      D: { value_from: { env: INJECT } }\n';
    await writeFile(path, text);
    await assert.rejects(createFileCredentialSource({ path, env: { INJECT: 'x\ny' } }), (err: BoundaryError) => {
      assert.equal(err.code, 'CREDENTIALS_INVALID');
      const brief = err.issues.map((i) => [i.code, i.path, i.line]);
      assert.deepEqual(brief, [
        ['CREDENTIALS_VALUE_SOURCE', 'providers.p.env.A', 4],
        ['CREDENTIALS_VALUE_SOURCE', 'providers.p.env.B', 5],
        ['CREDENTIALS_VALUE_INVALID', 'providers.p.env.C', 6],
        ['CREDENTIALS_VALUE_INVALID', 'providers.p.env.D', 7],
      ]);
      assert.ok(!JSON.stringify(err.issues).includes('x\\ny'));
      return true;
    });
  });

  it('fails with CREDENTIALS_UNREADABLE when the file does not exist', async () => {
    await assert.rejects(createFileCredentialSource({ path: join(tmpdir(), 'no-such-dir-xyz', 'c.yaml'), env: {} }), {
      code: 'CREDENTIALS_UNREADABLE',
    });
  });
});

describe('static credential source', () => {
  it('refuses an invalid push and keeps the last good set', () => {
    const source = createStaticCredentialSource({ providers: [{ name: 'a', env: { K: 'v1' } }] });
    assert.throws(() => source.replace([{ name: 'a', env: { K: 'bad\r\nvalue' } }]), (err: BoundaryError) => {
      assert.equal(err.code, 'CREDENTIALS_INVALID');
      assert.deepEqual(
        err.issues.map((i) => [i.code, i.path]),
        [['CREDENTIALS_VALUE_INVALID', 'providers.a.env.K']],
      );
      return true;
    });
    assert.equal(source.current().revision, 1);
    assert.equal(source.current().providers.get('a')?.keys.get('K')?.reveal(), 'v1');
  });

  it('refuses reserved key names and bad endpoints pushed over the control channel', () => {
    assert.throws(
      () =>
        createStaticCredentialSource({
          providers: [
            { name: 'a', env: { v3_K: 'x', [`s${'a'.repeat(64)}_K`]: 'y' }, endpoints: [{ host: '*', port: 70_000 }] },
          ],
        }),
      (err: BoundaryError) => {
        assert.deepEqual(
          err.issues.map((i) => i.code),
          ['CREDENTIALS_KEY_INVALID', 'CREDENTIALS_KEY_INVALID', 'CREDENTIALS_ENDPOINT_INVALID', 'CREDENTIALS_ENDPOINT_INVALID'],
        );
        return true;
      },
    );
  });
});
