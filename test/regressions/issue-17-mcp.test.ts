// Regression of issue 17, "MCP inspection": `protocol: mcp` endpoints denied every request (unsupported-l7-protocol).
// Now each request is held up to mcp.max_body_bytes, parsed and decided by method and tool before a byte goes
// upstream; a denied call is answered with a JSON-RPC error, so the MCP SDK client reports it to the agent and the
// session goes on (docs/policy.md#json-rpc-and-mcp-inspection). The MCP SDK's own client and server (Streamable
// HTTP: SSE and JSON answers, the GET stream, Mcp-Session-Id, DELETE) through boundary: forward HTTP and CONNECT
// with TLS interception.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { fetch, ProxyAgent } from 'undici';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { credentialsFile, PH } from '../harness/credential-parts.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { mcpClient } from '../harness/mcp-client.js';
import { type McpOrigin, mcpOrigin, mcpTlsOrigin } from '../harness/mcp-origin.js';

const SECRET = 'mcp-secret-token-17';
/** mcp.max_body_bytes of /mcp: small, so an over-limit body is cheap to send. */
const LIMIT = 4096;
const DENIED = JSON_RPC_ERROR_CODES['policy-denied'];

const policy = (ports: readonly number[]): string => `version: 1
network_policies:
  mcp_tools:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp: { max_body_bytes: ${LIMIT}, versions: ["2025-03-26", "2025-11-25"] }
        rules:
          - allow: { method: initialize }
          - allow: { method: notifications/initialized }
          - allow: { method: tools/list }
          - allow: { method: tools/call, tool: read_status }
          - allow: { method: tools/call, tool: { any: ["search_*"] } }
        deny_rules:
          - { method: tools/call, tool: delete_resource }
    binaries: [{ path: "/**" }]
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
  mcp_rewrite:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /rewrite
        protocol: mcp
        enforcement: enforce
        request_body_credential_rewrite: true
        mcp: { allow_all_known_mcp_methods: true }
    binaries: [{ path: "/**" }]
  mcp_audited:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /audit
        protocol: mcp
        enforcement: audit
        rules:
          - allow: { method: initialize }
          - allow: { method: notifications/initialized }
          - allow: { method: tools/call, tool: read_status }
    binaries: [{ path: "/**" }]
`;

interface Route {
  readonly name: string;
  readonly origin: () => McpOrigin;
  readonly url: (path: string) => string;
  readonly tls: boolean;
}

