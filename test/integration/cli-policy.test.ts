// `boundary policy check|explain` driven through policyCommand with a captured CliIo: output formats, JSON
// shapes, exit codes, and the promise that explain's suggestion really allows the request. One test runs
// the command in a child process to prove the module loads and exits on its own.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { policyCommand } from '../../src/app/cli/policy.js';
import type { CliIo } from '../../src/app/cli/io.js';
import { decide } from '../../src/policy/decide.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { mergeSuggestion } from '../../src/policy/suggest.js';
import { exe } from '../harness/decide-table.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHILD_TIMEOUT_MS = 30_000;

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function run(...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: {},
    cwd: ROOT,
    signal: new AbortController().signal,
    now: () => 0,
  };
  const code = await policyCommand(argv, io);
  return { code, stdout, stderr };
}

function json<T>(text: string): T {
  return JSON.parse(text) as T;
}

interface CheckReport {
  file: string;
  ok: boolean;
  problems: { code: string; path: string; line: number | null; column: number | null; message: string }[];
  warnings: { code: string; path: string; line: number | null; column: number | null; message: string }[];
}

interface ExplainReport {
  verdict: string;
  policy: string | null;
  endpointIndex: number | null;
  reason: string;
  detail: string;
  suggestion?: string;
  hint?: string;
}

/** Merges a suggestion YAML (`network_policies: {key: entry}`) into a file and decides the intent again. */
function allowsAfterMerge(file: string, suggestion: string, intent: Parameters<typeof decide>[1]): string {
  const parsed = parseYaml(suggestion) as { network_policies: Record<string, Record<string, unknown>> };
  const [key, entry] = Object.entries(parsed.network_policies)[0] ?? [];
  assert.ok(key !== undefined && entry !== undefined, 'the suggestion holds one entry');
  const merged = mergeSuggestion(readFileSync(join(ROOT, file), 'utf8'), { key, entry, yaml: suggestion });
  return decide(parsePolicy(merged), intent).verdict;
}

describe('boundary policy --help', () => {
  it('lists every subcommand and option', async () => {
    const { code, stdout } = await run('--help');
    assert.equal(code, 0);
    for (const word of ['check', 'explain', '--json', '--method', '--binary', '--help']) assert.ok(stdout.includes(word), word);
  });

  it('prints the same help for check --help and explain -h', async () => {
    assert.equal((await run('check', '--help')).code, 0);
    assert.ok((await run('explain', '-h')).stdout.includes('boundary policy explain'));
  });

  it('exits 2 with usage on stderr for a missing or unknown subcommand', async () => {
    for (const argv of [[], ['lint']]) {
      const { code, stderr, stdout } = await run(...argv);
      assert.equal(code, 2);
      assert.match(stderr, /USAGE/);
      assert.equal(stdout, '');
    }
  });
});

