// JSON-RPC and MCP inspection cost per request (docs/policy.md#json-rpc-and-mcp-inspection): parsing a held body
// (an MCP one under its protocol revision), the revision's header reads, deciding it, filtering a tools/list answer,
// and loading the MCP SDK's schemas once. No sockets; medians of ROUNDS rounds of ITERATIONS calls each, after a
// warm-up.
//   node --import tsx bench/jsonrpc-inspect.ts
//   ROUNDS=7 ITERATIONS=50000 node --import tsx bench/jsonrpc-inspect.ts

import { readJson } from '../src/json/strict-json.js';
import { readMirroredHeaders, readProtocolVersionHeader } from '../src/jsonrpc/mcp-headers.js';
import { readMcpBody } from '../src/jsonrpc/mcp-message.js';
import { parseJsonRpcBody } from '../src/jsonrpc/message.js';
import { filterToolsListText } from '../src/jsonrpc/tools-list.js';
import { decide } from '../src/policy/decide.js';
import type { JsonRpcRequest } from '../src/policy/jsonrpc-match.js';
import { parsePolicy } from '../src/policy/parse.js';

const ROUNDS = Number(process.env.ROUNDS ?? 7);
const ITERATIONS = Number(process.env.ITERATIONS ?? 20_000);

const policy = parsePolicy(`version: 1
network_policies:
  tools:
    endpoints:
      - host: mcp.example.com
        port: 443
        path: /mcp
        protocol: mcp
        enforcement: enforce
        rules:
          - allow: { method: initialize }
          - allow: { method: tools/list }
          - allow: { method: tools/call, tool: { any: [read_status, "search_*", "submit_*"] } }
        deny_rules:
          - { method: tools/call, tool: delete_resource }
      - { host: rpc.example.com, port: 443, protocol: json-rpc, enforcement: enforce, rules: [{ allow: { method: ledger_getBalance } }] }
    binaries: [{ path: "/**" }]
`);

const toolsCall = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'search_web', arguments: { query: 'boundary', limit: 10 } } }));
const initialize = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { elicitation: {} }, clientInfo: { name: 'agent', version: '1.0' } } }));
const generic = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ledger_getBalance', params: ['0xabc', 'latest'] }));
const batch = Buffer.from(JSON.stringify(Array.from({ length: 10 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'read_status', arguments: {} } }))));
const list = JSON.stringify({ jsonrpc: '2.0', id: 3, result: { tools: Array.from({ length: 50 }, (_, i) => ({ name: i % 2 === 0 ? `search_${i}` : `other_${i}`, description: 'a tool', inputSchema: { type: 'object' } })) } });

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const sessionless = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'search_web', arguments: { query: 'boundary', limit: 10 }, _meta: META } }));
/** The head a Streamable HTTP client sends with a call, as the adapter hands it over. */
const head = ['Host', 'mcp.example.com', 'Content-Type', 'application/json', 'Accept', 'application/json, text/event-stream', 'Content-Length', '120', 'Mcp-Session-Id', 'b5a8f3e2'];
const legacyHead = [...head, 'MCP-Protocol-Version', '2025-11-25'];
const sessionlessHead = [...head, 'MCP-Protocol-Version', '2026-07-28', 'Mcp-Method', 'tools/call', 'Mcp-Name', 'search_web'];

const MCP = { revision: '2025-11-25', strictToolNames: true } as const;
const MCP_BATCH = { revision: '2025-03-26', strictToolNames: true } as const;
const mcpCalls = (body: Buffer, options: Parameters<typeof readMcpBody>[1]): JsonRpcRequest => {
  const read = readMcpBody(body, options);
  if (!read.ok) throw new Error(read.problem);
  return read.request;
};

// The duplicate-key check (docs/policy.md#duplicate-json-keys) against plain JSON.parse, on the MCP call above, a
// 64 KiB and a 4 MiB tools/call whose arguments are many small objects, and a 4 MiB one that is mostly one string.
const file = (i: number) => ({ id: i, path: `src/file-${i}.ts`, text: `line "${i}" \\ é ${'x'.repeat(40)}`, tags: ['a', 'b'], score: i / 7, ok: i % 2 === 0 });
const withArguments = (args: unknown): string => JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'write_files', arguments: args } });
const jsonTexts: [string, string][] = [
  ['MCP tools/call', toolsCall.toString('utf8')],
  ['64 KiB of small objects', withArguments({ files: Array.from({ length: 600 }, (_, i) => file(i)) })],
  ['4 MiB of small objects', withArguments({ files: Array.from({ length: 38_000 }, (_, i) => file(i)) })],
  ['4 MiB mostly one string', withArguments({ path: 'a.txt', content: `Lorem "ipsum"\n${'y'.repeat(90)}`.repeat(40_000) })],
];