describe('issue 17: MCP inspection through boundary (MCP SDK client and server)', { timeout: SUITE_TIMEOUT_MS }, () => {
  let sse: McpOrigin;
  let json: McpOrigin;
  let secure: McpOrigin;
  let b: RunningBoundary;
  let dir: string;
  let source: FileCredentialSource;

  before(async () => {
    const pki = await makeTestPki();
    sse = await mcpOrigin();
    json = await mcpOrigin({ json: true });
    secure = await mcpTlsOrigin({ ca: pki.ca });
    dir = await mkdtemp(join(tmpdir(), 'boundary-mcp-'));
    const endpoints = [sse, json, secure].map((o) => `      - { host: api.example.test, port: ${o.port} }`).join('\n');
    source = (await credentialsFile(dir, `providers:\n  tools:\n    env:\n      MCP_TOKEN: "${SECRET}"\n    endpoints:\n${endpoints}\n`)).source;
    b = await startBoundary({ policy: policy([sse.port, json.port, secure.port]), upstreamCaPem: pki.ca.certPem, credentials: source });
  });

  after(async () => {
    await b?.close();
    await source?.close();
    await Promise.all([sse?.close(), json?.close(), secure?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const routes: Route[] = [
    { name: 'forward HTTP, SSE answers', origin: () => sse, url: (p) => `http://api.example.test:${sse.port}${p}`, tls: false },
    { name: 'forward HTTP, JSON answers', origin: () => json, url: (p) => `http://api.example.test:${json.port}${p}`, tls: false },
    { name: 'CONNECT + TLS interception', origin: () => secure, url: (p) => `https://api.example.test:${secure.port}${p}`, tls: true },
  ];

  for (const route of routes) {
    const connect = (path = '/mcp', extra: Parameters<typeof mcpClient>[1] = {}) =>
      mcpClient(route.url(path), { proxyPort: b.proxyPort, ...(route.tls ? { caPem: b.caPem ?? '' } : {}), ...extra });
    /** A raw POST through the proxy: what a client other than the SDK's may send. */
    const post = async (path: string, body: string, headers: Record<string, string> = {}) => {
      const dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}`, requestTls: { ca: b.caPem ?? '' } });
      try {
        const res = await fetch(route.url(path), {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
          dispatcher,
        });
        return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
      } finally {
        await dispatcher.close();
      }
    };

    describe(route.name, () => {
      it('M1/M2: relays allowed calls, answers a denied one with a JSON-RPC error naming the policy, and the session goes on', async () => {
        const c = await connect();
        try {
          const sessionId = c.transport.sessionId;
          assert.ok(sessionId !== undefined, 'the server gave a session id through boundary');
          const listed = await c.client.listTools();
          assert.ok(listed.tools.some((t) => t.name === 'delete_resource'), 'no filter on /mcp');
          const ok = await c.client.callTool({ name: 'read_status', arguments: {} });
          assert.deepEqual(ok.content, [{ type: 'text', text: 'read_status ran' }]);
          const err = await c.client.callTool({ name: 'delete_resource', arguments: { scope: 'workspace/main' } }).then(
            () => assert.fail('a denied tool call resolved'),
            (e: unknown) => e,
          );
          assert.ok(err instanceof McpError, String(err));
          assert.equal(err.code, DENIED);
          assert.match(err.message, /boundary policy mcp_tools/);
          assert.match(err.message, /deny rule \(tools\/call delete_resource\)/);
          assert.deepEqual(err.data, { error: 'policy_denied', policy: 'mcp_tools', reason: 'deny-rule-matched', method: 'tools/call', tool: 'delete_resource' });
          assert.ok(!route.origin().calls.includes('delete_resource'), 'the denied call reached the server');
          // The same session, the next call: nothing was torn down.
          const next = await c.client.callTool({ name: 'search_web', arguments: { scope: 'docs' } });
          assert.deepEqual(next.content, [{ type: 'text', text: 'search_web ran on docs' }]);
          assert.equal(c.transport.sessionId, sessionId);
          const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.unmapped.reason_code === 'deny-rule-matched' && e.dst_endpoint?.port === route.origin().port);
          assert.equal(event.firewall_rule?.name, 'mcp_tools');
          assert.deepEqual(event.unmapped.rpc_methods, ['tools/call']);
          assert.deepEqual(event.unmapped.tools, ['delete_resource']);
          assert.ok(!JSON.stringify(event).includes('workspace/main'), 'a tool argument reached the event');
        } finally {
          await c.close();
        }
      });

      it('M7: denies a tool no rule names, with the policy and why in the error', async () => {
        const c = await connect();
        try {
          await assert.rejects(c.client.callTool({ name: 'admin.purge', arguments: {} }), (e: unknown) => {
            assert.ok(e instanceof McpError);
            assert.equal(e.code, DENIED);
            assert.match(e.message, /MCP tool call has no matching allow rule in policy mcp_tools/);
            assert.deepEqual(e.data, { error: 'policy_denied', policy: 'mcp_tools', reason: 'no-rule-matched', method: 'tools/call', tool: 'admin.purge' });
            return true;
          });
          assert.ok(!route.origin().calls.includes('admin.purge'));
        } finally {
          await c.close();
        }
      });

      it('M11: keeps the GET SSE stream open (server notifications reach the client) and lets DELETE end the session', async () => {
        const from = b.log.events().length;
        const c = await connect();
        try {
          const got = new Promise<string>((resolve) => {
            c.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => resolve(String(n.params.data)));
          });
          const sessionId = c.transport.sessionId as string;
          // The stream opens after notifications/initialized: its event (at the answer's head) says the server holds it.
          const isGet = (e: (ReturnType<typeof b.log.events>)[number]) => e.class_uid === 4002 && e.http_request?.http_method === 'GET' && e.dst_endpoint?.port === route.origin().port;
          await b.log.waitFor((e) => isGet(e) && b.log.events().indexOf(e) >= from);
          await route.origin().notify(sessionId, 'hello over the receive stream');
          assert.equal(await got, 'hello over the receive stream');
          await c.transport.terminateSession();
          assert.ok(route.origin().ended.includes(sessionId), 'the DELETE reached the server');
          const del = await b.log.waitFor((e) => e.class_uid === 4002 && e.http_request?.http_method === 'DELETE' && e.dst_endpoint?.port === route.origin().port);
          assert.equal(del.unmapped.verdict, 'allow');
        } finally {
          await c.close();
        }
      });

      it('filter_tools_list: tools/list lists only the tools policy lets the client call', async () => {
        const c = await connect('/filtered');
        try {
          const listed = await c.client.listTools();
          assert.deepEqual(listed.tools.map((t) => t.name).sort(), ['read_status', 'search_web']);
          // Filtering is a view: the calls are still decided one by one.
          await assert.rejects(c.client.callTool({ name: 'submit_report', arguments: {} }), (e: unknown) => e instanceof McpError && e.code === DENIED);
          assert.deepEqual((await c.client.callTool({ name: 'search_web', arguments: {} })).content, [{ type: 'text', text: 'search_web ran' }]);
        } finally {
          await c.close();
        }
      });

      it('resolves a credential placeholder in a header on an allowed MCP request', async () => {
        const seen = route.origin().seen.length;
        const c = await connect('/mcp', { headers: { authorization: `Bearer ${PH}MCP_TOKEN` } });
        try {
          await c.client.callTool({ name: 'read_status', arguments: {} });
          const auth = route.origin().seen.slice(seen).map((s) => s.headers.authorization);
          assert.ok(auth.length > 0 && auth.every((a) => a === `Bearer ${SECRET}`), JSON.stringify(auth));
          assert.ok(!b.log.text().includes(SECRET), 'the secret reached a log line');
        } finally {
          await c.close();
        }
      });

      it('rewrites a placeholder in a decided body on an endpoint with request_body_credential_rewrite', async () => {
        const c = await connect('/rewrite');
        try {
          const ran = await c.client.callTool({ name: 'read_status', arguments: { scope: `${PH}MCP_TOKEN` } });
          assert.ok(route.origin().seen.some((r) => r.body.includes(`"scope":"${SECRET}"`)), 'the server received the secret');
          // Its echo of it is masked on the way back, length for length (docs/credentials.md#echoed-secrets).
          assert.deepEqual(ran.content, [{ type: 'text', text: `read_status ran on [redacted]${'*'.repeat(SECRET.length - 10)}` }]);
          assert.ok(!b.log.text().includes(SECRET), 'the secret reached a log line');
        } finally {
          await c.close();
        }
      });

      it('audit: forwards a call no rule allows and logs it as audit; an unreadable call is still denied', async () => {
        const c = await connect('/audit');
        try {
          const ran = await c.client.callTool({ name: 'submit_report', arguments: {} });
          assert.deepEqual(ran.content, [{ type: 'text', text: 'submit_report ran' }]);
          const event = await b.log.waitFor((e) => e.unmapped.verdict === 'audit' && e.dst_endpoint?.port === route.origin().port);
          assert.deepEqual(event.unmapped.tools, ['submit_report']);
          // Not a request of its revision: 400 invalid_mcp_request under audit too (docs/policy.md#mcp-protocol-revisions).
          await assert.rejects(c.client.callTool({ name: 'read status', arguments: {} }), (e: unknown) => {
            assert.ok(e instanceof StreamableHTTPError, String(e));
            assert.equal(e.code, 400);
            assert.match(e.message, /invalid_mcp_request.*strict_tool_names/);
            return true;
          });
          const refused = await b.log.waitFor((e) => e.unmapped.reason_code === 'mcp-request-invalid' && e.dst_endpoint?.port === route.origin().port);
          assert.equal(refused.unmapped.mcp_protocol_version, '2025-11-25');
        } finally {
          await c.close();
        }
      });

      it('answers every request id of a batch with a denied call, and lets an allowed batch through', async () => {
        const call = (id: number, name: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });
        const denied = await post('/mcp', JSON.stringify([call(91, 'read_status'), { jsonrpc: '2.0', method: 'notifications/initialized' }, call(92, 'delete_resource')]));
        assert.equal(denied.status, 200);
        assert.match(denied.type, /^application\/json/);
        const answers = JSON.parse(denied.text) as { id: number; error: { code: number; message: string } }[];
        assert.deepEqual(answers.map((a) => [a.id, a.error.code]), [[91, DENIED], [92, DENIED]]);
        assert.ok(answers.every((a) => a.error.message.includes('deny rule (tools/call delete_resource)')), 'each names the deny rule');
        const seen = route.origin().seen.length;
        await post('/mcp', JSON.stringify([call(93, 'read_status'), call(94, 'search_web')]));
        assert.ok(route.origin().seen.slice(seen).some((s) => s.body.includes('"id":93')), 'the allowed batch reached the server');
      });

      it('answers an unreadable body 400 invalid_mcp_request (one it cannot hold with a JSON-RPC error), before anything goes upstream', async () => {
        const seen = route.origin().seen.length;
        const parse = await post('/mcp', 'not valid json {');
        assert.equal(parse.status, 400);
        assert.deepEqual(JSON.parse(parse.text), { error: 'invalid_mcp_request', detail: 'MCP request rejected under revision 2025-03-26: invalid JSON', policy: 'mcp_tools', layer: 'l7', protocol: 'mcp', method: 'POST', path: '/mcp' });
        const big = await post('/mcp', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_status', arguments: { pad: 'x'.repeat(LIMIT) } } }));
        assert.equal(big.status, 400);
        assert.match(JSON.parse(big.text).error.message, /exceeds 4096 byte inspection limit/);
        assert.equal(route.origin().seen.length, seen, 'an unreadable body reached the server');
      });

      it('M13/M14: relays a client response frame (an answer to a server request) on the MCP path, denies it elsewhere', async () => {
        const seen = route.origin().seen.length;
        const frame = JSON.stringify({ jsonrpc: '2.0', id: 7, result: { action: 'accept', content: {} } });
        await post('/mcp', frame);
        assert.ok(route.origin().seen.slice(seen).some((s) => s.body === frame), 'the response frame was not relayed');
        const other = await post('/other', frame);
        assert.equal(other.status, 403);
      });

      it('answers a notification no rule allows with the L7 403 (it has no id to answer)', async () => {
        const reply = await post('/mcp', JSON.stringify({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' }));
        assert.equal(reply.status, 403);
        assert.equal(JSON.parse(reply.text).error, 'policy_denied');
        assert.equal(JSON.parse(reply.text).protocol, 'mcp');
      });
    });
  }
});