describe('boundary policy check', () => {
  it('exits 0 for every shipped policy and says ok, with no warning', async () => {
    const files = readdirSync(join(ROOT, 'policies')).filter((f) => f.endsWith(".yaml")).sort().map((f) => `policies/${f}`);
    assert.ok(files.includes('policies/default.yaml'), files.join(' '));
    const { code, stdout } = await run('check', ...files);
    assert.equal(code, 0, stdout);
    assert.deepEqual(stdout.trimEnd().split('\n'), files.map((file) => `${file}: ok`));
  });

  it('prints warnings as file:line:col WARN CODE and still exits 0', async () => {
    const file = 'fixtures/policies/valid/audit-default.yaml';
    const { code, stdout } = await run('check', file);
    assert.equal(code, 0);
    assert.match(stdout, new RegExp(`^${file}:\\d+:\\d+ WARN POLICY_WARN_AUDIT_DEFAULT `, 'm'));
  });

  it('prints every problem as file:line:col CODE and exits 1 when any file fails', async () => {
    const bad = 'fixtures/policies/invalid/host-bare-star.yaml';
    const { code, stdout } = await run('check', 'policies/default.yaml', bad);
    assert.equal(code, 1);
    assert.match(stdout, new RegExp(`^${bad}:\\d+:\\d+ POLICY_HOST_WILDCARD network_policies\\.api\\.endpoints\\[0\\]\\.host: `, 'm'));
    assert.match(stdout, /^policies\/default\.yaml: ok/m);
    assert.match(stdout, new RegExp(`^${bad}: invalid \\(\\d+ problems?\\)`, 'm'));
  });

  it('checks credentials files too: an OpenShell token grant is refused by its field name, a valid file is ok', async () => {
    const grant = 'fixtures/credentials/invalid-token-grant.yaml';
    const good = 'fixtures/credentials/valid-basic.yaml';
    const { code, stdout } = await run('check', 'policies/default.yaml', '--credentials', grant, '--credentials', good);
    assert.equal(code, 1, stdout);
    assert.match(stdout, new RegExp(`^${grant}:\\d+:\\d+ CREDENTIALS_UNKNOWN_KEY providers\\.keycloak\\.token_grant: `, 'm'));
    assert.match(stdout, new RegExp(`^${grant}:\\d+:\\d+ CREDENTIALS_UNKNOWN_KEY providers\\.keycloak\\.auth_style: `, 'm'));
    assert.match(stdout, new RegExp(`^${good}: ok$`, 'm'));
    assert.match(stdout, /^policies\/default\.yaml: ok/m);
    const alone = await run('check', '--credentials', 'fixtures/credentials/does-not-exist.yaml');
    assert.equal(alone.code, 1);
    assert.match(alone.stdout, /CREDENTIALS_UNREADABLE/);
  });

  it('reports an unreadable file as POLICY_UNREADABLE', async () => {
    const { code, stdout } = await run('check', 'fixtures/policies/does-not-exist.yaml');
    assert.equal(code, 1);
    assert.match(stdout, /POLICY_UNREADABLE/);
  });

  it('prints one JSON array with an object per file under --json', async () => {
    const bad = 'fixtures/policies/invalid/allowed-ips-loopback.yaml';
    const warn = 'fixtures/policies/valid/ports-and-port.yaml';
    const { code, stdout } = await run('check', '--json', warn, bad);
    assert.equal(code, 1);
    const reports = json<CheckReport[]>(stdout);
    assert.equal(reports.length, 2);
    const [first, second] = reports;
    assert.deepEqual(Object.keys(first ?? {}).sort(), ['file', 'ok', 'problems', 'warnings']);
    assert.equal(first?.file, warn);
    assert.equal(first?.ok, true);
    assert.ok(first?.warnings.some((w) => w.code === 'POLICY_WARN_PORT_AND_PORTS'));
    assert.equal(second?.ok, false);
    const problem = second?.problems.find((p) => p.code === 'POLICY_ALLOWED_IPS_LOOPBACK');
    assert.ok(problem);
    assert.equal(problem.path, 'network_policies.internal.endpoints[0].allowed_ips[0]');
    assert.ok(typeof problem.line === 'number' && problem.line > 0);
    assert.deepEqual(Object.keys(problem).sort(), ['code', 'column', 'line', 'message', 'path']);
  });

  it('exits 2 without files or with an unknown option', async () => {
    assert.equal((await run('check')).code, 2);
    assert.equal((await run('check', '--frob', 'policies/default.yaml')).code, 2);
  });
});

