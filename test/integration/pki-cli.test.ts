import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { pkiCommand } from '../../src/app/cli/pki.js';
import type { CliIo } from '../../src/app/cli/io.js';

const MAIN = fileURLToPath(new URL('../../src/app/main.ts', import.meta.url));

function fakeIo(cwd: string) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = {
    stdout: { write: (text: string) => out.push(text) },
    stderr: { write: (text: string) => err.push(text) },
    env: {},
    cwd,
    signal: new AbortController().signal,
    now: Date.now,
  };
  return { io, stdout: () => out.join(''), stderr: () => err.join('') };
}

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-pki-cli-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('boundary pki', () => {
  for (const [flag, kind, name, other] of [
    ['--sandbox', 'sandbox', 'sb-7', 'operator'],
    ['--operator', 'operator', 'alice', 'sandbox'],
  ] as const) {
    it(`initialises a CA and issues a ${kind} client certificate (spiffe://<td>/${kind}/<name>) into exactly three files`, async (t) => {
      const cwd = await tempDir(t);
      const run = fakeIo(cwd);
      assert.equal(await pkiCommand(['init', '--dir', 'pki', '--trust-domain', 'corp.test'], run.io), 0, run.stderr());
      assert.equal(await pkiCommand(['issue', '--dir', 'pki', flag, name, '--out', name], run.io), 0, run.stderr());
      assert.deepEqual((await readdir(join(cwd, name))).sort(), ['ca.pem', 'cert.pem', 'key.pem']);
      assert.equal((await stat(join(cwd, name, 'key.pem'))).mode & 0o777, 0o600);
      assert.equal((await stat(join(cwd, 'pki', 'ca.key'))).mode & 0o777, 0o600);
      assert.ok(run.stdout().includes(`identity spiffe://corp.test/${kind}/${name}\n`));
      const text = execFileSync('openssl', ['x509', '-noout', '-text', '-in', join(cwd, name, 'cert.pem')], { encoding: 'utf8' });
      assert.ok(text.includes(`URI:spiffe://corp.test/${kind}/${name}`));
      assert.ok(!text.includes(`/${other}/`), `a ${kind} certificate names no ${other}`);
      assert.match(text, /TLS Web Client Authentication/);
      const verify = execFileSync('openssl', ['verify', '-CAfile', join(cwd, name, 'ca.pem'), join(cwd, name, 'cert.pem')], {
        encoding: 'utf8',
      });
      assert.match(verify, /: OK/);
    });
  }

  it('issues a server certificate for several names given after one --server', async (t) => {
    const cwd = await tempDir(t);
    const run = fakeIo(cwd);
    assert.equal(await pkiCommand(['init', '--dir', 'pki'], run.io), 0, run.stderr());
    const code = await pkiCommand(['issue', '--dir', 'pki', '--server', 'sup.corp.test', '127.0.0.1', '--out', 'sup'], run.io);
    assert.equal(code, 0, run.stderr());
    assert.deepEqual((await readdir(join(cwd, 'sup'))).sort(), ['ca.pem', 'cert.pem', 'key.pem']);
    const cert = new X509Certificate(await readFile(join(cwd, 'sup', 'cert.pem'), 'utf8'));
    assert.equal(cert.subjectAltName, 'DNS:sup.corp.test, IP Address:127.0.0.1');
  });

  it('prints help with exit 0 and reports usage errors with exit 2 on stderr', async (t) => {
    const cwd = await tempDir(t);
    const help = fakeIo(cwd);
    assert.equal(await pkiCommand(['--help'], help.io), 0);
    assert.match(help.stdout(), /boundary pki issue --dir DIR --sandbox ID --out OUT/);
    assert.match(help.stdout(), /boundary pki issue --dir DIR --operator NAME --out OUT/);
    assert.equal(await pkiCommand(['issue', '--help'], help.io), 0);
    for (const argv of [
      ['init'],
      ['issue', '--dir', 'pki', '--out', 'x'],
      ['issue', '--dir', 'pki', '--sandbox', 'a', '--server', 'b', '--out', 'x'],
      ['issue', '--dir', 'pki', '--sandbox', 'a', '--operator', 'b', '--out', 'x'],
      ['init', '--dir', 'pki', '--operator', 'b'],
      ['issue', '--dir', 'pki', '--server', '--out', 'x'],
      ['rotate'],
      ['init', '--dir', 'pki', '--days', 'many'],
    ]) {
      const run = fakeIo(cwd);
      assert.equal(await pkiCommand(argv, run.io), 2, argv.join(' '));
      assert.match(run.stderr(), /\(USAGE\)/);
    }
  });

  it('reports a bad sandbox id with exit 2, an existing CA and a missing CA with exit 1', async (t) => {
    const cwd = await tempDir(t);
    const run = fakeIo(cwd);
    assert.equal(await pkiCommand(['issue', '--dir', 'none', '--sandbox', 'sb', '--out', 'o'], run.io), 1);
    assert.match(run.stderr(), /\(PKI_INVALID\)/);
    assert.equal(await pkiCommand(['init', '--dir', 'pki'], run.io), 0);
    assert.equal(await pkiCommand(['init', '--dir', 'pki'], run.io), 1);
    assert.match(run.stderr(), /\(PKI_EXISTS\)/);
    assert.equal(await pkiCommand(['issue', '--dir', 'pki', '--sandbox', 'a/b', '--out', 'o'], run.io), 2);
    assert.match(run.stderr(), /\(PKI_NAME_INVALID\)/);
    assert.deepEqual(await readdir(cwd), ['pki']);
  });

  it('runs through the boundary entry point', async (t) => {
    const cwd = await tempDir(t);
    execFileSync(process.execPath, ['--import', 'tsx', MAIN, 'pki', 'init', '--dir', join(cwd, 'pki')], { encoding: 'utf8' });
    const out = execFileSync(
      process.execPath,
      ['--import', 'tsx', MAIN, 'pki', 'issue', '--dir', join(cwd, 'pki'), '--sandbox', 'sb-1', '--out', join(cwd, 'sb')],
      { encoding: 'utf8' },
    );
    assert.match(out, /identity spiffe:\/\/boundary\.internal\/sandbox\/sb-1/);
    assert.deepEqual((await readdir(join(cwd, 'sb'))).sort(), ['ca.pem', 'cert.pem', 'key.pem']);
  });
});
