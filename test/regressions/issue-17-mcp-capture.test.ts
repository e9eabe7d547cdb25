// Regression of issue 17, "MCP inspection" on the transparent route: a workload with no proxy settings reaches an
// MCP server through its synthetic address (policy DNS, capture listener, TLS interception), and its calls are
// decided by tool there too; a denied call is a JSON-RPC error and the session goes on
// (docs/policy.md#json-rpc-and-mcp-inspection). The MCP SDK's client and server, plain HTTP and TLS.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { mcpClient } from '../harness/mcp-client.js';
import { type McpOrigin, mcpOrigin, mcpTlsOrigin } from '../harness/mcp-origin.js';

const run = promisify(execFile);

const policy = (ports: readonly number[]): string => `version: 1
network_policies:
  mcp_tools:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp: { allow_all_known_mcp_methods: true, filter_tools_list: true }
        rules:
          - allow: { tool: read_status }
        deny_rules:
          - { method: tools/call, tool: delete_resource }
    binaries: [{ path: "/**" }]
`;

describe('issue 17: MCP inspection on captured connections (synthetic address, no proxy)', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: McpOrigin;
  let secure: McpOrigin;
  let b: RunningBoundary;
  let synthetic: string;

  before(async () => {
    const pki = await makeTestPki();
    plain = await mcpOrigin();
    secure = await mcpTlsOrigin({ ca: pki.ca });
    b = await startBoundary({ policy: policy([plain.port, secure.port]), upstreamCaPem: pki.ca.certPem });
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(b.dnsPort), '+tries=1', '+time=3', '+short', 'api.example.test', 'A']);
    synthetic = stdout.trim();
    assert.match(synthetic, /^127\.77\./, 'policy DNS gave a synthetic address');
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), secure?.close()]);
  });

  for (const [name, origin, scheme] of [['plain HTTP', () => plain, 'http'], ['TLS, intercepted', () => secure, 'https']] as const) {
    it(`${name}: filters tools/list, relays an allowed call, answers a denied one as a JSON-RPC error, and ends the session`, async () => {
      const c = await mcpClient(`${scheme}://api.example.test:${origin().port}/mcp`, { address: synthetic, ...(scheme === 'https' ? { caPem: b.caPem ?? '' } : {}) });
      try {
        assert.deepEqual((await c.client.listTools()).tools.map((t) => t.name), ['read_status']);
        assert.deepEqual((await c.client.callTool({ name: 'read_status', arguments: {} })).content, [{ type: 'text', text: 'read_status ran' }]);
        await assert.rejects(c.client.callTool({ name: 'delete_resource', arguments: {} }), (e: unknown) => {
          assert.ok(e instanceof McpError, String(e));
          assert.equal(e.code, JSON_RPC_ERROR_CODES['policy-denied']);
          assert.match(e.message, /boundary policy mcp_tools/);
          return true;
        });
        assert.ok(!origin().calls.includes('delete_resource'));
        const sessionId = c.transport.sessionId as string;
        await c.transport.terminateSession();
        assert.ok(origin().ended.includes(sessionId));
        const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'deny-rule-matched' && e.dst_endpoint?.port === origin().port);
        assert.deepEqual(event.unmapped.tools, ['delete_resource']);
      } finally {
        await c.close();
      }
    });
  }
});
