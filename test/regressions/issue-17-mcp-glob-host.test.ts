// Regression of issue 17: an mcp endpoint on a glob host (`*.mcp.example.test`) was refused at load ("mcp needs a
// concrete host"), so an OpenShell policy that loads there (OpenShell asks only for a non-blank host) did not load
// here. Now it loads and every server the glob matches is decided by its rules: the MCP SDK's client and server
// through the forward proxy, on two names under the glob.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { mcpClient } from '../harness/mcp-client.js';
import { type McpOrigin, mcpOrigin } from '../harness/mcp-origin.js';

const policy = (port: number): string => `version: 1
network_policies:
  mcp_fleet:
    endpoints:
      - host: "*.mcp.example.test"
        port: ${port}
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp: { allow_all_known_mcp_methods: true }
        rules:
          - allow: { tool: read_status }
    binaries: [{ path: "/**" }]
`;

describe('issue 17: an mcp endpoint on a glob host loads and decides every server under it', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: McpOrigin;
  let b: RunningBoundary;

  before(async () => {
    origin = await mcpOrigin();
    b = await startBoundary({ policy: policy(origin.port), names: { 'a.mcp.example.test': ['127.0.0.1'], 'b.mcp.example.test': ['127.0.0.1'] } });
  });

  after(async () => {
    await b?.close();
    await origin?.close();
  });

  for (const name of ['a.mcp.example.test', 'b.mcp.example.test']) {
    it(`${name}: the allowed tool runs, another is denied with a JSON-RPC error`, async () => {
      const c = await mcpClient(`http://${name}:${origin.port}/mcp`, { proxyPort: b.proxyPort });
      try {
        assert.deepEqual((await c.client.callTool({ name: 'read_status', arguments: {} })).content, [{ type: 'text', text: 'read_status ran' }]);
        await assert.rejects(c.client.callTool({ name: 'delete_resource', arguments: {} }), (e: unknown) => e instanceof McpError && e.code === JSON_RPC_ERROR_CODES['policy-denied']);
        assert.ok(!origin.calls.includes('delete_resource'));
      } finally {
        await c.close();
      }
    });
  }
});
