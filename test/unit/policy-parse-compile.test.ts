// parsePolicy on a valid policy (order, ids, host normalisation, deep freeze, canonical hash, host index), every
// problem of a broken policy reported at once with its line and column, and loadPolicyFile.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { BoundaryError, type ErrorCode, isBoundaryError } from '../../src/shared/errors.js';
import { loadPolicyFile } from '../../src/policy/load.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { endpoint, issuesOf } from '../harness/policy-parse-fixtures.js';

describe('parsePolicy: a valid policy', () => {
  const text = `version: 1
network_policies:
  tracker_api:
    name: tracker-api
    endpoints:
      - host: Tracker.Example.com.
        ports: [443]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/api/v2/**" }
          - allow: { method: get, path: /export, query: { format: { any: [csv, json] } } }
        deny_rules:
          - { method: "*", path: "/api/v2/admin/**" }
    binaries: [{ path: /usr/bin/node }]
  packages:
    endpoints: [{ host: "*.pkg.example.net", port: 443 }]
    binaries: [{ path: "/**" }]
  cache:
    endpoints: [{ host: cache.internal.example.com, port: 6379, protocol: tcp }]
    binaries: [{ path: /usr/local/bin/worker }]
`;
  const policy = parsePolicy(text);

  it('compiles entries and endpoints in policy order with stable ids', () => {
    assert.deepEqual(policy.entries.map((e) => e.key), ['tracker_api', 'packages', 'cache']);
    assert.deepEqual(policy.endpoints.map((e) => e.id), ['tracker_api#0', 'packages#0', 'cache#0']);
    assert.deepEqual(policy.endpoints.map((e) => e.order), [0, 1, 2]);
    assert.equal(policy.entries[0]?.name, 'tracker-api');
    assert.equal(policy.entries[1]?.name, 'packages', 'name defaults to the key');
    assert.equal(policy.generation, 0);
  });

  it('normalises hosts and records how each was written', () => {
    const [tracker, packages, cache] = policy.endpoints;
    assert.equal(tracker?.host, 'tracker.example.com');
    assert.equal(tracker?.hostKind, 'exact');
    assert.equal(packages?.hostKind, 'wildcard');
    assert.equal(cache?.protocol, 'tcp');
    assert.equal(packages?.protocol, 'l4');
    assert.equal(tracker?.inspected, true);
    assert.equal(packages?.inspected, false);
    assert.equal(tracker?.enforcement, 'enforce');
    assert.equal(tracker?.tls, 'auto');
    assert.deepEqual(tracker?.ports, [443]);
    assert.equal(tracker?.rules.length, 2);
    assert.equal(tracker?.denyRules[0]?.text, '* /api/v2/admin/**');
    assert.equal(tracker?.rules[1]?.text, 'GET /export (query: format)');
  });

  it('is deep-frozen', () => {
    assert.ok(Object.isFrozen(policy));
    assert.ok(Object.isFrozen(policy.entries));
    assert.ok(Object.isFrozen(policy.endpoints));
    assert.ok(Object.isFrozen(policy.endpoints[0]));
    assert.ok(Object.isFrozen(policy.endpoints[0]?.ports));
    assert.ok(Object.isFrozen(policy.endpoints[0]?.rules));
    assert.ok(Object.isFrozen(policy.warnings));
    assert.throws(() => {
      (policy.endpoints as unknown as unknown[]).push({});
    }, TypeError);
    assert.throws(() => {
      (policy.endpoints[0] as unknown as { host: string }).host = 'evil.example';
    }, TypeError);
  });

  it('hashes canonical content: formatting, comments, key order and entry order do not change it', () => {
    const reordered = `# comment
network_policies:
  cache:
    endpoints: [{ protocol: tcp, port: 6379, host: cache.internal.example.com }]
    binaries: [{ path: /usr/local/bin/worker }]
  packages:
    binaries: [{ path: "/**" }]
    endpoints:
      - port: 443
        host: "*.pkg.example.net"
  tracker_api:
    name: tracker-api
    binaries: [{ path: /usr/bin/node }]
    endpoints:
      - host: tracker.example.com
        port: 443
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/api/v2/**" }
          - allow: { path: /export, method: GET, query: { format: { any: [csv, json] } } }
        deny_rules:
          - { path: "/api/v2/admin/**", method: "*" }
version: 1
`;
    assert.match(policy.hash, /^[0-9a-f]{64}$/);
    assert.equal(parsePolicy(reordered).hash, policy.hash);
    assert.notEqual(parsePolicy(text.replace('port: 6379', 'port: 6380')).hash, policy.hash);
    assert.notEqual(parsePolicy(text.replace('enforcement: enforce', 'enforcement: audit')).hash, policy.hash);
  });

  it('indexes hosts: exact, wildcard and none', () => {
    assert.deepEqual(policy.endpointsForHost('tracker.example.com').map((e) => e.id), ['tracker_api#0']);
    assert.deepEqual(policy.endpointsForHost('a.pkg.example.net').map((e) => e.id), ['packages#0']);
    assert.deepEqual(policy.endpointsForHost('pkg.example.net'), []);
    assert.deepEqual(policy.endpointsForHost('1.2.3.4'), []);
  });

  it('accepts an empty file section and yields a policy with no entries', () => {
    const empty = parsePolicy('version: 1\nnetwork_policies: {}\n');
    assert.equal(empty.entries.length, 0);
    assert.equal(parsePolicy('version: 1\n').entries.length, 0);
  });
});