// The first MCP message loads the SDK's schemas: measured once, before any warm-up.
const loadStarted = performance.now();
const heapBefore = process.memoryUsage().heapUsed;
readMcpBody(toolsCall, MCP);
const loadMs = performance.now() - loadStarted;
const loadHeapMiB = (process.memoryUsage().heapUsed - heapBefore) / 1_048_576;

const mcpIntent = (jsonRpc: JsonRpcRequest) => ({ adapter: 'l7' as const, host: 'mcp.example.com', port: 443, method: 'POST', path: '/mcp', jsonRpc });
const parsedCall = mcpCalls(toolsCall, MCP);
const parsedBatch = mcpCalls(batch, MCP_BATCH);
const parsedGeneric = parseJsonRpcBody(generic);
if ('refused' in parsedGeneric) throw new Error('the generic call was refused as it was read');

const cases: [string, () => unknown][] = [
  ['parse MCP tools/call (JSON.parse + SDK schema)', () => readMcpBody(toolsCall, MCP)],
  ['parse MCP initialize', () => readMcpBody(initialize, MCP)],
  ['parse generic JSON-RPC call', () => parseJsonRpcBody(generic)],
  ['parse MCP batch of 10 tools/call', () => readMcpBody(batch, MCP_BATCH)],
  ['MCP-Protocol-Version of a 6-header request', () => readProtocolVersionHeader(legacyHead)],
  ['parse MCP tools/call under 2026-07-28 (_meta)', () => readMcpBody(sessionless, { revision: '2026-07-28', strictToolNames: true })],
  ['2026-07-28 headers: version, Mcp-Method, Mcp-Name', () => [readProtocolVersionHeader(sessionlessHead), readMirroredHeaders(sessionlessHead)]],
  ['decide MCP tools/call', () => decide(policy, mcpIntent(parsedCall))],
  ['decide MCP batch of 10', () => decide(policy, mcpIntent(parsedBatch))],
  ['decide json-rpc call', () => decide(policy, { adapter: 'l7', host: 'rpc.example.com', port: 443, method: 'POST', path: '/', jsonRpc: parsedGeneric })],
  ['filter a 50-tool tools/list answer', () => filterToolsListText(list, (id) => id === 3, (t) => t.startsWith('search_'))],
];

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

console.log(`MCP SDK schemas loaded on the first MCP message: ${loadMs.toFixed(1)} ms, ${loadHeapMiB.toFixed(1)} MiB of heap`);
/** Microseconds per call of one round of `calls` calls. */
const round = (run: () => unknown, calls: number): number => {
  const started = performance.now();
  for (let i = 0; i < calls; i++) run();
  return ((performance.now() - started) * 1_000) / calls;
};

// Rounds of JSON.parse and readJson alternate, so a neighbour's load on a shared machine falls on both alike.
for (const [what, text] of jsonTexts) {
  const calls = Math.max(3, Math.floor((ITERATIONS * 200) / text.length));
  const plain: number[] = [];
  const checked: number[] = [];
  for (let i = 0; i < calls; i++) readJson(text);
  for (let r = 0; r < ROUNDS; r++) {
    plain.push(round(() => JSON.parse(text), calls));
    checked.push(round(() => readJson(text), calls));
  }
  const ratio = median(checked) / median(plain);
  console.log(`${what} (${text.length} bytes): JSON.parse median ${median(plain).toFixed(2)} us, readJson ${median(checked).toFixed(2)} us (${ratio.toFixed(2)}x)`);
}

for (const [name, run] of cases) {
  for (let i = 0; i < ITERATIONS; i++) run();
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) rounds.push(round(run, ITERATIONS));
  console.log(`${name.padEnd(48)} median ${median(rounds).toFixed(2)} us  (rounds ${rounds.map((x) => x.toFixed(2)).join(' ')})`);
}
