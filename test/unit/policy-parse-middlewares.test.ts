// Issue 31: `network_middlewares` loads with OpenShell's rules (docs/policy.md#network-middlewares): names, order,
// config, failure modes, host selectors, the tls: skip conflicts, selection by host, and the policy hash.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createPolicyCompiler } from '../../src/policy/parse-off-thread.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { MAX_MIDDLEWARE_CONFIG_BYTES } from '../../src/policy/middleware-section.js';
import { issuesOf } from '../harness/policy-parse-fixtures.js';

const HEAD = `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.com, port: 443 }
      - { host: raw.example.com, port: 443, tls: skip }
    binaries: [{ path: "/**" }]
`;

const withMiddlewares = (section: string): string => `${HEAD}network_middlewares:\n${section}`;
const codes = (text: string): string[] => issuesOf(text).map((i) => `${i.code} ${i.path}`);

describe('network_middlewares: what loads', () => {
  const policy = parsePolicy(
    withMiddlewares(`  late:
    middleware: ryno/regex
    order: 20
    endpoints: { include: ["**.example.com"], exclude: [raw.example.com] }
  early:
    name: Early redactor
    middleware: openshell/regex
    order: -5
    on_error: fail_open
    endpoints: { include: [api.example.com] }
  dlp:
    middleware: ryno/regex
    order: 3
    config: { mode: redact }
    on_error: fail_closed
    on_uninspectable: allow
    endpoints: { include: ["*.example.com"], exclude: [raw.example.com] }
`),
  );

  it('compiles every entry in ascending order, both spellings as the one built-in', () => {
    assert.deepEqual(policy.middlewares.map((m) => [m.key, m.order]), [['early', -5], ['dlp', 3], ['late', 20]]);
    assert.deepEqual(policy.middlewares.map((m) => m.builtin), ['regex', 'regex', 'regex']);
    assert.deepEqual(policy.middlewares.map((m) => m.middleware), ['openshell/regex', 'ryno/regex', 'ryno/regex']);
    assert.equal(policy.middlewares[0]?.name, 'Early redactor');
    assert.equal(policy.middlewares[2]?.name, 'late', 'name defaults to the key');
  });

  it('keeps the config as frozen data', () => {
    const dlp = policy.middlewares.find((m) => m.key === 'dlp');
    assert.ok(dlp !== undefined);
    assert.deepEqual(dlp.config, { mode: 'redact' });
    assert.ok(Object.isFrozen(dlp.config));
  });

  it('defaults on_uninspectable from on_error, and keeps one written explicitly', () => {
    assert.deepEqual(policy.middlewares.map((m) => [m.key, m.onError, m.onUninspectable]), [
      ['early', 'fail_open', 'allow'],
      ['dlp', 'fail_closed', 'allow'],
      ['late', 'fail_closed', 'deny'],
    ]);
  });

  it('selects by destination host only: wildcards by label, ** never the apex, exclusion wins', () => {
    const keys = (host: string): string[] => policy.middlewaresFor(host).map((m) => m.key);
    assert.deepEqual(keys('api.example.com'), ['early', 'dlp', 'late']);
    assert.deepEqual(keys('www.example.com'), ['dlp', 'late']);
    assert.deepEqual(keys('a.b.example.com'), ['late'], '* is one label, ** one or more');
    assert.deepEqual(keys('raw.example.com'), []);
    assert.deepEqual(keys('example.com'), []);
    assert.deepEqual(keys('api.example.org'), []);
    assert.equal(policy.middlewaresFor('api.example.org'), policy.middlewaresFor('other.test'), 'one shared empty list');
  });

  it('hashes the section: the same network policies with other middlewares are another policy', () => {
    const bare = parsePolicy(HEAD);
    const one = parsePolicy(withMiddlewares('  r: { middleware: ryno/regex, endpoints: { include: [api.example.com] } }\n'));
    const renamed = parsePolicy(withMiddlewares('  r: { middleware: openshell/regex, endpoints: { include: [api.example.com] } }\n'));
    const reordered = parsePolicy(withMiddlewares('  r: { middleware: ryno/regex, order: 0, endpoints: { include: [API.example.com] } }\n'));
    assert.notEqual(one.hash, bare.hash);
    assert.notEqual(renamed.hash, one.hash);
    assert.equal(reordered.hash, one.hash, 'the default order and a normalised host are the same policy');
    assert.equal(parsePolicy(`${HEAD}network_middlewares: {}\n`).hash, bare.hash, 'an empty section hashes as none');
  });

  it('compiles the same policy off the event loop', async () => {
    const compiler = createPolicyCompiler();
    try {
      // Past OFF_THREAD_MIN_BYTES, so the worker parses and the main thread rebuilds from its plain data.
      const padding = `# ${'x'.repeat(120)}\n`.repeat(160);
      const text = `${padding}${withMiddlewares('  dlp: { middleware: ryno/regex, order: 2, config: { mode: redact }, endpoints: { include: [api.example.com] } }\n')}`;
      const off = await compiler.parse(text);
      assert.equal(off.hash, parsePolicy(text).hash);
      assert.deepEqual(off.middlewares.map((m) => [m.key, m.config]), [['dlp', { mode: 'redact' }]]);
      const external = text.replace('ryno/regex', 'acme-dlp');
      await assert.rejects(compiler.parse(external), (err: { issues: { code: string }[] }) => err.issues.some((i) => i.code === 'POLICY_MIDDLEWARE_EXTERNAL'));
    } finally {
      await compiler.close();
    }
  });
});

