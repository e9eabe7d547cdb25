// src/jsonrpc/message.ts and mcp-message.ts against the reference's parser cases (M15-M20, J12-J15 and the JSON-RPC
// framing rules), and the pieces of filter_tools_list: the tools/list filter and the SSE rewriter, fed byte by byte.
// The per-revision MCP rules have their own file (jsonrpc-mcp-revisions.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type McpOptions, readMcpBody } from '../../src/jsonrpc/mcp-message.js';
import { parseJsonRpcBody } from '../../src/jsonrpc/message.js';
import { createSseRewriter } from '../../src/jsonrpc/sse.js';
import { filterToolsListText } from '../../src/jsonrpc/tools-list.js';
import type { JsonRpcRequest } from '../../src/policy/jsonrpc-match.js';

type Mode = McpOptions | 'generic';
const MCP: Mode = { revision: '2025-03-26', strictToolNames: true };
const GENERIC: Mode = 'generic';
const bytes = (body: unknown): Buffer => Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
const parse = (body: unknown, mode: Mode = MCP): JsonRpcRequest => {
  if (mode !== 'generic') {
    const read = readMcpBody(bytes(body), mode);
    return read.ok ? read.request : { kind: 'error', problem: 'invalid-request', error: read.problem, ids: [], batch: false };
  }
  const read = parseJsonRpcBody(bytes(body));
  assert.ok(!('refused' in read), 'refused' in read ? read.refused.problem : '');
  return read;
};
const call = (id: number | undefined, method: string, params?: unknown) => ({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method, ...(params === undefined ? {} : { params }) });
const INIT = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } };

