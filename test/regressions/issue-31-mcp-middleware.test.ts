// Regression of issue 31, "Current OpenShell policies load and work", MCP revisions with network middlewares: a body
// the regex middleware replaced was decided again on what policy had read of the body the client sent. Now it is read
// again under the request's revision, with the body checks and the 2026-07-28 header comparison, before policy decides
// it (docs/policy.md#mcp-protocol-revisions). curl through the forward proxy to a recording origin.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const run = promisify(execFile);
/** What the built-in regex replaces with `[REDACTED]`. */
const KEY = 'sk-ABCDEFGHIJKLMNOPQR';

const policy = (port: number): string => `version: 1
network_policies:
  mw:
    endpoints:
      - host: other.example.test
        port: ${port}
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp: { versions: ["2025-11-25", "2026-07-28"] }
        rules: [{ allow: { method: tools/call } }, { allow: { method: prompts/get } }]
    binaries: [{ path: "/**" }]
network_middlewares:
  redact-keys:
    middleware: ryno/regex
    order: 10
    endpoints:
      include: [other.example.test]
`;

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

describe('issue 31: an MCP body a middleware replaced is read again under its revision', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: Origin;
  let b: RunningBoundary;

  before(async () => {
    origin = await httpOrigin();
    b = await startBoundary({ policy: policy(origin.port) });
  });

  after(async () => {
    await b?.close();
    await origin?.close();
  });

  const send = async (body: unknown, headers: readonly string[]): Promise<{ status: number; json: Record<string, unknown> | undefined }> => {
    const h = ['Content-Type: application/json', 'Accept: application/json, text/event-stream', ...headers].flatMap((x) => ['-H', x]);
    const args = ['-sS', '-o', '-', '-w', '\n%{http_code}', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, ...h, '--data-binary', JSON.stringify(body)];
    const { stdout } = await run('curl', [...args, `http://other.example.test:${origin.port}/mcp`], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    const cut = stdout.lastIndexOf('\n');
    const text = stdout.slice(0, cut);
    let json: Record<string, unknown> | undefined;
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      json = undefined;
    }
    return { status: Number(stdout.slice(cut + 1)), json };
  };

  it('a redacted key in the arguments goes upstream redacted', async () => {
    const before = origin.seen.length;
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_status', arguments: { key: KEY }, _meta: META } };
    const reply = await send(body, ['MCP-Protocol-Version: 2026-07-28', 'Mcp-Method: tools/call', 'Mcp-Name: read_status']);
    assert.equal(reply.status, 200);
    assert.equal(origin.seen.length, before + 1);
    assert.match(origin.seen.at(-1)?.body ?? '', /"key":"\[REDACTED\]"/);
  });

  it('2026-07-28: a name the middleware changed no longer matches Mcp-Name: 400 invalid_mcp_request_metadata', async () => {
    const before = origin.seen.length;
    const body = { jsonrpc: '2.0', id: 2, method: 'prompts/get', params: { name: KEY, _meta: META } };
    const reply = await send(body, ['MCP-Protocol-Version: 2026-07-28', 'Mcp-Method: prompts/get', `Mcp-Name: ${KEY}`]);
    assert.equal(reply.status, 400);
    assert.equal(reply.json?.error, 'invalid_mcp_request_metadata');
    assert.equal(origin.seen.length, before, 'nothing went upstream');
  });

  it('2025-11-25: a tool name the middleware made invalid is refused, not decided on the name the client sent', async () => {
    const before = origin.seen.length;
    const body = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: KEY, arguments: {} } };
    const reply = await send(body, ['MCP-Protocol-Version: 2025-11-25']);
    assert.equal(reply.status, 400);
    assert.equal(reply.json?.error, 'invalid_mcp_request');
    assert.equal(origin.seen.length, before, 'nothing went upstream');
  });
});
