// parsePolicy on `mcp.versions` (docs/policy.md#mcp-protocol-revisions): the four revisions written exactly, the
// pinned default, a sorted list in the policy hash, each wrong form a coded error at its YAML path, and MCP
// endpoints that take the same request agreeing on the list.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parsePolicy } from '../../src/policy/parse.js';
import type { ErrorCode } from '../../src/shared/errors.js';
import { E0, endpoint, expectIssue } from '../harness/policy-parse-fixtures.js';

const mcp = (versions: string): string =>
  endpoint(`host: tools.example.com\nport: 443\npath: /mcp\nprotocol: mcp\nenforcement: enforce\nmcp: { allow_all_known_mcp_methods: true${versions === '' ? '' : `, versions: ${versions}`} }`);
const versionsOf = (text: string) => parsePolicy(text).endpoints[0]?.options.mcpVersions;

describe('parsePolicy: mcp.versions', () => {
  it('defaults to the pinned 2025-11-25, with or without an mcp stanza', () => {
    assert.deepEqual(versionsOf(mcp('')), ['2025-11-25']);
    assert.deepEqual(versionsOf(endpoint('host: t.example.com\nport: 443\nprotocol: mcp\nenforcement: enforce\nrules: [{ allow: { method: initialize } }]')), ['2025-11-25']);
  });

  it('stores the listed revisions sorted oldest first: two spellings of one list have one policy hash', () => {
    assert.deepEqual(versionsOf(mcp('["2026-07-28", 2025-03-26, "2025-06-18", "2025-11-25"]')), ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28']);
    const a = parsePolicy(mcp('["2025-11-25", "2025-06-18"]'));
    const b = parsePolicy(mcp('["2025-06-18", "2025-11-25"]'));
    assert.equal(a.hash, b.hash);
    assert.notEqual(a.hash, parsePolicy(mcp('["2025-11-25"]')).hash, 'the list enters the hash');
    assert.equal(parsePolicy(mcp('["2025-11-25"]')).hash, parsePolicy(mcp('')).hash, 'the default is stored as its explicit list');
  });

  const cases: [string, string, ErrorCode, string, RegExp][] = [
    ['M1 an empty list', mcp('[]'), 'POLICY_MCP_INVALID', `${E0}.mcp.versions`, /empty mcp.versions list; omit it/],
    ['M2 a repeated revision', mcp('["2026-07-28", "2026-07-28"]'), 'POLICY_MCP_INVALID', `${E0}.mcp.versions[1]`, /duplicate protocol version '2026-07-28'/],
    ['M2 a padded revision', mcp('[" 2025-11-25"]'), 'POLICY_MCP_INVALID', `${E0}.mcp.versions[0]`, /unsupported MCP protocol version/],
    ['an unknown revision', mcp('["2024-11-05"]'), 'POLICY_MCP_INVALID', `${E0}.mcp.versions[0]`, /unsupported MCP protocol version "2024-11-05"/],
    ['latest is not a revision', mcp('[latest]'), 'POLICY_MCP_INVALID', `${E0}.mcp.versions[0]`, /unsupported/],
    ['another case', mcp('["2025-11-25T00:00:00Z"]'), 'POLICY_MCP_INVALID', `${E0}.mcp.versions[0]`, /unsupported/],
    ['null', mcp('null'), 'POLICY_TYPE', `${E0}.mcp.versions`, /must be a list/],
    ['a null item', mcp('[null]'), 'POLICY_TYPE', `${E0}.mcp.versions[0]`, /must be a string/],
    ['a number', mcp('[20251125]'), 'POLICY_TYPE', `${E0}.mcp.versions[0]`, /must be a string/],
    ['a string, not a list', mcp('"2025-11-25"'), 'POLICY_TYPE', `${E0}.mcp.versions`, /must be a list/],
    ['on a json-rpc endpoint', endpoint('host: rpc.example.com\nport: 443\nprotocol: json-rpc\nenforcement: enforce\nrules: [{ allow: { method: "*" } }]\nmcp: { versions: ["2025-11-25"] }'),
      'POLICY_MCP_INVALID', `${E0}.mcp`, /non-MCP endpoint cannot configure mcp options/],
  ];
  for (const [name, text, code, path, message] of cases) {
    it(name, () => assert.match(expectIssue(text, code, path).message, message));
  }

  it('MCP endpoints taking the same request must agree on the list (ambiguity)', () => {
    const two = (path: string): string =>
      [
        'version: 1',
        'network_policies:',
        '  p:',
        '    endpoints:',
        '      - { host: tools.example.com, port: 443, path: /mcp, protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true } }',
        `      - { host: tools.example.com, port: 443, path: ${path}, protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true, versions: ["2025-06-18"] } }`,
        '    binaries: [{ path: "/**" }]',
      ].join('\n');
    const issue = expectIssue(two('/mcp'), 'POLICY_AMBIGUOUS', 'network_policies.p.endpoints[1]');
    assert.match(issue.message, /disagree on mcp.versions/);
    // Different selectors do not take the same request.
    parsePolicy(two('/other'));
  });
});
