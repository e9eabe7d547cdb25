// Issue 18 with issue 17: what an HTTP/1.1 request gets inside an intercepted tunnel, an HTTP/2 stream gets too. The
// MCP SDK's client speaking HTTP/2 (undici allowH2) through CONNECT: its JSON-RPC bodies held and decided, a denied
// tool call answered as a JSON-RPC error, tools/list filtered; and a binary identity that narrows the endpoints of
// each stream, as it narrows each HTTP/1.1 request in a tunnel (docs/destinations.md#http2, docs/identity.md).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { type H2Origin, h2TlsOrigin } from '../harness/h2-origin.js';
import { mcpClient } from '../harness/mcp-client.js';
import { realExe } from '../harness/identity-processes.js';
import { type McpOrigin, mcpTlsOrigin } from '../harness/mcp-origin.js';

const run = promisify(execFile);
/**
 * The client of the identity case: a process of its own (the test process holds boundary itself, whose fds the
 * lookup never examines), as the kernel names its executable.
 */
const CURL = realExe('/usr/bin/curl');
/** Bounds a hang only: curl's whole exchange, on a host loaded enough to stretch it far past its usual moment. */
const CURL_HANG_BOUND_S = 60;

function policy(mcpPort: number, restPort: number): string {
  return `version: 1
network_policies:
  tools:
    endpoints:
      - host: api.example.test
        port: ${mcpPort}
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp: { filter_tools_list: true }
        rules:
          - allow: { method: initialize }
          - allow: { method: notifications/initialized }
          - allow: { method: tools/list }
          - allow: { method: tools/call, tool: read_status }
    binaries: [{ path: "/**" }]
  curl_reads:
    endpoints:
      - host: rest.example.test
        port: ${restPort}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/curl/**" }
    binaries: [{ path: ${CURL} }]
  other_reads:
    endpoints:
      - host: rest.example.test
        port: ${restPort}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/other/**" }
    binaries: [{ path: /usr/bin/false }]
`;
}

describe('issue 18: inspected bodies and binary identity on HTTP/2 streams', () => {
  let mcp: McpOrigin;
  let rest: H2Origin;
  let b: RunningBoundary;

  before(async () => {
    const pki = await makeTestPki();
    mcp = await mcpTlsOrigin({ ca: pki.ca });
    rest = await h2TlsOrigin({ ca: pki.ca, names: ['rest.example.test'] });
    b = await startBoundary({ policy: policy(mcp.port, rest.port), upstreamCaPem: pki.ca.certPem, names: { 'rest.example.test': ['127.0.0.1'] } });
  });

  after(async () => {
    await b?.close();
    await Promise.all([mcp?.close(), rest?.close()]);
  });

  it('the MCP SDK client over HTTP/2: an allowed call runs, a denied one is a JSON-RPC error and the session goes on, tools/list is filtered', async () => {
    const c = await mcpClient(`https://api.example.test:${mcp.port}/mcp`, { proxyPort: b.proxyPort, caPem: b.caPem ?? '', h2: true });
    try {
      const listed = await c.client.listTools();
      assert.deepEqual(listed.tools.map((t) => t.name), ['read_status']);
      await assert.rejects(c.client.callTool({ name: 'delete_resource', arguments: {} }), (err: Error & { code?: number }) => {
        assert.equal(err.code, -32090);
        assert.match(err.message, /policy tools/);
        return true;
      });
      const ran = await c.client.callTool({ name: 'read_status', arguments: {} });
      assert.deepEqual(ran.content, [{ type: 'text', text: 'read_status ran' }]);
      assert.deepEqual(mcp.calls, ['read_status'], 'the denied call never reached the server');
    } finally {
      await c.close();
    }
    const streams = b.log.decisions().filter((e) => e.unmapped?.http_version === '2' && e.unmapped?.rpc_methods !== undefined);
    const denied = streams.find((e) => e.unmapped?.verdict === 'deny');
    assert.deepEqual(denied?.unmapped?.tools, ['delete_resource']);
    assert.ok(streams.length >= 4, `every MCP message was one HTTP/2 stream with its own decision (${streams.length})`);
  });

  it("each stream is decided with the tunnel's process: the entry whose binaries name it allows, the other's rules do not", async () => {
    const caFile = join(b.dir, 'ca-h2-identity.pem');
    await writeFile(caFile, b.caPem ?? '');
    const get = async (path: string): Promise<string> => {
      const args = ['-sS', '--max-time', String(CURL_HANG_BOUND_S), '--http2', '--cacert', caFile, '--proxy', `http://127.0.0.1:${b.proxyPort}`, '-o', '/dev/null', '-w', '%{http_code} %{http_version}'];
      const { stdout } = await run('curl', [...args, `https://rest.example.test:${rest.port}${path}`], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
      return stdout;
    };
    assert.equal(await get('/curl/a'), '200 2');
    assert.equal(await get('/other/a'), '403 2', 'the rule of an entry this process is not listed in never applies');
    const last = b.log.decisions().filter((e) => e.unmapped?.http_version === '2' && e.unmapped?.binary !== undefined).at(-1)?.unmapped;
    assert.equal(last?.identity, 'process');
    assert.equal(last?.binary, CURL);
    assert.equal(last?.verdict, 'deny');
  });
});
