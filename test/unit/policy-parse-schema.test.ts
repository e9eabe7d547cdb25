// The current OpenShell schema's file-level rules, as parsePolicy and loadPolicyFile apply them: explicit nulls,
// closed objects, the values of the sections boundary does not enforce, tls spellings, the mcp stanza's protocol,
// and what a file must be before it is parsed (a regular file, valid UTF-8, within MAX_POLICY_BYTES).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ErrorCode } from '../../src/shared/errors.js';
import { MAX_POLICY_BYTES } from '../../src/policy/limits.js';
import { loadPolicyFile } from '../../src/policy/load.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { MAX_FILESYSTEM_PATH_BYTES, MAX_FILESYSTEM_PATHS } from '../../src/policy/sandbox-sections.js';
import { E0, endpoint, expectIssue, issuesOf } from '../harness/policy-parse-fixtures.js';

const mcp = (fields: string, rule = '{ allow: { method: tools/call } }'): string =>
  endpoint(`host: mcp.example.com\nport: 443\nprotocol: mcp\nenforcement: enforce\n${fields}\nrules: [${rule}]`);

describe('parsePolicy: an explicit null is never "absent"', () => {
  // Each field OpenShell decodes into an Option<..> that refuses null, and network_policies.
  const cases: [string, string, ErrorCode, string][] = [
    ['network_policies', 'version: 1\nnetwork_policies: null\n', 'POLICY_TYPE', 'network_policies'],
    ['network_policies left empty', 'version: 1\nnetwork_policies:\n', 'POLICY_TYPE', 'network_policies'],
    ['filesystem_policy', 'version: 1\nfilesystem_policy: null\n', 'POLICY_TYPE', 'filesystem_policy'],
    ['landlock', 'version: 1\nlandlock: ~\n', 'POLICY_TYPE', 'landlock'],
    ['process', 'version: 1\nprocess: null\n', 'POLICY_TYPE', 'process'],
    ['credential_binding', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, credential_binding: null }'), 'POLICY_TYPE', `${E0}.credential_binding`],
    ['json_rpc', endpoint('{ host: a.example.com, port: 443, protocol: json-rpc, json_rpc: null, rules: [{ allow: { method: x } }] }'), 'POLICY_TYPE', `${E0}.json_rpc`],
    ['mcp (F2)', mcp('mcp: null'), 'POLICY_TYPE', `${E0}.mcp`],
    ['mcp.strict_tool_names', mcp('mcp: { strict_tool_names: null }'), 'POLICY_TYPE', `${E0}.mcp.strict_tool_names`],
    ['mcp.allow_all_known_mcp_methods', mcp('mcp: { allow_all_known_mcp_methods: ~ }'), 'POLICY_TYPE', `${E0}.mcp.allow_all_known_mcp_methods`],
    ['an MCP rule tool', mcp('', '{ allow: { method: tools/call, tool: null } }'), 'POLICY_TYPE', `${E0}.rules[0].allow.tool`],
    ['an MCP rule params', mcp('', '{ allow: { method: tools/call, params: null } }'), 'POLICY_TYPE', `${E0}.rules[0].allow.params`],
    ['a list', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: null }'), 'POLICY_TYPE', `${E0}.rules`],
    ['a list item', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [null, { allow: { method: GET, path: / } }] }'), 'POLICY_TYPE', `${E0}.rules[0]`],
    ['binaries', 'version: 1\nnetwork_policies:\n  p:\n    binaries: null\n    endpoints: [{ host: a.example.com, port: 443 }]\n', 'POLICY_TYPE', 'network_policies.p.binaries'],
    ['tls', endpoint('{ host: a.example.com, port: 443, tls: null }'), 'POLICY_TYPE', `${E0}.tls`],
  ];
  for (const [name, text, code, path] of cases) {
    it(`${name}: ${code} at ${path}`, () => {
      const issue = expectIssue(text, code, path);
      assert.ok(issue.line !== undefined);
    });
  }

  it('still reads a field left out as absent', () => {
    assert.equal(parsePolicy(mcp('')).endpoints[0]?.options.mcpStrictToolNames, true);
    assert.equal(parsePolicy('version: 1\n').entries.length, 0);
    assert.equal(parsePolicy('version: 1\nnetwork_policies: {}\n').entries.length, 0);
  });
});