describe('parsePolicy: every problem at once, with positions', () => {
  const text = `version: 2
network_policies:
  api:
    endpoints:
      - host: "*.com"
        port: 0
        deny_rule: []
      - host: ok.example.com
        ports: [443, 70000]
        protocol: rest
    binaries: [{ path: usr/bin/node }]
  _provider_x:
    endpoints: []
extra: true
`;
  const issues = issuesOf(text, 'broken.yaml');

  it('reports each problem with its code, path, line and column', () => {
    const table: [ErrorCode, string, number, number][] = [
      ['POLICY_VERSION', 'version', 1, 10],
      ['POLICY_HOST_WILDCARD', 'network_policies.api.endpoints[0].host', 5, 15],
      ['POLICY_PORT_INVALID', 'network_policies.api.endpoints[0].port', 6, 15],
      ['POLICY_UNKNOWN_KEY', 'network_policies.api.endpoints[0].deny_rule', 7, 9],
      ['POLICY_PORT_INVALID', 'network_policies.api.endpoints[1].ports[1]', 9, 22],
      ['POLICY_RULES_REQUIRED', 'network_policies.api.endpoints[1].rules', 8, 9],
      ['POLICY_BINARY_INVALID', 'network_policies.api.binaries[0].path', 11, 24],
      ['POLICY_RESERVED_KEY', 'network_policies._provider_x', 12, 3],
      ['POLICY_ENDPOINTS_EMPTY', 'network_policies._provider_x.endpoints', 13, 16],
      ['POLICY_UNKNOWN_KEY', 'extra', 14, 1],
    ];
    for (const [code, path, line, column] of table) {
      const issue = issues.find((i) => i.code === code && i.path === path);
      assert.ok(issue, `missing ${code} at ${path}`);
      assert.deepEqual([issue.line, issue.column], [line, column], `${code} at ${path}`);
      assert.equal(issue.source, 'broken.yaml');
    }
    assert.equal(issues.length, table.length, issues.map((i) => `${i.code} ${i.path}`).join('\n'));
  });

  it('puts the source and every problem into the error message, in document order', () => {
    try {
      parsePolicy(text, { source: 'broken.yaml' });
    } catch (err) {
      assert.ok(err instanceof BoundaryError);
      assert.match(err.message, /policy broken\.yaml is invalid \(10 problems\)/);
      assert.match(err.message, /broken\.yaml:5:15: network_policies\.api\.endpoints\[0\]\.host/);
      assert.ok(err.message.indexOf(':1:10:') < err.message.indexOf(':14:1:'));
    }
  });

  it('turns YAML syntax errors into POLICY_YAML_SYNTAX issues with a line', () => {
    const syntax = issuesOf('version: 1\nnetwork_policies:\n  a: [1,\n');
    assert.equal(syntax[0]?.code, 'POLICY_YAML_SYNTAX');
    assert.ok((syntax[0]?.line ?? 0) >= 3);
    const duplicate = issuesOf('version: 1\nversion: 1\n');
    assert.equal(duplicate[0]?.code, 'POLICY_YAML_SYNTAX');
    assert.equal(duplicate[0]?.line, 2);
  });

  it('rejects an empty document and a non-map document', () => {
    assert.equal(issuesOf('')[0]?.code, 'POLICY_VERSION');
    assert.equal(issuesOf('- 1\n')[0]?.code, 'POLICY_TYPE');
  });
});

describe('loadPolicyFile', () => {
  it('reads and parses a file, and names the file on every issue', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const good = join(dir, 'good.yaml');
    writeFileSync(good, endpoint('{ host: a.example.com, port: 443 }'));
    assert.equal((await loadPolicyFile(good)).endpoints.length, 1);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, endpoint('{ host: a.example.com, port: 0 }'));
    await assert.rejects(loadPolicyFile(bad), (err: unknown) => {
      assert.ok(isBoundaryError(err));
      assert.equal(err.code, 'POLICY_INVALID');
      assert.equal(err.issues[0]?.source, bad);
      assert.ok(err.message.includes(bad));
      return true;
    });
  });

  it('fails POLICY_UNREADABLE with the cause for a missing file or a directory', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    await assert.rejects(loadPolicyFile(join(dir, 'missing.yaml')), (err: unknown) => {
      assert.ok(isBoundaryError(err));
      assert.equal(err.code, 'POLICY_UNREADABLE');
      assert.ok(err.cause instanceof Error);
      return true;
    });
    await assert.rejects(loadPolicyFile(dir), { code: 'POLICY_UNREADABLE' });
    const binary = join(dir, 'binary.yaml');
    writeFileSync(binary, Buffer.from([0xff, 0xfe, 0x00]));
    await assert.rejects(loadPolicyFile(binary), { code: 'POLICY_UNREADABLE' });
  });
});
