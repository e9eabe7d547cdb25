// The --middleware-config file (docs/running.md#middleware-services): every rule of a registration, each problem
// reported with its path under CONFIG_INVALID.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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