describe('parsePolicy: closed objects of the current schema', () => {
  const cases: [string, string, string][] = [
    ['binaries[].harness (F1)', endpoint('{ host: a.example.com, port: 443 }').replace('[{ path: "/**" }]', '[{ path: /usr/bin/curl, harness: true }]'), 'network_policies.p.binaries[0].harness'],
    ['endpoint advisor_proposed', endpoint('{ host: a.example.com, port: 443, advisor_proposed: true }'), `${E0}.advisor_proposed`],
    ['endpoint provider_credentialed', endpoint('{ host: a.example.com, port: 443, provider_credentialed: true }'), `${E0}.provider_credentialed`],
    ['a matcher { glob }', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: GET, path: /, query: { q: { glob: "a*" } } } }] }'), `${E0}.rules[0].allow.query.q.glob`],
    ['top-level metadata', 'version: 1\nmetadata: { name: x }\n', 'metadata'],
    ['rule-level review', endpoint('{ host: a.example.com, port: 443, protocol: rest, rules: [{ allow: { method: GET, path: / }, review: true }] }'), `${E0}.rules[0].review`],
    ['a persisted query entry', endpoint('{ host: a.example.com, port: 443, protocol: graphql, access: full, graphql_persisted_queries: { abc: { operation_type: query, hash: x } } }'), `${E0}.graphql_persisted_queries.abc.hash`],
  ];
  for (const [name, text, path] of cases) {
    it(`refuses ${name} as an unknown field`, () => {
      expectIssue(text, 'POLICY_UNKNOWN_KEY', path);
    });
  }
});

describe('parsePolicy: sections boundary does not enforce are checked as OpenShell checks them', () => {
  const section = (yaml: string): string => `version: 1\n${yaml}\nnetwork_policies: {}\n`;
  const refused: [string, string, ErrorCode, string][] = [
    ['read_write: / (F4)', 'filesystem_policy: { read_write: [/] }', 'POLICY_SANDBOX_INVALID', 'filesystem_policy.read_write[0]'],
    ['read_write: ///', 'filesystem_policy: { read_write: [/tmp, ///] }', 'POLICY_SANDBOX_INVALID', 'filesystem_policy.read_write[1]'],
    ['a relative read_only path (F4)', 'filesystem_policy: { read_only: [relative/path] }', 'POLICY_SANDBOX_INVALID', 'filesystem_policy.read_only[0]'],
    ['a .. component', 'filesystem_policy: { read_only: [/usr/../etc] }', 'POLICY_SANDBOX_INVALID', 'filesystem_policy.read_only[0]'],
    ['a path past MAX_FILESYSTEM_PATH_BYTES', `filesystem_policy: { read_only: [/${'a'.repeat(MAX_FILESYSTEM_PATH_BYTES)}] }`, 'POLICY_SANDBOX_INVALID', 'filesystem_policy.read_only[0]'],
    ['more than MAX_FILESYSTEM_PATHS paths', `filesystem_policy: { read_only: [${Array.from({ length: MAX_FILESYSTEM_PATHS }, (_, i) => `/r${i}`).join(', ')}], read_write: [/w] }`, 'POLICY_SANDBOX_INVALID', 'filesystem_policy'],
    ['a path that is not a string', 'filesystem_policy: { read_only: [1] }', 'POLICY_TYPE', 'filesystem_policy.read_only[0]'],
    ['include_workdir as a string', 'filesystem_policy: { include_workdir: "true" }', 'POLICY_TYPE', 'filesystem_policy.include_workdir'],
    ['landlock compatibility', 'landlock: { compatibility: Best_Effort }', 'POLICY_SANDBOX_INVALID', 'landlock.compatibility'],
    ['run_as_user "0" (F5)', 'process: { run_as_user: "0" }', 'POLICY_SANDBOX_INVALID', 'process.run_as_user'],
    ['run_as_group 4294967295', 'process: { run_as_group: "4294967295" }', 'POLICY_SANDBOX_INVALID', 'process.run_as_group'],
    ['run_as_user root', 'process: { run_as_user: root }', 'POLICY_SANDBOX_INVALID', 'process.run_as_user'],
    ['run_as_user as a number', 'process: { run_as_user: 1500 }', 'POLICY_TYPE', 'process.run_as_user'],
  ];
  for (const [name, yaml, code, path] of refused) {
    it(`refuses ${name}`, () => {
      expectIssue(section(yaml), code, path);
    });
  }

  it('loads the values OpenShell accepts, with one not-enforced warning for the file', () => {
    const policy = parsePolicy(
      section(
        'filesystem_policy: { include_workdir: false, read_only: [/usr, /etc/ssl], read_write: [/tmp] }\n' +
          'landlock: { compatibility: hard_requirement }\nprocess: { run_as_user: sandbox, run_as_group: "1500" }',
      ),
    );
    assert.deepEqual(policy.notEnforced, ['filesystem_policy', 'landlock', 'process']);
    assert.deepEqual(policy.warnings.map((w) => w.code), ['POLICY_WARN_NOT_ENFORCED']);
    for (const user of ['"sandbox"', '"1500"', '"4294967294"', '""']) {
      assert.doesNotThrow(() => parsePolicy(section(`process: { run_as_user: ${user} }`)), user);
    }
  });
});

