// parsePolicy on mcp and json-rpc endpoints (docs/policy.md#json-rpc-and-mcp-inspection): the reference's load-time
// cases M21-M30, J19, J20, each a coded error at the field's YAML path; the rule normalisation; the options.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorCode } from '../../src/shared/errors.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { E0, endpoint, expectIssue, issuesOf } from '../harness/policy-parse-fixtures.js';

const mcp = (body: string, options = ''): string =>
  endpoint(`host: tools.example.com\nport: 443\nprotocol: mcp\nenforcement: enforce${options === '' ? '' : `\nmcp: ${options}`}\n${body}`);
const jsonRpc = (body: string): string => endpoint(`host: rpc.example.com\nport: 443\nprotocol: json-rpc\nenforcement: enforce\n${body}`);
const PROFILE = '{ allow_all_known_mcp_methods: true }';

describe('parsePolicy: mcp and json-rpc load-time checks', () => {
  const cases: [string, string, ErrorCode, string, RegExp][] = [
    ['M21 a tool rule without method, no profile', mcp('rules: [{ allow: { tool: read_status } }]'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.method`, /required when mcp.allow_all_known_mcp_methods is false/],
    ['M21 the deny side too', mcp('rules: [{ allow: { method: initialize } }]\ndeny_rules: [{ tool: x }]'), 'POLICY_MCP_INVALID', `${E0}.deny_rules[0].method`, /required/],
    ['M23 vendor/* is not a method glob', mcp('rules: [{ allow: { method: "vendor/*" } }]'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.method`, /only valid for the tools\/ method family/],
    ['M23 * is not a method', mcp('rules: [{ allow: { method: "*" } }]'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.method`, /not a method/],
    ['M24 wildcard tool with strict_tool_names false', mcp('rules: [{ allow: { method: tools/call, tool: "read_*" } }]', '{ strict_tool_names: false }'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.tool`, /strict_tool_names to remain enabled/],
    ['M24 params.name any with a glob, strict false', mcp('rules: [{ allow: { method: tools/call, params: { name: { any: [safe_tool, "list_*"] } } } }]', '{ strict_tool_names: false }'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.params.name`, /strict_tool_names/],
    ['M25 mcp without host', endpoint('{ port: 443, protocol: mcp, mcp: { allow_all_known_mcp_methods: true } }'), 'POLICY_HOST_REQUIRED', `${E0}.host`, /host/],
    ['M25 mcp without port', endpoint('{ host: tools.example.com, protocol: mcp, mcp: { allow_all_known_mcp_methods: true } }'), 'POLICY_PORT_REQUIRED', `${E0}.port`, /port/],
    ['M26 a deny on every tools/call beside tool allow rules', mcp('rules: [{ allow: { method: tools/call, tool: read_status } }]\ndeny_rules: [{ method: tools/call }]'), 'POLICY_MCP_INVALID', `${E0}.deny_rules`, /denies every tool call/],
    ['M27 tools/* beside a tool rule', mcp('rules:\n  - allow: { method: "tools/*" }\n  - allow: { method: tools/call, tool: read_status }'), 'POLICY_MCP_INVALID', `${E0}.rules`, /allows every tool call/],
    ['M28 an empty method under the profile beside a tool rule', mcp('rules:\n  - allow: { method: "" }\n  - allow: { tool: read_status }', PROFILE), 'POLICY_MCP_INVALID', `${E0}.rules`, /allows every tool call/],
    ['M29 argument matching', mcp('rules: [{ allow: { method: tools/call, params: { arguments: { scope: x } } } }]'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.params.arguments`, /argument matching is not supported/],
    ['M30 strict_tool_names must be a boolean', mcp('rules: [{ allow: { method: initialize } }]', '{ strict_tool_names: "false" }'), 'POLICY_TYPE', `${E0}.mcp.strict_tool_names`, /true or false/],
    ['tool and params.name together', mcp('rules: [{ allow: { method: tools/call, tool: a, params: { name: b } } }]'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.params.name`, /either tool or params.name/],
    ['a tool with a method other than tools/call, under the profile', mcp('rules: [{ allow: { method: tools/list, tool: a } }]', PROFILE), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.method`, /must be tools\/call/],
    ['path in an mcp rule', mcp('rules: [{ allow: { method: initialize, path: /mcp } }]'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.path`, /not path/],
    ['{a,b} alternation in a tool glob', mcp('rules: [{ allow: { method: tools/call, tool: "{read,write}_*" } }]'), 'POLICY_MCP_INVALID', `${E0}.rules[0].allow.tool`, /alternation/],
    ['mcp needs rules without the profile', mcp(''), 'POLICY_MCP_INVALID', `${E0}.rules`, /needs rules/],
    ['access on mcp', mcp('access: full'), 'POLICY_ACCESS_INVALID', `${E0}.access`, /not allowed for mcp/],
    ['both body limits', mcp('rules: [{ allow: { method: initialize } }]\njson_rpc: { max_body_bytes: 10 }', '{ max_body_bytes: 10 }'), 'POLICY_JSON_RPC_INVALID', `${E0}.json_rpc.max_body_bytes`, /set one/],
    ['a negative body limit', mcp('rules: [{ allow: { method: initialize } }]', '{ max_body_bytes: -1 }'), 'POLICY_MCP_INVALID', `${E0}.mcp.max_body_bytes`, /0-67108864/],
    ['a body limit past 64 MiB', mcp('rules: [{ allow: { method: initialize } }]', '{ max_body_bytes: 67108865 }'), 'POLICY_MCP_INVALID', `${E0}.mcp.max_body_bytes`, /0-67108864/],
    ['filter_tools_list on json-rpc', jsonRpc('rules: [{ allow: { method: "*" } }]\nmcp: { filter_tools_list: true }'), 'POLICY_MCP_INVALID', `${E0}.mcp`, /non-MCP endpoint/],
    ['mcp.max_body_bytes on json-rpc (an mcp stanza on any other protocol)', jsonRpc('rules: [{ allow: { method: "*" } }]\nmcp: { max_body_bytes: 1024 }'), 'POLICY_MCP_INVALID', `${E0}.mcp`, /non-MCP endpoint/],
    ['mcp options on rest', endpoint('{ host: a.example.com, port: 443, protocol: rest, access: full, mcp: { max_body_bytes: 10 } }'), 'POLICY_MCP_INVALID', `${E0}.mcp`, /non-MCP endpoint/],
    ['mcp options on an L4 endpoint', endpoint('{ host: a.example.com, port: 443, mcp: { filter_tools_list: true } }'), 'POLICY_MCP_INVALID', `${E0}.mcp`, /non-MCP endpoint/],
    ['J19 params on a json-rpc rule', jsonRpc('rules: [{ allow: { method: reports.search, params: { query: quarterly } } }]'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules[0].allow.params`, /do not support params/],
    ['J20 json_rpc.on_parse_error', jsonRpc('rules: [{ allow: { method: "*" } }]\njson_rpc: { on_parse_error: allow }'), 'POLICY_UNKNOWN_KEY', `${E0}.json_rpc.on_parse_error`, /on_parse_error/],
    ['a tool on a json-rpc rule', jsonRpc('rules: [{ allow: { method: tools/call, tool: x } }]'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules[0].allow.tool`, /only valid for protocol mcp/],
    ['a json-rpc method glob', jsonRpc('rules: [{ allow: { method: "reports.*" } }]'), 'POLICY_JSON_RPC_INVALID', `${E0}.rules[0].allow.method`, /do not support glob/],
    ['json-rpc without rules', jsonRpc(''), 'POLICY_JSON_RPC_INVALID', `${E0}.rules`, /need rules/],
  ];
  for (const [name, text, code, path, message] of cases) {
    it(name, () => {
      assert.match(expectIssue(text, code, path).message, message);
    });
  }

  it('M25: {protocol: mcp} with neither host nor port is two errors at least', () => {
    assert.ok(issuesOf(endpoint('{ protocol: mcp, mcp: { allow_all_known_mcp_methods: true } }')).length >= 2);
  });

  it('M22/M23: loads a tool rule under the profile as tools/call, vendor/extension and tools/*', () => {
    const policy = parsePolicy(mcp('rules:\n  - allow: { tool: { any: [read_status, "submit_*"] } }\n  - allow: { method: vendor/extension }', PROFILE));
    assert.deepEqual(policy.endpoints[0]?.rules.map((r) => r.text), ['tools/call read_status|submit_*', 'vendor/extension']);
    assert.equal(policy.endpoints[0]?.rules[0]?.scopesTools, true);
    const globbed = parsePolicy(mcp('rules: [{ allow: { method: "tools/*" } }]'));
    assert.deepEqual(globbed.endpoints[0]?.rules.map((r) => r.text), ['tools/*']);
  });

  it('loads deny_rules alone under the profile, and the conformance policy `rules: [{ allow: {} }]`', () => {
    assert.equal(parsePolicy(mcp('deny_rules: [{ method: tools/call, tool: x }]', PROFILE)).endpoints[0]?.denyRules.length, 1);
    assert.deepEqual(parsePolicy(mcp('rules: [{ allow: {} }]', PROFILE)).endpoints[0]?.rules.map((r) => r.text), ['*']);
  });

  it('sets the one JSON-RPC body limit from either stanza on mcp, json_rpc on json-rpc (default 65536), and reads filter_tools_list', () => {
    const limit = (text: string) => parsePolicy(text).endpoints[0]?.options.jsonRpcMaxBodyBytes;
    assert.equal(limit(mcp('rules: [{ allow: { method: initialize } }]')), 65536);
    assert.equal(limit(mcp('rules: [{ allow: { method: initialize } }]', '{ max_body_bytes: 131072 }')), 131072);
    assert.equal(limit(mcp('rules: [{ allow: { method: initialize } }]\njson_rpc: { max_body_bytes: 2048 }')), 2048);
    assert.equal(limit(jsonRpc('rules: [{ allow: { method: "*" } }]\njson_rpc: { max_body_bytes: 4096 }')), 4096);
    // 0 is the default, as in OpenShell (which sends no limit for 0).
    assert.equal(limit(mcp('rules: [{ allow: { method: initialize } }]', '{ max_body_bytes: 0 }')), 65536);
    assert.equal(limit(jsonRpc('rules: [{ allow: { method: "*" } }]\njson_rpc: { max_body_bytes: 0 }')), 65536);
    assert.equal(parsePolicy(mcp('rules: [{ allow: { method: initialize } }]', '{ filter_tools_list: true }')).endpoints[0]?.options.mcpFilterToolsList, true);
  });

  it('accepts request_body_credential_rewrite on mcp and json-rpc endpoints', () => {
    assert.equal(parsePolicy(mcp('rules: [{ allow: { method: initialize } }]\nrequest_body_credential_rewrite: true')).endpoints[0]?.requestBodyCredentialRewrite, true);
    assert.equal(parsePolicy(jsonRpc('rules: [{ allow: { method: "*" } }]\nrequest_body_credential_rewrite: true')).endpoints[0]?.requestBodyCredentialRewrite, true);
  });
});
