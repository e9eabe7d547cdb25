// Issue 17: SigV4 signing and MCP inspection on one endpoint, as an MCP server hosted behind AWS IAM needs (the
// workload holds placeholder keys, or none). Each request is held and decided by method and tool first, then signed
// with the provider's keys over the body it decided; a denied call is answered by boundary and never signed or sent.
// The MCP SDK's client and server, through the forward proxy over HTTP/1.1 and through CONNECT + TLS interception
// over HTTP/2; every request the server received is checked by an independent aws4 verification.

import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile } from '../harness/credential-parts.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { mcpClient } from '../harness/mcp-client.js';
import { type McpOrigin, type McpSeen, mcpOrigin, mcpTlsOrigin } from '../harness/mcp-origin.js';
import { verifySigV4 } from '../harness/sigv4-verifier.js';

const KEYS = { accessKeyId: 'AKIDMCPSIGNING', secretAccessKey: 'mcp-signing-secret-key' } as const;
const HOST = 'mcp.bedrock-agentcore.us-east-1.example.test';

const policy = (ports: readonly number[]): string => `version: 1
network_policies:
  aws_mcp:
    endpoints:
      - host: ${HOST}
        ports: [${ports.join(', ')}]
        path: /mcp
        protocol: mcp
        enforcement: enforce
        rules:
          - allow: { method: initialize }
          - allow: { method: notifications/initialized }
          - allow: { method: tools/list }
          - allow: { method: tools/call, tool: read_status }
        credential_signing: sigv4
        signing_service: bedrock-agentcore
        signing_region: us-east-1
    binaries: [{ path: "/**" }]
`;

const credentials = (ports: readonly number[]): string => `providers:
  aws:
    env:
      AWS_ACCESS_KEY_ID: ${KEYS.accessKeyId}
      AWS_SECRET_ACCESS_KEY: ${KEYS.secretAccessKey}
    endpoints:
${ports.map((port) => `      - { host: ${HOST}, port: ${port} }`).join('\n')}
`;

/** What the server received, checked against the real keys. */
function verified(seen: McpSeen): ReturnType<typeof verifySigV4> {
  return verifySigV4({ method: seen.method, url: seen.url, headers: seen.headers } as IncomingMessage, Buffer.from(seen.body), KEYS);
}

describe('issue 17: SigV4 signing on an MCP endpoint, after the call is decided', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: McpOrigin;
  let secure: McpOrigin;
  let b: RunningBoundary;
  let dir: string;
  let source: FileCredentialSource;

  before(async () => {
    const pki = await makeTestPki();
    plain = await mcpOrigin();
    secure = await mcpTlsOrigin({ ca: pki.ca, names: [HOST] });
    const ports = [plain.port, secure.port];
    dir = await mkdtemp(join(tmpdir(), 'boundary-sigv4-mcp-'));
    source = (await credentialsFile(dir, credentials(ports))).source;
    b = await startBoundary({ policy: policy(ports), names: { [HOST]: ['127.0.0.1'] }, credentials: source, upstreamCaPem: pki.ca.certPem });
  });

  after(async () => {
    await b?.close();
    await source?.close();
    await Promise.all([plain?.close(), secure?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const routes = [
    { name: 'forward HTTP/1.1', origin: () => plain, url: () => `http://${HOST}:${plain.port}/mcp`, tls: false },
    { name: 'CONNECT + TLS interception, HTTP/2', origin: () => secure, url: () => `https://${HOST}:${secure.port}/mcp`, tls: true },
  ];

  for (const route of routes) {
    it(`${route.name}: allowed calls arrive signed with the provider's keys; a denied call is neither signed nor sent`, async () => {
      const before = route.origin().seen.length;
      const c = await mcpClient(route.url(), { proxyPort: b.proxyPort, ...(route.tls ? { caPem: b.caPem ?? '', h2: true } : {}) });
      try {
        assert.ok((await c.client.listTools()).tools.length > 0);
        const ran = await c.client.callTool({ name: 'read_status', arguments: {} });
        assert.deepEqual(ran.content, [{ type: 'text', text: 'read_status ran' }]);
        await assert.rejects(c.client.callTool({ name: 'delete_resource', arguments: {} }), (e: unknown) => e instanceof McpError && e.code === JSON_RPC_ERROR_CODES['policy-denied']);
      } finally {
        await c.close();
      }
      const seen = route.origin().seen.slice(before);
      const posts = seen.filter((s) => s.method === 'POST');
      assert.ok(posts.length >= 4, `initialize, initialized, tools/list and tools/call reached the server (${posts.length} POSTs)`);
      assert.deepEqual(
        seen.map((s) => `${s.method} ${verified(s).verdict}`),
        seen.map((s) => `${s.method} valid`),
        'every request the server received carried a valid signature by the provider keys',
      );
      assert.ok(
        posts.map(verified).every((v) => v.contentSha256 === v.bodySha256),
        'each POST is signed over the body that was decided, not UNSIGNED-PAYLOAD',
      );
      assert.ok(!seen.some((s) => s.body.includes('delete_resource')), 'the denied call never reached the server');
      assert.ok(!route.origin().calls.includes('delete_resource'));
    });
  }
});
