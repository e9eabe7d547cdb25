// Regression of issue 31, "Current OpenShell policies load and work", MCP part, with real MCP software: the MCP SDK's
// client and server (Streamable HTTP) through boundary at every protocol revision the installed SDK speaks
// (2025-03-26, 2025-06-18, 2025-11-25; it does not know 2026-07-28, which issue-31-mcp-revisions.test.ts sends
// raw), forward HTTP and CONNECT with TLS interception: each session's requests are read under the negotiated
// revision, which `mcp.versions` must list (docs/policy.md#mcp-protocol-revisions).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { McpError, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import { MCP_REVISIONS } from '../../src/jsonrpc/mcp-revisions.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { mcpClient } from '../harness/mcp-client.js';
import { type McpOrigin, mcpOrigin, mcpTlsOrigin } from '../harness/mcp-origin.js';

/** The revisions both boundary and the installed SDK speak. */
const SDK_REVISIONS = MCP_REVISIONS.filter((r) => SUPPORTED_PROTOCOL_VERSIONS.includes(r));

const endpoint = (ports: readonly number[], path: string, versions: string): string => `      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: ${path}
        protocol: mcp
        enforcement: enforce
        mcp: { versions: ${versions} }
        rules:
          - allow: { method: initialize }
          - allow: { method: notifications/initialized }
          - allow: { method: tools/list }
          - allow: { method: tools/call, tool: read_status }`;

interface Pair {
  readonly revision: string;
  readonly plain: McpOrigin;
  readonly secure: McpOrigin;
}

describe('issue 31: the MCP SDK through boundary at every revision it speaks', { timeout: SUITE_TIMEOUT_MS }, () => {
  let pairs: Pair[] = [];
  let b: RunningBoundary;

  before(async () => {
    const pki = await makeTestPki();
    pairs = await Promise.all(
      SDK_REVISIONS.map(async (revision) => ({ revision, plain: await mcpOrigin({ revision }), secure: await mcpTlsOrigin({ ca: pki.ca, revision }) })),
    );
    const endpoints = pairs.flatMap((p) => {
      const ports = [p.plain.port, p.secure.port];
      // /pinned allows only a revision other than the one the server negotiates.
      const other = p.revision === '2025-11-25' ? '2025-06-18' : '2025-11-25';
      return [endpoint(ports, '/mcp', `["${p.revision}"]`), endpoint(ports, '/pinned', `["${other}"]`)];
    });
    b = await startBoundary({ policy: `version: 1\nnetwork_policies:\n  sdk:\n    endpoints:\n${endpoints.join('\n')}\n    binaries: [{ path: "/**" }]\n`, upstreamCaPem: pki.ca.certPem });
  });

  after(async () => {
    await b?.close();
    await Promise.all(pairs.flatMap((p) => [p.plain.close(), p.secure.close()]));
  });

  it('the installed SDK speaks the three legacy revisions and not 2026-07-28', () => {
    assert.deepEqual(SDK_REVISIONS, ['2025-03-26', '2025-06-18', '2025-11-25']);
  });

  for (const revision of SDK_REVISIONS) {
    const pair = () => pairs.find((p) => p.revision === revision) as Pair;
    const routes = [
      { name: 'forward HTTP', origin: () => pair().plain, url: (p: string) => `http://api.example.test:${pair().plain.port}${p}`, tls: false },
      { name: 'CONNECT + TLS interception', origin: () => pair().secure, url: (p: string) => `https://api.example.test:${pair().secure.port}${p}`, tls: true },
    ];
    for (const route of routes) {
      const connect = (path: string) => mcpClient(route.url(path), { proxyPort: b.proxyPort, ...(route.tls ? { caPem: b.caPem ?? '' } : {}) });
      const events = (from: number) => b.log.decisions().slice(from).filter((e) => e.class_uid === 4002 && e.dst_endpoint?.port === route.origin().port);

      it(`${revision}, ${route.name}: a session runs under its revision; calls are decided; the stream and DELETE pass`, async () => {
        const from = b.log.decisions().length;
        const c = await connect('/mcp');
        try {
          assert.equal(c.transport.protocolVersion, revision, 'the server negotiated the revision under test');
          assert.deepEqual((await c.client.callTool({ name: 'read_status', arguments: {} })).content, [{ type: 'text', text: 'read_status ran' }]);
          await assert.rejects(c.client.callTool({ name: 'delete_resource', arguments: {} }), (e: unknown) => e instanceof McpError && e.code === JSON_RPC_ERROR_CODES['policy-denied']);
          assert.ok(!route.origin().calls.includes('delete_resource'));
          await c.transport.terminateSession();
          await b.log.waitFor((e) => e.http_request?.http_method === 'DELETE' && e.dst_endpoint?.port === route.origin().port && b.log.decisions().indexOf(e) >= from);
        } finally {
          await c.close();
        }
        const seen = events(from);
        const init = seen.find((e) => (e.unmapped.rpc_methods as string[] | undefined)?.includes('initialize'));
        // initialize goes without the header: read as the fallback, let through as the legacy bootstrap.
        assert.deepEqual([init?.unmapped.mcp_protocol_version, init?.unmapped.mcp_bootstrap], ['2025-03-26', true]);
        const rest = seen.filter((e) => e !== init);
        assert.ok(rest.length >= 4, 'notifications/initialized, the calls, the GET stream and the DELETE');
        for (const e of rest) {
          assert.equal(e.unmapped.mcp_protocol_version, revision, JSON.stringify(e.unmapped));
          assert.equal(e.unmapped.mcp_protocol_version_fallback, undefined);
        }
      });

      it(`${revision}, ${route.name}: a session negotiated at a revision mcp.versions does not list cannot start`, async () => {
        const from = b.log.decisions().length;
        await assert.rejects(connect('/pinned'));
        const refused = await b.log.waitFor(
          (e) => e.unmapped.reason_code === 'mcp-protocol-version-not-allowed' && e.dst_endpoint?.port === route.origin().port && b.log.decisions().indexOf(e) >= from,
        );
        assert.equal(refused.unmapped.mcp_protocol_version, revision);
        assert.equal(refused.unmapped.status_code, 403);
      });
    }
  }
});
