import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRunFlags } from '../../src/app/cli/run.js';
import { parseConfig } from '../../src/app/config.js';
import type { BoundaryError } from '../../src/shared/errors.js';

function issuePaths(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.equal((err as BoundaryError).code, 'CONFIG_INVALID');
    return (err as BoundaryError).issues.map((i) => i.path);
  }
  assert.fail('expected CONFIG_INVALID');
}

describe('attached-mode configuration', () => {
  it('accepts a supervisor by name, defaults the instance id to the sandbox id and parses the relay allow-list', () => {
    const config = parseConfig({ supervisor: 'supervisor.boundary.svc:5500', tlsDir: '/tls', sandboxId: 'sb-1', relayAllow: '22, [::1]:2222' });
    assert.deepEqual(config.attached, {
      supervisor: { host: 'supervisor.boundary.svc', port: 5500 },
      tlsDir: '/tls',
      sandboxId: 'sb-1',
      instanceId: 'sb-1',
      relayAllow: [
        { host: '127.0.0.1', port: 22 },
        { host: '::1', port: 2222 },
      ],
    });
    assert.ok(Object.isFrozen(config.attached));
    assert.equal(parseConfig({}).attached, undefined);
  });

  it('lists every problem: policy file beside a supervisor, missing tls dir and sandbox, bad ids and relay targets', () => {
    const paths = issuePaths(() => parseConfig({ supervisor: 'sup:5500', policyFile: '/p.yaml', instanceId: '-bad', relayAllow: '10.0.0.1:22' }));
    assert.deepEqual(paths.sort(), ['instanceId', 'policyFile', 'relayAllow', 'sandboxId', 'tlsDir']);
  });

  it('requires capture by default when attached (a pod) and makes it optional standalone, unless --capture says', () => {
    const attached = { supervisor: 'sup:5500', tlsDir: '/tls', sandboxId: 'sb-1' };
    assert.equal(parseConfig(attached).capture, 'required');
    assert.equal(parseConfig({}).capture, 'optional');
    for (const mode of ['required', 'optional', 'off'] as const) {
      assert.equal(parseConfig(parseRunFlags(['--policy', 'p.yaml', '--capture', mode], '/')).capture, mode);
      assert.equal(parseConfig({ ...attached, capture: mode }).capture, mode);
    }
    assert.deepEqual(issuePaths(() => parseConfig({ capture: 'on' })), ['capture']);
  });

  it('refuses --middleware-config beside a supervisor: the supervisor registers the services', () => {
    assert.deepEqual(issuePaths(() => parseConfig({ supervisor: 'sup:5500', tlsDir: '/tls', sandboxId: 'sb-1', middlewareConfig: '/m.yaml' })), ['middlewareConfig']);
  });

  it('refuses a supervisor without a port, and attached-mode keys without a supervisor', () => {
    assert.deepEqual(issuePaths(() => parseConfig({ supervisor: 'sup', tlsDir: '/tls', sandboxId: 'sb-1' })), ['supervisor']);
    assert.deepEqual(issuePaths(() => parseConfig({ tlsDir: '/tls', sandboxId: 'sb-1' })).sort(), ['sandboxId', 'tlsDir']);
  });

  it('maps the run flags and resolves --tls-dir against the working directory', () => {
    const raw = parseRunFlags(['--supervisor', '127.0.0.1:5500', '--tls-dir', 'tls', '--sandbox-id', 'sb-1', '--instance-id', 'pod-7', '--relay-allow', '22'], '/work');
    assert.deepEqual(raw, { supervisor: '127.0.0.1:5500', tlsDir: '/work/tls', sandboxId: 'sb-1', instanceId: 'pod-7', relayAllow: '22' });
  });
});