describe('boundary policy explain', () => {
  it('explains an allowed request with policy, endpoint and reason', async () => {
    const { code, stdout } = await run('explain', 'policies/default.yaml', 'https://registry.npmjs.org/react');
    assert.equal(code, 0);
    assert.match(stdout, /^ALLOW GET \/react to registry\.npmjs\.org:443/m);
    assert.match(stdout, /reason\s+preset-allowed/);
    assert.match(stdout, /policy\s+npm_registry/);
    assert.match(stdout, /endpoint\s+0/);
  });

  it('suggests a new entry for an unlisted host and never prints the query', async () => {
    const { code, stdout } = await run('explain', 'policies/default.yaml', 'https://uploads.example.com/v1/files?token=SECRET123');
    assert.equal(code, 1);
    assert.match(stdout, /^DENY GET \/v1\/files to uploads\.example\.com:443/m);
    assert.match(stdout, /no-endpoint-matched/);
    assert.match(stdout, /host: uploads\.example\.com/);
    assert.match(stdout, /port: 443/);
    assert.match(stdout, /method: GET/);
    assert.match(stdout, /path: \/v1\/files/);
    assert.ok(!stdout.includes('SECRET123'));
    assert.ok(!stdout.includes('token='));
  });

  it('prints the JSON shape and a suggestion that really allows the request', async () => {
    const file = 'policies/default.yaml';
    const { code, stdout } = await run('explain', file, 'https://pypi.org/legacy/', '--method', 'post', '--json');
    assert.equal(code, 1);
    const report = json<ExplainReport>(stdout);
    for (const key of ['verdict', 'policy', 'endpointIndex', 'reason', 'detail']) assert.ok(key in report, key);
    assert.equal(report.verdict, 'deny');
    assert.equal(report.reason, 'no-rule-matched');
    assert.equal(report.policy, 'pypi');
    assert.equal(report.endpointIndex, 0);
    assert.ok(report.suggestion !== undefined, report.hint);
    assert.match(report.suggestion, /protocol: rest/);
    const intent = { adapter: 'explain' as const, host: 'pypi.org', port: 443, method: 'POST', path: '/legacy/' };
    assert.equal(allowsAfterMerge(file, report.suggestion, intent), 'allow');
  });

  it('decides host:port at the connection level and suggests a plain endpoint', async () => {
    const allowed = await run('explain', 'policies/default.yaml', 'pypi.org:443', '--json');
    assert.equal(allowed.code, 0);
    assert.equal(json<ExplainReport>(allowed.stdout).reason, 'endpoint-allowed');
    const denied = await run('explain', 'policies/default.yaml', 'pypi.org:22', '--json');
    assert.equal(denied.code, 1);
    const report = json<ExplainReport>(denied.stdout);
    assert.equal(report.reason, 'no-endpoint-matched');
    assert.equal(report.policy, null);
    assert.ok(report.suggestion !== undefined);
    assert.doesNotMatch(report.suggestion, /protocol/);
    assert.equal(allowsAfterMerge('policies/default.yaml', report.suggestion, { adapter: 'explain', host: 'pypi.org', port: 22 }), 'allow');
  });

  it('gives a hint instead of a suggestion when a deny rule matched', async () => {
    const { code, stdout } = await run('explain', 'policies/default.yaml', 'https://github.com/acme/app.git/git-receive-pack', '--method', 'POST', '--json');
    assert.equal(code, 1);
    const report = json<ExplainReport>(stdout);
    assert.equal(report.reason, 'deny-rule-matched');
    assert.equal(report.policy, 'github_clone');
    assert.equal(report.suggestion, undefined);
    assert.match(report.hint ?? '', /deny rule/);
  });

  it('allows the git clone requests of the default policy', async () => {
    const refs = await run('explain', 'policies/default.yaml', 'https://github.com/acme/app.git/info/refs?service=git-upload-pack', '--json');
    assert.equal(json<ExplainReport>(refs.stdout).verdict, 'allow');
    const pack = await run('explain', 'policies/default.yaml', 'https://github.com/acme/app.git/git-upload-pack', '--method', 'POST', '--json');
    assert.equal(json<ExplainReport>(pack.stdout).verdict, 'allow');
    const push = await run('explain', 'policies/default.yaml', 'https://github.com/acme/app.git/info/refs?service=git-receive-pack', '--json');
    assert.equal(json<ExplainReport>(push.stdout).reason, 'deny-rule-matched');
  });

  it('names the binary and suggests an entry for it when the binary is not allowed', async () => {
    const file = 'policies/rest-api.yaml';
    const { code, stdout } = await run('explain', file, 'https://tracker.example.com/api/v2/items', '--binary', '/usr/bin/python3', '--json');
    assert.equal(code, 1);
    const report = json<ExplainReport>(stdout);
    assert.equal(report.reason, 'binary-not-allowed');
    assert.ok(report.suggestion !== undefined, report.hint);
    assert.match(report.suggestion, /path: \/usr\/bin\/python3/);
    const intent = { adapter: 'explain' as const, host: 'tracker.example.com', port: 443, method: 'GET', path: '/api/v2/items', identity: exe('/usr/bin/python3') };
    assert.equal(allowsAfterMerge(file, report.suggestion, intent), 'allow');
  });

  it('normalises the target host (case, IDNA) before deciding', async () => {
    const { code, stdout } = await run('explain', 'fixtures/policies/valid/idn-and-case.yaml', 'https://BÜCHER.example./', '--json');
    assert.equal(code, 0, stdout);
    assert.equal(json<ExplainReport>(stdout).policy, 'idn');
  });

  it('exits 0 with verdict audit on an audit endpoint', async () => {
    const { code, stdout } = await run('explain', 'policies/audit.yaml', 'https://billing.example.com/v3/other', '--method', 'DELETE', '--json');
    assert.equal(code, 0);
    assert.equal(json<ExplainReport>(stdout).verdict, 'audit');
  });

  it('exits 2 and prints the problems when the policy does not load', async () => {
    const { code, stderr } = await run('explain', 'fixtures/policies/invalid/port-zero.yaml', 'api.example.com:443');
    assert.equal(code, 2);
    assert.match(stderr, /POLICY_PORT_INVALID/);
  });

  it('exits 2 for targets it cannot parse', async () => {
    for (const target of ['api.example.com', 'ftp://api.example.com/', 'https://user@api.example.com/', 'https://api.example.com:0/', '[::1']) {
      const { code, stderr } = await run('explain', 'policies/default.yaml', target);
      assert.equal(code, 2, target);
      assert.match(stderr, /USAGE/, target);
    }
    assert.equal((await run('explain', 'policies/default.yaml', 'pypi.org:443', '--binary', 'python')).code, 2);
    assert.equal((await run('explain', 'policies/default.yaml', 'pypi.org:443', '--method', 'GE T')).code, 2);
    assert.equal((await run('explain', 'policies/default.yaml')).code, 2);
  });
});

describe('boundary policy in a child process', () => {
  it('exits with the command status', async () => {
    const script = [
      "import { policyCommand } from './src/app/cli/policy.ts';",
      'const io = { stdout: process.stdout, stderr: process.stderr, env: {}, cwd: process.cwd(),',
      '  signal: new AbortController().signal, now: () => 0 };',
      'process.exitCode = await policyCommand(process.argv.slice(1), io);',
    ].join('\n');
    const exec = promisify(execFile);
    const args = ['--import', 'tsx', '--input-type=module', '-e', script];
    const ok = await exec(process.execPath, [...args, 'check', 'policies/default.yaml'], { cwd: ROOT, timeout: CHILD_TIMEOUT_MS });
    assert.match(ok.stdout, /policies\/default\.yaml: ok/);
    await assert.rejects(
      exec(process.execPath, [...args, 'check', 'fixtures/policies/invalid/version-2.yaml'], { cwd: ROOT, timeout: CHILD_TIMEOUT_MS }),
      (err: { code?: number; stdout?: string }) => err.code === 1 && /POLICY_VERSION/.test(err.stdout ?? ''),
    );
  });
});
