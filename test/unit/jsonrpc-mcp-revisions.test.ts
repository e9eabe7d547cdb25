// The MCP revision tables, the request headers that select a revision or mirror the body, and bodies read per
// revision (src/jsonrpc/mcp-revisions.ts, mcp-headers.ts, mcp-message.ts; docs/policy.md#mcp-protocol-revisions).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readMirroredHeaders, readProtocolVersionHeader } from '../../src/jsonrpc/mcp-headers.js';
import { type McpRead, readMcpBody } from '../../src/jsonrpc/mcp-message.js';
import { coreMcpMethods, MCP_REVISIONS, type McpRevision, mcpMethodClass } from '../../src/jsonrpc/mcp-revisions.js';

const read = (revision: McpRevision, body: unknown, strictToolNames = true): McpRead =>
  readMcpBody(Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), { revision, strictToolNames });
const problem = (revision: McpRevision, body: unknown): string => {
  const got = read(revision, body);
  assert.ok(!got.ok, `${revision} accepted ${JSON.stringify(body)}`);
  return got.problem;
};
const req = (method: string, params?: unknown, id: number | string = 1) => ({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
const note = (method: string, params?: unknown) => ({ jsonrpc: '2.0', method, ...(params === undefined ? {} : { params }) });
const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const INIT = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } };

