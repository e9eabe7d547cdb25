// The client the MCP conformance suite runs in client mode (test/conformance/conformance.test.ts): the MCP SDK's
// Client, with all of its traffic sent through a boundary started here for the scenario's server, `protocol: mcp`
// with the method profile, enforced (docs/policy.md#mcp-conformance). Usage (by the suite):
//   node --import tsx test/conformance/client.ts <server-url>     with MCP_CONFORMANCE_SCENARIO set.
// Writes boundary's decision events as JSON lines to BOUNDARY_EVENTS_OUT, for the runner to check.
import { appendFile } from 'node:fs/promises';
import { startBoundary } from '../harness/boundary.js';
import { mcpClient } from '../harness/mcp-client.js';

/** The name the client asks for: the suite's servers listen on localhost, which no policy may name. */
const SERVER_NAME = 'mcp.conformance.test';

/** The scenarios this client knows, each a few SDK calls; anything else fails loudly. */
const SCENARIOS: Readonly<Record<string, (c: Awaited<ReturnType<typeof mcpClient>>) => Promise<void>>> = {
  initialize: async (c) => {
    await c.client.listTools();
  },
  tools_call: async (c) => {
    await c.client.listTools();
    await c.client.callTool({ name: 'add_numbers', arguments: { a: 5, b: 3 } });
  },
  'elicitation-sep1034-client-defaults': async (c) => {
    await c.client.listTools();
    await c.client.callTool({ name: 'test_client_elicitation_defaults', arguments: {} });
  },
  'sse-retry': async (c) => {
    await c.client.listTools();
    await c.client.callTool({ name: 'test_reconnection', arguments: {} });
  },
};

async function main(): Promise<void> {
  const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
  const run = SCENARIOS[scenario];
  const serverUrl = process.argv[2];
  if (run === undefined || serverUrl === undefined) throw new Error(`unknown scenario ${scenario} or no server URL`);
  const url = new URL(serverUrl);
  const port = Number(url.port);
  // The suite's servers negotiate 2025-11-25, 2025-06-18 and, in sse-retry, 2025-03-26: each must be listed.
  const policy = `version: 1
network_policies:
  mcp_conformance:
    endpoints:
      - host: ${SERVER_NAME}
        port: ${port}
        path: ${url.pathname === '/' ? '/**' : url.pathname}
        protocol: mcp
        enforcement: enforce
        mcp: { max_body_bytes: 131072, allow_all_known_mcp_methods: true, versions: ["2025-03-26", "2025-06-18", "2025-11-25"] }
        rules:
          - allow: {}
    binaries: [{ path: "/**" }]
`;
  const b = await startBoundary({ policy, names: { [SERVER_NAME]: ['127.0.0.1'] } });
  url.hostname = SERVER_NAME;
  // Form-mode elicitation with the schema's defaults applied (SEP-1034), as the suite's scenarios expect.
  const capabilities = { capabilities: { sampling: {}, elicitation: { form: { applyDefaults: true } } } };
  const c = await mcpClient(url.href, { proxyPort: b.proxyPort, capabilities, acceptElicitation: true });
  try {
    await run(c);
    // End the session as a client that is done with it would: DELETE, decided like the rest.
    if (c.transport.sessionId !== undefined) await c.transport.terminateSession();
  } finally {
    await c.close();
    await b.close();
    const out = process.env.BOUNDARY_EVENTS_OUT;
    if (out !== undefined) {
      const lines = b.log.decisions().map((e) => JSON.stringify({ scenario, method: e.http_request?.http_method, ...e.unmapped }));
      await appendFile(out, lines.map((l) => `${l}\n`).join(''));
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
