// decide() on json-rpc and mcp endpoints against the reference's policy cases (J9-J11, J16-J18, MC-1..MC-4 M1-M14)
// plus the union of endpoints taking a path, audit, and the method profile with tool rules.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readMcpBody } from '../../src/jsonrpc/mcp-message.js';
import { parseJsonRpcBody } from '../../src/jsonrpc/message.js';
import { decide } from '../../src/policy/decide.js';
import type { JsonRpcRequest } from '../../src/policy/jsonrpc-match.js';
import { parsePolicy } from '../../src/policy/parse.js';
import type { Decision } from '../../src/policy/types.js';

const POLICY = parsePolicy(`version: 1
network_policies:
  jr:
    endpoints:
      - host: rpc.test
        port: 443
        path: /rpc
        protocol: json-rpc
        enforcement: enforce
        rules:
          - allow: { method: initialize }
          - allow: { method: reports.list }
          - allow: { method: reports.search }
        deny_rules:
          - method: reports.delete
      - { host: any.test, port: 443, protocol: json-rpc, enforcement: enforce, rules: [{ allow: { method: "*" } }] }
      - { host: audit.test, port: 443, protocol: json-rpc, rules: [{ allow: { method: initialize } }] }
  mc:
    endpoints:
      - host: mcp.test
        port: 443
        path: /mcp
        protocol: mcp
        enforcement: enforce
        rules:
          - allow: { method: initialize }
          - allow: { method: tools/list }
          - allow: { method: tools/call, tool: { any: [read_status, "submit_*"] } }
        deny_rules:
          - { method: tools/call, tool: blocked_action }
      - { host: profile.test, port: 443, protocol: mcp, enforcement: enforce, mcp: { allow_all_known_mcp_methods: true } }
      - host: scoped.test
        port: 443
        protocol: mcp
        enforcement: enforce
        mcp: { allow_all_known_mcp_methods: true }
        rules: [{ allow: { tool: read_status } }]
      - host: vendor.test
        port: 443
        protocol: mcp
        enforcement: enforce
        mcp: { allow_all_known_mcp_methods: true }
        rules: [{ allow: { method: vendor/thing } }, { allow: { method: "tools/*" } }, { allow: {} }]
        deny_rules: [{ method: "tools/b*" }]
      - { host: stream.test, port: 443, path: /mcp, protocol: mcp, enforcement: enforce, rules: [{ allow: { method: initialize } }] }
      - { host: "*.tools.test", port: 443, path: /mcp, protocol: mcp, enforcement: enforce, rules: [{ allow: { method: tools/call, tool: read_status } }] }
  union:
    endpoints:
      - { host: union.test, port: 443, path: /mcp, protocol: mcp, enforcement: enforce, rules: [{ allow: { method: initialize } }] }
      - { host: union.test, port: 443, protocol: rest, enforcement: enforce, rules: [{ allow: { method: POST, path: /mcp } }] }
      - { host: union2.test, port: 443, path: /mcp, protocol: mcp, enforcement: enforce, rules: [{ allow: { method: initialize } }] }
      - { host: union2.test, port: 443, protocol: rest, enforcement: enforce, access: read-only, deny_rules: [{ method: "*", path: "/**" }] }
    binaries: [{ path: "/**" }]
`);

const msg = (method: string, params?: unknown, id: number | undefined = 1) => ({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method, ...(params === undefined ? {} : { params }) });
const note = (method: string) => ({ jsonrpc: '2.0', method });
const tool = (name: string) => msg('tools/call', { name, arguments: {} });

function ask(host: string, body: unknown, opts: { method?: string; path?: string; mcp?: boolean } = {}): Decision {
  const mcp = opts.mcp ?? !(host.startsWith('rpc') || host.startsWith('any') || host.startsWith('audit'));
  const read = typeof body === 'object' && body !== null && 'kind' in body
    ? (body as JsonRpcRequest)
    : mcp
      ? mcpRead(Buffer.from(JSON.stringify(body)))
      : parseJsonRpcBody(Buffer.from(JSON.stringify(body)));
  assert.ok(!('refused' in read), 'JSON.stringify never repeats a key');
  const jsonRpc: JsonRpcRequest = read;
  return decide(POLICY, { adapter: 'l7', host, port: 443, method: opts.method ?? 'POST', path: opts.path ?? (mcp ? '/mcp' : '/rpc'), jsonRpc });
}

