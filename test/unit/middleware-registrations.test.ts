// The --middleware-config file (docs/running.md#middleware-services): every rule of a registration, each problem
// reported with its path under CONFIG_INVALID; `policy check` loads entries naming the services it lists.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { CliIo } from '../../src/app/cli/io.js';
import { policyCommand } from '../../src/app/cli/policy.js';
import { DEFAULT_MIDDLEWARE_TIMEOUT_MS, parseRegistrations } from '../../src/middleware/registrations.js';

const good = { name: 'acme/dlp', grpc_endpoint: 'https://dlp.internal:8443', max_payload_bytes: 65536 };

function problems(list: unknown): string[] {
  try {
    parseRegistrations(list, 'test');
    return [];
  } catch (err) {
    return (err as { code: string; issues: { code: string; path: string }[] }).issues.map((i) => `${i.code} ${i.path}`);
  }
}

describe('middleware service registrations', () => {
  it('reads a registration with its defaults', () => {
    const [r] = parseRegistrations([good], 'test');
    assert.equal(r?.target, 'dlp.internal:8443');
    assert.equal(r?.tls, true);
    assert.equal(r?.timeoutMs, DEFAULT_MIDDLEWARE_TIMEOUT_MS);
    assert.equal(parseRegistrations([{ ...good, timeout: '2s' }], 'test')[0]?.timeoutMs, 2000);
  });

  for (const [what, item, path] of [
    ['a reserved ryno/ name', { ...good, name: 'ryno/dlp' }, 'services[0].name'],
    ['a reserved openshell/ name', { ...good, name: 'openshell/x' }, 'services[0].name'],
    ['a reserved boundary/ name', { ...good, name: 'boundary/x' }, 'services[0].name'],
    ['http:// without allow_insecure_transport', { ...good, grpc_endpoint: 'http://127.0.0.1:1' }, 'services[0].grpc_endpoint'],
    ['a path in the endpoint', { ...good, grpc_endpoint: 'https://a:1/x' }, 'services[0].grpc_endpoint'],
    ['no max_payload_bytes', { name: 'a', grpc_endpoint: 'https://a:1' }, 'services[0].max_payload_bytes'],
    ['max_payload_bytes over 4 MiB', { ...good, max_payload_bytes: 4 * 1024 * 1024 + 1 }, 'services[0].max_payload_bytes'],
    ['a timeout under 10 ms', { ...good, timeout: '9ms' }, 'services[0].timeout'],
    ['a timeout over 30 s', { ...good, timeout: '31s' }, 'services[0].timeout'],
    ['a timeout without a unit', { ...good, timeout: 500 }, 'services[0].timeout'],
    ['an unknown key', { ...good, audience: 'x' }, 'services[0].audience'],
  ] as const) {
    it(`refuses ${what}`, () => assert.deepEqual(problems([item]), [`CONFIG_INVALID ${path}`]));
  }

  it('takes loopback http:// with allow_insecure_transport, and refuses a name registered twice', () => {
    assert.equal(parseRegistrations([{ ...good, grpc_endpoint: 'http://127.0.0.1:9', allow_insecure_transport: true }], 'test')[0]?.tls, false);
    assert.deepEqual(problems([good, good]), ['CONFIG_INVALID services[1].name']);
  });
});

describe('policy check --middleware-config', () => {
  it('loads an entry naming a registered service, and refuses it without the file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'middleware-check-'));
    try {
      await writeFile(join(dir, 'services.yaml'), 'services:\n  - { name: acme/dlp, grpc_endpoint: "https://dlp:443", max_payload_bytes: 1024 }\n');
      await writeFile(
        join(dir, 'policy.yaml'),
        'version: 1\nnetwork_policies:\n  a:\n    endpoints: [{ host: api.example.com, port: 443 }]\n    binaries: [{ path: "/**" }]\nnetwork_middlewares:\n  dlp:\n    middleware: acme/dlp\n    endpoints: { include: [api.example.com] }\n',
      );
      let stdout = '';
      const io: CliIo = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: () => true }, env: {}, cwd: dir, signal: new AbortController().signal, now: () => 0 };
      assert.equal(await policyCommand(['check', 'policy.yaml', '--json', '--middleware-config', 'services.yaml'], io), 0, stdout);
      stdout = '';
      assert.equal(await policyCommand(['check', 'policy.yaml', '--json'], io), 1);
      assert.equal((JSON.parse(stdout) as { problems: { code: string }[] }[])[0]?.problems[0]?.code, 'POLICY_MIDDLEWARE_EXTERNAL');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