describe('parsePolicy: tls and the mcp stanza', () => {
  it('takes tls left out, "" and skip, exactly', () => {
    assert.equal(parsePolicy(endpoint('{ host: a.example.com, port: 443, tls: "" }')).endpoints[0]?.tls, 'auto');
    assert.equal(parsePolicy(endpoint('{ host: a.example.com, port: 443, tls: skip }')).endpoints[0]?.tls, 'skip');
    for (const value of ['terminate', 'passthrough', 'SKIP', 'Skip', '" skip"']) {
      const issue = expectIssue(endpoint(`{ host: a.example.com, port: 443, tls: ${value} }`), 'POLICY_TLS_INVALID', `${E0}.tls`);
      assert.match(issue.message, /omit the field/);
    }
  });

  it('refuses an mcp stanza on every protocol but mcp, and takes it on mcp', () => {
    const bodies: Record<string, string> = {
      'json-rpc': 'protocol: json-rpc, enforcement: enforce, rules: [{ allow: { method: x } }]',
      rest: 'protocol: rest, enforcement: enforce, access: full',
      websocket: 'protocol: websocket, enforcement: enforce, access: full',
      graphql: 'protocol: graphql, enforcement: enforce, access: full',
      'none (L4)': 'port: 443',
    };
    for (const [protocol, body] of Object.entries(bodies)) {
      const text = endpoint(`{ host: a.example.com, port: 443, ${body}, mcp: { max_body_bytes: 1024 } }`.replace('port: 443, port: 443', 'port: 443'));
      assert.ok(issuesOf(text).some((i) => i.code === 'POLICY_MCP_INVALID' && i.path === `${E0}.mcp`), protocol);
    }
    assert.equal(parsePolicy(mcp('mcp: { max_body_bytes: 1024 }')).endpoints[0]?.options.jsonRpcMaxBodyBytes, 1024);
  });
});

describe('loadPolicyFile: what a file must be before it is parsed', () => {
  it('refuses a FIFO without waiting for a writer, and a directory, as POLICY_UNREADABLE', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const fifo = join(dir, 'policy.yaml');
    execFileSync('mkfifo', [fifo]);
    await assert.rejects(loadPolicyFile(fifo), { code: 'POLICY_UNREADABLE' });
    await assert.rejects(loadPolicyFile(dir), { code: 'POLICY_UNREADABLE' });
  });

  it('refuses a file past MAX_POLICY_BYTES with its size, reading no more than the limit', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    // A sparse gigabyte: read whole it would take a second and a gigabyte of memory.
    const huge = join(dir, 'huge.yaml');
    const fd = openSync(huge, 'w');
    writeFileSync(fd, 'version: 1\n');
    closeSync(fd);
    execFileSync('truncate', ['-s', '1G', huge]);
    const before = process.memoryUsage().arrayBuffers;
    await assert.rejects(loadPolicyFile(huge), (err: unknown) => {
      assert.equal((err as { code?: string }).code, 'POLICY_INVALID');
      const issue = (err as { issues: { code: string; message: string }[] }).issues[0];
      assert.equal(issue?.code, 'POLICY_LIMIT_BYTES');
      assert.match(issue?.message ?? '', /1073741824 bytes/);
      return true;
    });
    assert.ok(process.memoryUsage().arrayBuffers - before < 4 * MAX_POLICY_BYTES);
  });

  it('refuses invalid UTF-8 in a file (POLICY_UNREADABLE) and an unpaired surrogate in a pushed text', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-policy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const latin1 = join(dir, 'latin1.yaml');
    writeFileSync(latin1, Buffer.from('version: 1\n# caf\xe9\n', 'latin1'));
    await assert.rejects(loadPolicyFile(latin1), { code: 'POLICY_UNREADABLE' });
    for (const text of ['version: 1\n# \ud800\n', 'version: 1\nx: "\udc00"\n']) {
      const issues = issuesOf(text);
      assert.deepEqual(issues.map((i) => [i.code, i.line]), [['POLICY_YAML_SYNTAX', 2]]);
    }
  });
});