describe('network_middlewares: what is refused', () => {
  it('refuses an external middleware service with its own code: never loaded and skipped', () => {
    const text = withMiddlewares('  dlp: { middleware: acme-dlp, endpoints: { include: [api.example.com] } }\n');
    assert.deepEqual(codes(text), ['POLICY_MIDDLEWARE_EXTERNAL network_middlewares.dlp.middleware']);
  });

  it('reserves both built-in prefixes: an unknown name under them is no built-in', () => {
    for (const name of ['ryno/dlp', 'openshell/dlp']) {
      const text = withMiddlewares(`  dlp: { middleware: ${name}, endpoints: { include: [api.example.com] } }\n`);
      assert.deepEqual(codes(text), ['POLICY_MIDDLEWARE_UNKNOWN network_middlewares.dlp.middleware']);
    }
  });

  it('W5: the regex config is closed: mode redact only', () => {
    const config = (c: string): string[] => codes(withMiddlewares(`  r: { middleware: ryno/regex, config: ${c}, endpoints: { include: [api.example.com] } }\n`));
    for (const bad of ['{ mode: block }', '{ mode: allow }', '{ patterns: [x] }', '{ mode: 1 }', '[redact]']) {
      assert.equal(config(bad).length, 1, bad);
      assert.match(config(bad)[0] ?? '', /^POLICY_(MIDDLEWARE_CONFIG|TYPE) network_middlewares\.r\.config$/, bad);
    }
    assert.doesNotThrow(() => parsePolicy(withMiddlewares('  r: { middleware: ryno/regex, config: {}, endpoints: { include: [api.example.com] } }\n')));
  });

  it('bounds a config at MAX_MIDDLEWARE_CONFIG_BYTES before reading it', () => {
    const big = 'y'.repeat(MAX_MIDDLEWARE_CONFIG_BYTES);
    const text = withMiddlewares(`  dlp: { middleware: ryno/regex, config: { blob: "${big}" }, endpoints: { include: [api.example.com] } }\n`);
    assert.deepEqual(codes(text), ['POLICY_MIDDLEWARE_CONFIG network_middlewares.dlp.config']);
  });

  it('checks order as an int32, on_error and on_uninspectable as their values, and the entry as a closed map', () => {
    assert.deepEqual(codes(withMiddlewares('  r: { middleware: ryno/regex, order: 2147483648, endpoints: { include: [api.example.com] } }\n')), [
      'POLICY_MIDDLEWARE_INVALID network_middlewares.r.order',
    ]);
    assert.deepEqual(codes(withMiddlewares('  r: { middleware: ryno/regex, order: "1", endpoints: { include: [api.example.com] } }\n')), ['POLICY_TYPE network_middlewares.r.order']);
    assert.deepEqual(codes(withMiddlewares('  r: { middleware: ryno/regex, on_uninspectable: block, endpoints: { include: [api.example.com] } }\n')), [
      'POLICY_MIDDLEWARE_INVALID network_middlewares.r.on_uninspectable',
    ]);
    assert.deepEqual(codes(withMiddlewares('  r: { middleware: ryno/regex, phase: x, endpoints: { include: [api.example.com] } }\n')), ['POLICY_UNKNOWN_KEY network_middlewares.r.phase']);
    assert.deepEqual(codes(withMiddlewares('  r: { middleware: ryno/regex, endpoints: { include: [api.example.com], hosts: [] } }\n')), [
      'POLICY_UNKNOWN_KEY network_middlewares.r.endpoints.hosts',
    ]);
    assert.deepEqual(codes(withMiddlewares('  r: { middleware: ryno/regex, endpoints: null }\n')), ['POLICY_TYPE network_middlewares.r.endpoints']);
    assert.deepEqual(codes(withMiddlewares('  r: { middleware: "", endpoints: { include: [api.example.com] } }\n')), ['POLICY_MIDDLEWARE_INVALID network_middlewares.r.middleware']);
  });

  it('two entries with the default order collide (W1)', () => {
    const text = withMiddlewares('  a: { middleware: ryno/regex, endpoints: { include: [api.example.com] } }\n  b: { middleware: ryno/regex, endpoints: { include: [api.example.com] } }\n');
    assert.deepEqual(codes(text), ['POLICY_MIDDLEWARE_ORDER network_middlewares.b.order']);
  });

  it('checks selector patterns with the endpoint host grammar', () => {
    const include = (pattern: string): string[] => codes(withMiddlewares(`  r: { middleware: ryno/regex, endpoints: { include: ["${pattern}"] } }\n`));
    assert.deepEqual(include('*'), ['POLICY_HOST_WILDCARD network_middlewares.r.endpoints.include[0]']);
    assert.deepEqual(include('api.**.example.com'), ['POLICY_HOST_WILDCARD network_middlewares.r.endpoints.include[0]']);
    assert.deepEqual(include('https://api.example.com'), ['POLICY_HOST_INVALID network_middlewares.r.endpoints.include[0]']);
    assert.doesNotThrow(() => parsePolicy(withMiddlewares('  r: { middleware: ryno/regex, endpoints: { include: ["10.0.0.1", "*.svc.example.com"] } }\n')));
  });

  it('W4: a fail_closed entry may not select a tls: skip endpoint, through a wildcard either; fail_open may', () => {
    const entry = (mode: string, selector: string): string[] =>
      codes(withMiddlewares(`  r: { middleware: ryno/regex, ${mode}endpoints: ${selector} }\n`));
    const conflict = ['POLICY_MIDDLEWARE_TLS_SKIP network_middlewares.r.endpoints'];
    assert.deepEqual(entry('', '{ include: [raw.example.com] }'), conflict);
    assert.deepEqual(entry('', '{ include: ["*.example.com"] }'), conflict);
    assert.deepEqual(entry('on_error: fail_open, on_uninspectable: deny, ', '{ include: ["**.example.com"] }'), conflict);
    assert.deepEqual(entry('on_uninspectable: allow, ', '{ include: ["*.example.com"] }'), conflict, 'fail_closed conflicts whatever on_uninspectable says');
    assert.doesNotThrow(() => parsePolicy(withMiddlewares('  r: { middleware: ryno/regex, on_error: fail_open, endpoints: { include: ["*.example.com"] } }\n')));
    assert.doesNotThrow(() => parsePolicy(withMiddlewares('  r: { middleware: ryno/regex, endpoints: { include: ["*.example.com"], exclude: [raw.example.com] } }\n')));
    assert.doesNotThrow(() => parsePolicy(withMiddlewares('  r: { middleware: ryno/regex, endpoints: { include: ["**.example.com"], exclude: ["**.example.com"] } }\n')));
  });
});
