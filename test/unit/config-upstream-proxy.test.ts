// The upstream proxy's flags and config keys (docs/running.md#corporate-upstream-proxy): each companion flag needs
// --upstream-proxy, credentials over http:// need the explicit insecure flag, bad URLs and lists are startup errors,
// and the auth file and CA are checked when boundary starts. The proxy environment variables are never read.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openUpstreamProxy } from '../../src/app/boundary-upstream-proxy.js';
import type { CliIo } from '../../src/app/cli/io.js';
import { parseRunFlags, runCommand } from '../../src/app/cli/run.js';
import { parseConfig } from '../../src/app/config.js';
import { isBoundaryError } from '../../src/shared/errors.js';
import { configIssuePaths } from '../harness/config-issues.js';
import { fakeResolver } from '../harness/fake-resolver.js';

describe('boundary run: --upstream-proxy and its companions', () => {
  it('map onto config.upstreamProxy, paths resolved against the working directory', () => {
    const config = parseConfig(
      parseRunFlags(
        ['--upstream-proxy', 'https://proxy.corp.example:3128', '--upstream-proxy-auth-file', 'proxy-auth', '--upstream-proxy-ca=corp-ca.pem', '--no-upstream-proxy', 'corp.example,10.0.0.0/8:5432', '--upstream-proxy-connect-by-name'],
        '/work',
      ),
    );
    assert.deepEqual(config.upstreamProxy?.endpoint, { tls: true, host: 'proxy.corp.example', port: 3128 });
    assert.equal(config.upstreamProxy?.authFile, '/work/proxy-auth');
    assert.equal(config.upstreamProxy?.caFile, '/work/corp-ca.pem');
    assert.equal(config.upstreamProxy?.bypass.entries.length, 2);
    assert.equal(config.upstreamProxy?.connectByName, true);
    assert.equal(parseConfig({}).upstreamProxy, undefined);
  });

  it('refuses every companion without --upstream-proxy, naming it', () => {
    assert.deepEqual(configIssuePaths(['--no-upstream-proxy', 'corp.example']), ['noUpstreamProxy']);
    assert.deepEqual(configIssuePaths(['--upstream-proxy-auth-file', 'a']), ['upstreamProxyAuthFile']);
    assert.deepEqual(configIssuePaths(['--upstream-proxy-ca', 'a']), ['upstreamProxyCa']);
    assert.deepEqual(configIssuePaths(['--upstream-proxy-connect-by-name']), ['upstreamProxyConnectByName']);
    assert.deepEqual(configIssuePaths(['--upstream-proxy-auth-insecure']), ['upstreamProxyAuthInsecure']);
  });

  it('refuses credentials over http:// unless --upstream-proxy-auth-insecure says so; https:// needs no flag', () => {
    assert.deepEqual(configIssuePaths(['--upstream-proxy', 'http://proxy:3128', '--upstream-proxy-auth-file', 'a']), ['upstreamProxyAuthFile']);
    assert.deepEqual(configIssuePaths(['--upstream-proxy', 'http://proxy:3128', '--upstream-proxy-auth-file', 'a', '--upstream-proxy-auth-insecure']), []);
    assert.deepEqual(configIssuePaths(['--upstream-proxy', 'https://proxy:3128', '--upstream-proxy-auth-file', 'a']), []);
    assert.deepEqual(configIssuePaths(['--upstream-proxy', 'http://proxy:3128', '--upstream-proxy-ca', 'a']), ['upstreamProxyCa']);
  });

  it('refuses an empty, SOCKS or credentialed URL and a malformed bypass list', () => {
    for (const url of ['', 'socks5://proxy:1080', 'http://u:p@proxy:3128', 'http://proxy']) assert.deepEqual(configIssuePaths(['--upstream-proxy', url]), ['upstreamProxy'], url);
    assert.deepEqual(configIssuePaths(['--upstream-proxy', 'http://proxy:3128', '--no-upstream-proxy', '']), ['noUpstreamProxy']);
    assert.deepEqual(configIssuePaths(['--upstream-proxy', 'http://proxy:3128', '--no-upstream-proxy', '10.0.0.0/40']), ['noUpstreamProxy']);
  });

  it('boundary run exits 2 with the issue before anything starts; proxy variables in the environment do not stand in for --upstream-proxy', async () => {
    let stderr = '';
    const io: CliIo = {
      stdout: { write: () => true },
      stderr: { write: (text: string) => (stderr += text) },
      env: { HTTPS_PROXY: 'http://proxy:3128', HTTP_PROXY: 'http://proxy:3128', NO_PROXY: '*' },
      cwd: tmpdir(),
      signal: AbortSignal.abort(),
      now: Date.now,
    };
    assert.equal(await runCommand(['--policy', 'missing.yaml', '--no-upstream-proxy', 'corp.example'], io), 2);
    assert.match(stderr, /^boundary run: noUpstreamProxy: .*\(CONFIG_INVALID\)$/m);
  });
});

describe('the auth file and CA, read at start', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'boundary-upstream-proxy-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const open = (keys: Record<string, unknown>) =>
    openUpstreamProxy(parseConfig({ upstreamProxy: 'https://127.0.0.1:3128', ...keys }).upstreamProxy, { dial: undefined, resolver: fakeResolver() });

  it('an unreadable, control-character or colon-less auth file is CONFIG_INVALID, never quoting the file', async () => {
    await writeFile(join(dir, 'ctl'), 'corp:se\u0007cret\n');
    await writeFile(join(dir, 'nocolon'), 'secretonly\n');
    for (const file of [join(dir, 'missing'), join(dir, 'ctl'), join(dir, 'nocolon')]) {
      await assert.rejects(open({ upstreamProxyAuthFile: file }), (err: unknown) => isBoundaryError(err) && err.code === 'CONFIG_INVALID' && !err.message.includes('secret'));
    }
  });

  it('a CA file without a certificate is CONFIG_INVALID', async () => {
    await writeFile(join(dir, 'not-a-ca.pem'), 'hello\n');
    await assert.rejects(open({ upstreamProxyCa: join(dir, 'not-a-ca.pem') }), (err: unknown) => isBoundaryError(err) && err.code === 'CONFIG_INVALID');
  });

  it('without --upstream-proxy the dial is left as it was', async () => {
    assert.equal(await openUpstreamProxy(undefined, { dial: undefined, resolver: fakeResolver() }), undefined);
  });
});