/** An MCP body as the 2025-03-26 revision reads it (batches allowed); unreadable bodies as the error policy sees. */
function mcpRead(body: Buffer): JsonRpcRequest {
  const read = readMcpBody(body, { revision: '2025-03-26', strictToolNames: true });
  return read.ok ? read.request : { kind: 'error', problem: 'invalid-request', error: read.problem, ids: [], batch: false };
}

const verdict = (d: Decision): [string, string] => [d.verdict, d.reason];

describe('decide: json-rpc endpoints (JR cases)', () => {
  it('J1/J2: allows listed methods; params are not looked at', () => {
    assert.deepEqual(verdict(ask('rpc.test', msg('initialize'))), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('rpc.test', msg('reports.list', { anything: [1, 2] }))), ['allow', 'rule-allowed']);
  });

  it('J3/J5/J17: a deny rule denies; in a batch the first denied call denies the whole and is the one named', () => {
    assert.deepEqual(verdict(ask('rpc.test', msg('reports.delete'))), ['deny', 'deny-rule-matched']);
    const d = ask('rpc.test', [msg('reports.list', undefined, 1), msg('reports.search', undefined, 2), msg('reports.delete', undefined, 3)]);
    assert.deepEqual(verdict(d), ['deny', 'deny-rule-matched']);
    assert.deepEqual(d.calls?.map((c) => c.method), ['reports.delete']);
    const ok = ask('rpc.test', [msg('reports.list', undefined, 1), msg('reports.search', undefined, 2)]);
    assert.deepEqual(ok.calls?.map((c) => c.method), ['reports.list', 'reports.search']);
  });

  it('J9: an allowed method with PUT or GET is denied', () => {
    assert.deepEqual(verdict(ask('rpc.test', msg('initialize'), { method: 'PUT' })), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('rpc.test', msg('initialize'), { method: 'GET' })), ['deny', 'no-rule-matched']);
  });

  it('J10/J11: methods are exact (reports.* is no glob), and * allows any method', () => {
    assert.deepEqual(verdict(ask('rpc.test', msg('reports.archive'))), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('any.test', msg('initialize'), { path: '/' })), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('any.test', msg('reports.archive'), { path: '/' })), ['allow', 'rule-allowed']);
  });

  it('J8/J16: a client response frame is a hard deny on json-rpc, even under audit and beside allowed calls', () => {
    assert.deepEqual(verdict(ask('audit.test', { jsonrpc: '2.0', id: 1, result: {} }, { path: '/' })), ['deny', 'jsonrpc-rejected']);
    const d = ask('rpc.test', [msg('reports.list'), { jsonrpc: '2.0', id: 2, result: { ok: true } }]);
    assert.deepEqual(verdict(d), ['deny', 'jsonrpc-rejected']);
    assert.match(d.detail, /response frames/);
  });

  it('J6/J7: an unreadable body is denied under audit; a rule miss is audited', () => {
    assert.deepEqual(verdict(ask('audit.test', { kind: 'error', problem: 'parse-error', error: 'invalid JSON', ids: [], batch: false }, { path: '/' })), ['deny', 'jsonrpc-rejected']);
    assert.deepEqual(verdict(ask('audit.test', msg('unknown/method'), { path: '/' })), ['audit', 'no-rule-matched']);
  });

  it('J18: the receive-stream GET is denied on json-rpc', () => {
    assert.deepEqual(verdict(ask('rpc.test', { kind: 'receive-stream' }, { method: 'GET' })), ['deny', 'no-rule-matched']);
  });

  it('fails closed when the proxy did not parse the body', () => {
    assert.deepEqual(verdict(decide(POLICY, { adapter: 'l7', host: 'rpc.test', port: 443, method: 'POST', path: '/rpc' })), ['deny', 'jsonrpc-rejected']);
  });
});