describe('MCP revision tables', () => {
  it('lists the four revisions oldest first', () => assert.deepEqual(MCP_REVISIONS, ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28']));

  it('classifies each method per revision: core, known but unavailable, or an extension', () => {
    const rows: [string, Record<McpRevision, string>][] = [
      ['tools/call', { '2025-03-26': 'core', '2025-06-18': 'core', '2025-11-25': 'core', '2026-07-28': 'core' }],
      ['initialize', { '2025-03-26': 'core', '2025-06-18': 'core', '2025-11-25': 'core', '2026-07-28': 'unavailable' }],
      ['notifications/cancelled', { '2025-03-26': 'core', '2025-06-18': 'core', '2025-11-25': 'core', '2026-07-28': 'unavailable' }],
      ['tasks/get', { '2025-03-26': 'unavailable', '2025-06-18': 'unavailable', '2025-11-25': 'core', '2026-07-28': 'unavailable' }],
      ['server/discover', { '2025-03-26': 'unavailable', '2025-06-18': 'unavailable', '2025-11-25': 'unavailable', '2026-07-28': 'core' }],
      ['vendor/thing', { '2025-03-26': 'extension', '2025-06-18': 'extension', '2025-11-25': 'extension', '2026-07-28': 'extension' }],
    ];
    for (const [method, classes] of rows) {
      for (const revision of MCP_REVISIONS) assert.equal(mcpMethodClass(revision, method), classes[revision], `${method} under ${revision}`);
    }
    assert.equal(coreMcpMethods('2026-07-28').length, 10);
  });
});

describe('MCP-Protocol-Version, Mcp-Method and Mcp-Name', () => {
  it('selects a revision from one exact header value, trimmed of SP and HTAB only', () => {
    assert.deepEqual(readProtocolVersionHeader([]), { kind: 'absent' });
    assert.deepEqual(readProtocolVersionHeader(['MCP-Protocol-Version', ' 2025-06-18\t']), { kind: 'revision', revision: '2025-06-18' });
    assert.deepEqual(readProtocolVersionHeader(['mcp-protocol-version', '2099-01-01']), { kind: 'unsupported', value: '2099-01-01' });
    assert.deepEqual(readProtocolVersionHeader(['mcp-protocol-version', '2025-11-25, 2025-03-26']).kind, 'unsupported');
    assert.deepEqual(readProtocolVersionHeader(['mcp-protocol-version', '2025-11-25 ']).kind, 'revision');
    assert.equal(readProtocolVersionHeader(['MCP-PROTOCOL-VERSION', 'LATEST']).kind, 'unsupported');
  });

  it('refuses the header repeated, empty, or named in Connection', () => {
    for (const raw of [
      ['MCP-Protocol-Version', '2025-11-25', 'mcp-protocol-version', '2025-11-25'],
      ['MCP-Protocol-Version', ''],
      ['MCP-Protocol-Version', '2025-11-25', 'Connection', 'keep-alive, MCP-Protocol-Version'],
    ]) {
      assert.equal(readProtocolVersionHeader(raw).kind, 'invalid', raw.join(' '));
    }
  });

  it('reads Mcp-Method and Mcp-Name plain or =?base64?...?= (UTF-8), and refuses the broken forms', () => {
    assert.deepEqual(readMirroredHeaders(['Mcp-Method', 'tools/call', 'Mcp-Name', 'read_status']), { ok: true, method: 'tools/call', name: 'read_status' });
    assert.deepEqual(readMirroredHeaders(['mcp-method', 'prompts/get', 'mcp-name', '=?base64?5aSp5rCX?=']), { ok: true, method: 'prompts/get', name: '天気' });
    assert.deepEqual(readMirroredHeaders(['mcp-name', '=?BASE64?x?=']), { ok: true, method: undefined, name: '=?BASE64?x?=' });
    for (const raw of [
      ['Mcp-Method', 'a', 'Mcp-Method', 'a'],
      ['Mcp-Name', 'a', 'Connection', 'mcp-name'],
      ['Mcp-Name', '=?base64?5aSp5rCX?'],
      ['Mcp-Name', '=?base64?5aSp5r?='],
      ['Mcp-Name', '=?base64?/w==?='],
      ['Mcp-Method', 'tools/call\u0001'],
    ]) {
      assert.equal(readMirroredHeaders(raw).ok, false, raw.join(' '));
    }
  });
});

describe('MCP bodies per revision', () => {
  it('M8: a key repeated at any depth is an invalid request; sibling objects may share keys', () => {
    const dup = read('2025-11-25', '{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}');
    assert.ok(!dup.ok && dup.duplicateKey && /key "id"/.test(dup.problem));
    assert.ok(read('2025-11-25', req('vendor/x', { a: { x: 1 }, b: { x: 2 } })).ok);
  });

  it('M9/M10: batches only under 2025-03-26, at most 64 messages, responses counted', () => {
    const two = [req('tools/call', { name: 'a' }, 1), req('tools/call', { name: 'b' }, 2)];
    const ok = read('2025-03-26', two);
    assert.ok(ok.ok && ok.request.calls.length === 2 && ok.single === undefined);
    const full = [...Array.from({ length: 63 }, (_, i) => req('ping', undefined, i)), { jsonrpc: '2.0', id: 99, result: {} }];
    assert.ok(read('2025-03-26', full).ok);
    assert.match(problem('2025-03-26', [...full, req('ping', undefined, 100)]), /65 messages; at most 64/);
    for (const revision of ['2025-06-18', '2025-11-25', '2026-07-28'] as const) assert.match(problem(revision, two), /batches are not accepted/);
    assert.match(problem('2025-03-26', []), /empty batch/);
  });

  it('M11: a known method unavailable in the revision is refused, whatever the rules', () => {
    assert.match(problem('2025-06-18', req('tasks/get', { taskId: 't' })), /'tasks\/get' is not available in MCP 2025-06-18/);
    assert.match(problem('2025-11-25', req('server/discover')), /not available/);
    assert.ok(read('2025-11-25', req('tasks/get', { taskId: 't' })).ok);
  });

  it('refuses requests only servers send, and initialize batched or as a notification', () => {
    for (const method of ['sampling/createMessage', 'roots/list', 'elicitation/create']) assert.match(problem('2025-11-25', req(method, {})), /only servers send/);
    assert.match(problem('2025-03-26', [req('initialize', INIT)]), /initialize must be one request/);
    assert.match(problem('2025-11-25', note('initialize', INIT)), /initialize must be one request|sent as a notification/);
    assert.match(problem('2025-11-25', req('initialize', { capabilities: {} })), /params/);
  });

  it('refuses params._meta declaring another revision than the selected one', () => {
    assert.match(problem('2025-11-25', req('tools/list', { _meta: META })), /declares MCP 2026-07-28, not the selected 2025-11-25/);
    assert.ok(read('2025-11-25', req('tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' } })).ok);
  });

  it('marks extension methods and never checks their params; bootstrap is a lone initialize without a 2026 _meta', () => {
    const ext = read('2025-11-25', req('vendor/thing', 7));
    assert.ok(ext.ok && ext.request.calls[0]?.extension === true && !ext.bootstrap);
    const init = read('2025-11-25', req('initialize', INIT));
    assert.ok(init.ok && init.bootstrap && init.request.calls[0]?.extension === false);
    assert.equal(read('2025-03-26', req('initialize', { ...INIT, _meta: META })).bootstrap, false);
  });

  it('2026-07-28: one request with _meta (revision and client capabilities, MCP key syntax); no responses', () => {
    const ok = read('2026-07-28', req('tools/call', { name: 'read_status', _meta: META }));
    assert.ok(ok.ok);
    assert.deepEqual(ok.single, { method: 'tools/call', request: true, name: 'read_status', named: true });
    assert.match(problem('2026-07-28', req('tools/list')), /needs params._meta/);
    assert.match(problem('2026-07-28', req('tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } })), /clientCapabilities/);
    assert.match(problem('2026-07-28', req('tools/list', { _meta: { ...META, 'bad key': 1 } })), /key syntax/);
    assert.match(problem('2026-07-28', req('vendor/thing', {})), /needs params._meta/);
    assert.ok(read('2026-07-28', note('vendor/notice')).ok, 'an extension notification needs no _meta');
    assert.match(problem('2026-07-28', { jsonrpc: '2.0', id: 1, result: {} }), /does not send JSON-RPC responses/);
    for (const method of ['initialize', 'ping']) assert.match(problem('2026-07-28', req(method, { _meta: META })), /not available/);
    for (const method of ['notifications/initialized', 'notifications/cancelled']) assert.match(problem('2026-07-28', note(method)), /not available/);
    assert.match(problem('2026-07-28', req('subscriptions/listen', { _meta: META })), /params.notifications must be an object/);
    assert.ok(read('2026-07-28', req('subscriptions/listen', { _meta: META, notifications: {} })).ok);
    const uri = read('2026-07-28', req('resources/read', { uri: 'file:///a', _meta: META }));
    assert.ok(uri.ok && uri.single?.name === 'file:///a');
  });

  it('strict tool names on tools/call', () => {
    assert.match(problem('2025-11-25', req('tools/call', { name: 'read status' })), /strict_tool_names/);
    assert.ok(read('2025-11-25', req('tools/call', { name: 'read status' }), false).ok);
  });
});
