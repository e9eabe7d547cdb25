// Regression of issue 17, `mcp.filter_tools_list`: the tools/list answer was filtered only on the POST stream that
// carried the call. An MCP server whose POST stream breaks (here it closes it on purpose, as the SDK lets a server
// do) sends the answer on the GET the client resumes with Last-Event-ID, and that answer passed unfiltered: the
// agent saw tools the policy would never let it call. Now every answer on a GET to a filtering endpoint is
// filtered (docs/policy.md#filtering-toolslist). The MCP SDK's client and server, through the forward proxy over
// HTTP/1.1 and through CONNECT + TLS interception over HTTP/2.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { mcpClient } from '../harness/mcp-client.js';
import { MCP_TOOLS, type McpOrigin, mcpOrigin, mcpTlsOrigin } from '../harness/mcp-origin.js';

const policy = (ports: readonly number[]): string => `version: 1
network_policies:
  mcp_filtered:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /filtered
        protocol: mcp
        enforcement: enforce
        mcp: { allow_all_known_mcp_methods: true, filter_tools_list: true }
        rules:
          - allow: { tool: { any: [read_status, search_web] } }
    binaries: [{ path: "/**" }]
`;

describe('issue 17: filter_tools_list filters a tools/list answer that arrives on a resumed GET stream', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: McpOrigin;
  let secure: McpOrigin;
  let b: RunningBoundary;

  before(async () => {
    const pki = await makeTestPki();
    plain = await mcpOrigin({ resumeToolsList: true });
    secure = await mcpTlsOrigin({ ca: pki.ca, resumeToolsList: true });
    b = await startBoundary({ policy: policy([plain.port, secure.port]), upstreamCaPem: pki.ca.certPem });
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), secure?.close()]);
  });

  const routes = [
    { name: 'forward HTTP/1.1', origin: () => plain, url: () => `http://api.example.test:${plain.port}/filtered`, tls: false },
    { name: 'CONNECT + TLS interception, HTTP/2', origin: () => secure, url: () => `https://api.example.test:${secure.port}/filtered`, tls: true },
  ];

  for (const route of routes) {
    it(`${route.name}: the resumed answer lists only the tools policy lets the client call`, async () => {
      const c = await mcpClient(route.url(), { proxyPort: b.proxyPort, ...(route.tls ? { caPem: b.caPem ?? '', h2: true } : {}) });
      try {
        const seen = route.origin().seen.length;
        const listed = await c.client.listTools();
        assert.deepEqual(listed.tools.map((t) => t.name).sort(), ['read_status', 'search_web']);
        const resumed = route.origin().seen.slice(seen).filter((r) => r.method === 'GET' && r.headers['last-event-id'] !== undefined);
        assert.equal(resumed.length, 1, 'the answer came on a GET resumed with Last-Event-ID, not on the POST');
        assert.ok(MCP_TOOLS.length > 2, 'the server offered more tools than the policy allows');
        // Filtering is a view: a call of a filtered-out tool is still decided, and denied.
        await assert.rejects(c.client.callTool({ name: 'delete_resource', arguments: {} }), (e: unknown) => e instanceof McpError && e.code === JSON_RPC_ERROR_CODES['policy-denied']);
      } finally {
        await c.close();
      }
    });
  }
});