describe('decide: mcp endpoints (MC cases)', () => {
  it('a glob host takes MCP rules as OpenShell loads it: tools decided on every name it matches, none on others', () => {
    assert.deepEqual(verdict(ask('a.tools.test', tool('read_status'))), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('b.tools.test', tool('submit_report'))), ['deny', 'no-rule-matched']);
    assert.equal(ask('tools.test', tool('read_status')).verdict, 'deny', 'the glob needs a label before the suffix');
  });

  it('M1/M4/M5/M6/M7: tools by name; the deny rule wins; an unlisted method is denied', () => {
    assert.deepEqual(verdict(ask('mcp.test', tool('read_status'))), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('mcp.test', tool('submit_report'))), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('mcp.test', tool('blocked_action'))), ['deny', 'deny-rule-matched']);
    assert.deepEqual(verdict(ask('mcp.test', tool('other_tool'))), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('mcp.test', note('notifications/initialized'))), ['deny', 'no-rule-matched']);
    const d = ask('mcp.test', tool('blocked_action'));
    assert.deepEqual(d.calls, [{ method: 'tools/call', tool: 'blocked_action', id: 1, extension: false }]);
    assert.match(d.detail, /^MCP request blocked by a deny rule \(tools\/call blocked_action\) of policy mc$/);
  });

  it('fixed reasons name no client data: an unlisted tool, a core method, an extension method', () => {
    assert.equal(ask('mcp.test', tool('other_tool')).detail, 'MCP tool call has no matching allow rule in policy mc');
    assert.equal(ask('mcp.test', msg('prompts/list')).detail, 'MCP core method is not permitted by policy mc');
    assert.equal(ask('mcp.test', msg('vendor/thing')).detail, 'MCP extension method has no matching exact allow rule in policy mc');
  });

  it('M8: a tool rule never matches a call without a tool (an extension method with params.name)', () => {
    assert.deepEqual(verdict(ask('mcp.test', msg('vendor/extension', { name: 'read_status' }))), ['deny', 'no-rule-matched']);
  });

  it('M9/M10: the method profile allows the core methods of the revision, never an extension method', () => {
    for (const m of [tool('any_tool'), msg('tools/list'), note('notifications/initialized')]) {
      assert.deepEqual(verdict(ask('profile.test', m, { path: '/' })), ['allow', 'rule-allowed']);
    }
    assert.deepEqual(verdict(ask('profile.test', msg('vendor/thing'), { path: '/' })), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('vendor.test', msg('vendor/thing'), { path: '/' })), ['allow', 'rule-allowed']);
  });

  it('an extension method needs an allow rule naming it exactly: tools/* and REST rules never allow one; deny globs still match', () => {
    assert.deepEqual(verdict(ask('vendor.test', msg('tools/experimental'), { path: '/' })), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('vendor.test', msg('tools/list'), { path: '/' })), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('vendor.test', msg('tools/blocked'), { path: '/' })), ['deny', 'deny-rule-matched']);
    // A glob rule, or the `*` an empty rule becomes under the profile, is not exact even for a method spelled like it.
    assert.deepEqual(verdict(ask('vendor.test', msg('tools/*'), { path: '/' })), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('vendor.test', msg('*'), { path: '/' })), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('union.test', msg('vendor/thing'))), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('union.test', msg('tools/list'))), ['allow', 'rule-allowed']);
  });

  it('the method profile with a tool rule: tools/call must match a tool rule, other methods pass', () => {
    assert.deepEqual(verdict(ask('scoped.test', tool('read_status'), { path: '/' })), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('scoped.test', tool('other'), { path: '/' })), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('scoped.test', msg('tools/list'), { path: '/' })), ['allow', 'rule-allowed']);
  });

  it('M11/M12: the receive stream and the session end are allowed where the mcp endpoint takes the path, whatever the rules', () => {
    assert.deepEqual(verdict(ask('stream.test', { kind: 'receive-stream' }, { method: 'GET' })), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('stream.test', { kind: 'session-end' }, { method: 'DELETE' })), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(decide(POLICY, { adapter: 'l7', host: 'stream.test', port: 443, method: 'GET', path: '/other', jsonRpc: { kind: 'receive-stream' } })), ['deny', 'no-rule-matched']);
  });

  it('M13/M14: a POSTed response frame is allowed on the mcp path (answers to server requests)', () => {
    assert.deepEqual(verdict(ask('stream.test', { jsonrpc: '2.0', id: 7, result: { action: 'accept', content: {} } })), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('stream.test', { jsonrpc: '2.0', id: 7, result: {} }, { method: 'PUT' })), ['deny', 'no-rule-matched']);
  });
});

describe('decide: every endpoint taking the path decides together', () => {
  it('a REST rule of an endpoint taking the path allows by method and path; its deny rule denies', () => {
    assert.deepEqual(verdict(ask('union.test', tool('anything'))), ['allow', 'rule-allowed']);
    assert.deepEqual(verdict(ask('union.test', tool('anything'), { method: 'PUT' })), ['deny', 'no-rule-matched']);
    assert.deepEqual(verdict(ask('union2.test', tool('read_status'))), ['deny', 'deny-rule-matched']);
  });
});