describe('parseJsonRpcBody', () => {
  const ok: [string, unknown, Mode, JsonRpcRequest][] = [
    ['M15 tools/call exposes the tool only', call(1, 'tools/call', { name: 'search_web', arguments: { q: 'x' } }), MCP,
      { kind: 'messages', calls: [{ method: 'tools/call', tool: 'search_web', id: 1, extension: false }], responses: 0, batch: false }],
    ['M17 a spaced tool name with strict_tool_names false', call(1, 'tools/call', { name: 'read status' }), { revision: '2025-03-26', strictToolNames: false },
      { kind: 'messages', calls: [{ method: 'tools/call', tool: 'read status', id: 1, extension: false }], responses: 0, batch: false }],
    ['M19 an extension method keeps no params', call(1, 'vendor/extension', { name: 'custom' }), MCP,
      { kind: 'messages', calls: [{ method: 'vendor/extension', tool: undefined, id: 1, extension: true }], responses: 0, batch: false }],
    ['M20 a batch of two tools/call', [call(1, 'tools/call', { name: 'read_status' }), call(2, 'tools/call', { name: 'search_web' })], MCP,
      { kind: 'messages', calls: [{ method: 'tools/call', tool: 'read_status', id: 1, extension: false }, { method: 'tools/call', tool: 'search_web', id: 2, extension: false }], responses: 0, batch: true }],
    ['initialize with its typed params', call(0, 'initialize', INIT), MCP, { kind: 'messages', calls: [{ method: 'initialize', tool: undefined, id: 0, extension: false }], responses: 0, batch: false }],
    ['a tolerated list method with junk params', call(3, 'tools/list', { cursor: 5 }), MCP, { kind: 'messages', calls: [{ method: 'tools/list', tool: undefined, id: 3, extension: false }], responses: 0, batch: false }],
    ['a notification', call(undefined, 'notifications/initialized'), MCP, { kind: 'messages', calls: [{ method: 'notifications/initialized', tool: undefined, id: undefined, extension: false }], responses: 0, batch: false }],
    ['a response frame', { jsonrpc: '2.0', id: 7, result: { action: 'accept' } }, MCP, { kind: 'messages', calls: [], responses: 1, batch: false }],
    ['J16 a batch with a call and a response', [call(1, 'reports.list'), { jsonrpc: '2.0', id: 2, result: { ok: true } }], GENERIC,
      { kind: 'messages', calls: [{ method: 'reports.list', tool: undefined, id: 1 }], responses: 1, batch: true }],
    ['generic JSON-RPC ignores params and a null id', { jsonrpc: '2.0', id: null, method: 'x', params: 7 }, GENERIC,
      { kind: 'messages', calls: [{ method: 'x', tool: undefined, id: null }], responses: 0, batch: false }],
  ];
  for (const [name, body, mode, expected] of ok) {
    it(name, () => assert.deepEqual(parse(body, mode), expected));
  }

  const errors: [string, unknown, Mode, string, RegExp, readonly unknown[]][] = [
    ['J6 not JSON', 'not valid json {', GENERIC, 'parse-error', /invalid JSON/, []],
    ['an empty body', '', GENERIC, 'parse-error', /invalid JSON/, []],
    ['an empty batch', '[]', GENERIC, 'invalid-request', /empty batch/, []],
    ['null', 'null', GENERIC, 'invalid-request', /'jsonrpc' field/, []],
    ['J12 no jsonrpc member', { id: 1, method: 'reports.list' }, GENERIC, 'invalid-request', /missing or non-string 'jsonrpc' field/, [1]],
    ['J13 version 1.0', { jsonrpc: '1.0', id: 1, method: 'x' }, GENERIC, 'invalid-request', /unsupported JSON-RPC version '1.0'/, [1]],
    ['J14 one bad batch item spoils the batch', [call(1, 'a'), { id: 2, method: 'x' }], GENERIC, 'invalid-request', /batch item invalid: missing or non-string 'jsonrpc'/, [1, 2]],
    ['J15 method with result', { jsonrpc: '2.0', id: 1, method: 'initialize', result: {} }, GENERIC, 'invalid-request', /both method and result\/error/, [1]],
    ['a response with result and error', { jsonrpc: '2.0', id: 1, result: {}, error: {} }, GENERIC, 'invalid-request', /both result and error/, []],
    ['a response without id', { jsonrpc: '2.0', result: {} }, GENERIC, 'invalid-request', /missing id/, []],
    ['a non-string method', { jsonrpc: '2.0', id: 1, method: 5 }, GENERIC, 'invalid-request', /non-string 'method'/, []],
    ['M16 a spaced tool name under strict_tool_names', call(1, 'tools/call', { name: 'read status' }), MCP, 'invalid-request', /strict_tool_names/, []],
    ['M18 tools/call without a name', call(1, 'tools/call', { arguments: {} }), MCP, 'invalid-request', /invalid MCP request params: params.name/, []],
    ['tools/call without params', call(1, 'tools/call'), MCP, 'invalid-request', /params.name/, []],
    ['an MCP request with id null', { jsonrpc: '2.0', id: null, method: 'ping' }, MCP, 'invalid-request', /id must be a string or an integer/, []],
    ['an MCP request with a float id', { jsonrpc: '2.0', id: 1.5, method: 'ping' }, MCP, 'invalid-request', /id must be a string or an integer/, []],
    ['logging/setLevel with an unknown level', call(1, 'logging/setLevel', { level: 'LOUD' }), MCP, 'invalid-request', /params.level/, []],
    ['notifications/progress without a number', call(undefined, 'notifications/progress', { progressToken: 't', progress: 'x' }), MCP, 'invalid-request', /notification params: params.progress/, []],
  ];
  for (const [name, body, mode, problem, error, ids] of errors) {
    it(name, () => {
      const got = parse(body, mode);
      assert.equal(got.kind, 'error');
      if (got.kind !== 'error') return;
      assert.equal(got.problem, problem);
      assert.match(got.error, error);
      assert.deepEqual(got.ids, ids);
    });
  }

  it('never names an argument key or value in a params problem', () => {
    const got = parse(call(1, 'prompts/get', { name: 'p', arguments: { 'secret-key': 42 } }));
    assert.equal(got.kind, 'error');
    assert.ok(got.kind === 'error' && !got.error.includes('secret-key') && !got.error.includes('42'), JSON.stringify(got));
  });

  it('refuses a body in which an object repeats a key, whatever the key and depth (json-duplicate-key)', () => {
    for (const body of [
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_resource","name":"read_status"}}',
      '{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[{"y":1,"\\u0079":2}]}}}',
    ]) {
      const read = readMcpBody(Buffer.from(body), { revision: '2025-11-25', strictToolNames: true });
      assert.ok(!read.ok && read.duplicateKey, body);
      const generic = parseJsonRpcBody(Buffer.from(body));
      assert.ok('refused' in generic && generic.refused.reason === 'json-duplicate-key', body);
    }
  });

  it('parses a deeply nested argument without a stack overflow', () => {
    const deep = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}}}`;
    assert.equal(parse(deep).kind, 'messages');
  });
});

describe('filter_tools_list pieces', () => {
  const keep = (tool: string): boolean => tool.startsWith('read');
  const list = (id: number) => ({ jsonrpc: '2.0', id, result: { tools: [{ name: 'read_status' }, { name: 'delete_resource' }], nextCursor: 'c' } });

  it('filters the pending ids of a response or a batch, and leaves everything else byte for byte', () => {
    const one = filterToolsListText(JSON.stringify(list(1)), (id) => id === 1, keep);
    assert.deepEqual(JSON.parse(one.text).result, { tools: [{ name: 'read_status' }], nextCursor: 'c' });
    assert.deepEqual(one.answered, [1]);
    const other = JSON.stringify(list(2));
    assert.equal(filterToolsListText(other, (id) => id === 1, keep).text, other);
    const batch = filterToolsListText(JSON.stringify([list(2), list(1)]), (id) => id === 1, keep);
    assert.deepEqual(JSON.parse(batch.text).map((m: { result: { tools: unknown[] } }) => m.result.tools.length), [2, 1]);
    assert.equal(filterToolsListText('not json', (id) => id === 1, keep).text, 'not json');
  });

  it('says an answer that repeats a key is unreadable: which id it answers and which tools it lists depend on the parser', () => {
    const text = '{"jsonrpc":"2.0","id":1,"id":9,"result":{"tools":[{"name":"delete_resource","name":"read_status"}]}}';
    assert.match(filterToolsListText(text, (id) => id === 1, keep).unreadable ?? '', /key "id"/);
  });

  it('rewrites only the data of the answering SSE event, whatever the chunking and line endings', () => {
    const pending = new Set<number | string | null>([1]);
    const stream = `: comment\n\nevent: message\r\nid: e1\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\r\n\r\nid: e2\ndata: ${JSON.stringify(list(1))}\n\ndata: after\n\n`;
    const bytes = Buffer.from(stream);
    for (const size of [1, 7, bytes.length]) {
      pending.clear();
      pending.add(1);
      const rewriter = createSseRewriter({
        maxEventBytes: 1024,
        rewrite: (data) => {
          const out = filterToolsListText(data, (id) => pending.has(id), keep);
          for (const id of out.answered) pending.delete(id);
          return out.text === data ? undefined : out.text;
        },
        oversized: () => undefined,
        done: () => pending.size === 0,
      });
      const out: Buffer[] = [];
      for (let i = 0; i < bytes.length; i += size) out.push(rewriter.push(bytes.subarray(i, i + size)));
      out.push(rewriter.end());
      const text = Buffer.concat(out).toString('utf8');
      assert.ok(text.startsWith(': comment\n\nevent: message\r\nid: e1\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\r\n\r\n'), `chunk ${size}: ${text}`);
      assert.ok(text.includes(`id: e2\ndata: ${JSON.stringify({ ...list(1), result: { tools: [{ name: 'read_status' }], nextCursor: 'c' } })}\n\n`), `chunk ${size}: ${text}`);
      assert.ok(text.endsWith('data: after\n\n'));
    }
  });

  it('replaces an event held past its bound with what oversized() says, then streams the rest unchanged', () => {
    const rewriter = createSseRewriter({ maxEventBytes: 16, rewrite: () => 'never', oversized: () => '{"error":1}', done: () => false });
    const out = Buffer.concat([rewriter.push(Buffer.from(`data: ${'x'.repeat(40)}`)), rewriter.push(Buffer.from('\n\ndata: next\n\n')), rewriter.end()]).toString();
    assert.equal(out, 'data: {"error":1}\n\ndata: next\n\n');
  });
});
