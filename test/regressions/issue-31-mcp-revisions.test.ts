// Regression of issue 31, "Current OpenShell policies load and work", MCP part: `mcp.versions` was refused and MCP
// requests were read without a protocol revision. Now each request selects its revision (MCP-Protocol-Version,
// else 2025-03-26), is refused before policy when the header is bad, the revision is not allowed, the body is not a
// request of that revision or, under the sessionless 2026-07-28, its mirrored headers differ from the body; and
// extension methods need an exact rule (docs/policy.md#mcp-protocol-revisions). The cases M1-M18 sent by curl,
// through the forward proxy and through CONNECT with TLS interception (HTTP/1.1 and HTTP/2), to a recording origin.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { expectIssue } from '../harness/policy-parse-fixtures.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

const run = promisify(execFile);

const policy = (ports: readonly number[]): string => {
  const at = (path: string, enforcement: string, lines: string): string =>
    `      - host: api.example.test\n        ports: [${ports.join(', ')}]\n        path: ${path}\n        protocol: mcp\n        enforcement: ${enforcement}\n${lines
      .split('\n')
      .map((l) => `        ${l}`)
      .join('\n')}`;
  return `version: 1
network_policies:
  mcp_revisions:
    endpoints:
${at('/m/default', 'enforce', 'rules:\n  - allow: { method: initialize }\n  - allow: { method: tools/list }')}
${at('/m/audit', 'audit', 'rules:\n  - allow: { method: initialize }\n  - allow: { method: tools/list }')}
${at('/m/v1125', 'enforce', 'mcp: { versions: ["2025-11-25"], allow_all_known_mcp_methods: true }')}
${at('/m/vendor', 'enforce', 'mcp: { versions: ["2025-11-25"], allow_all_known_mcp_methods: true }\nrules: [{ allow: { method: vendor/thing } }]')}
${at('/m/v0326', 'enforce', 'mcp: { versions: ["2025-03-26"] }\nrules: [{ allow: { method: tools/call } }]')}
${at('/m/v0618', 'enforce', 'mcp: { versions: ["2025-06-18"], allow_all_known_mcp_methods: true }')}
${at('/m/v2026', 'enforce', 'mcp: { versions: ["2026-07-28"] }\nrules:\n  - allow: { method: tools/call, tool: read_status }\n  - allow: { method: prompts/get }')}
    binaries: [{ path: "/**" }]
`;
};

interface Reply {
  readonly status: number;
  readonly headers: string;
  readonly body: string;
  json(): Record<string, unknown>;
}

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const INIT = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'curl', version: '1' } };
const req = (method: string, params?: unknown, id = 1) => ({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
const V = (revision: string) => `MCP-Protocol-Version: ${revision}`;

describe('issue 31: MCP protocol revisions (M1-M18)', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: Origin;
  let secure: Origin;
  let b: RunningBoundary;
  let dir: string;
  let caFile: string;

  before(async () => {
    const pki = await makeTestPki();
    plain = await httpOrigin();
    secure = await tlsOrigin({ ca: pki.ca });
    b = await startBoundary({ policy: policy([plain.port, secure.port]), upstreamCaPem: pki.ca.certPem });
    dir = await mkdtemp(join(tmpdir(), 'boundary-i31-'));
    caFile = join(dir, 'ca.pem');
    await writeFile(caFile, b.caPem ?? '');
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), secure?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('M1/M2: an empty, repeated or padded mcp.versions does not load', () => {
    const one = (versions: string) => policy([443]).replace('mcp: { versions: ["2025-06-18"]', `mcp: { versions: ${versions}`);
    const at = 'network_policies.mcp_revisions.endpoints[5].mcp.versions';
    expectIssue(one('[]'), 'POLICY_MCP_INVALID', at);
    expectIssue(one('["2026-07-28", "2026-07-28"]'), 'POLICY_MCP_INVALID', `${at}[1]`);
    expectIssue(one('[" 2025-11-25"]'), 'POLICY_MCP_INVALID', `${at}[0]`);
  });

  const routes = [
    { name: 'forward HTTP/1.1', origin: () => plain, url: (p: string) => `http://api.example.test:${plain.port}${p}`, args: [] as string[] },
    { name: 'CONNECT + interception, HTTP/1.1', origin: () => secure, url: (p: string) => `https://api.example.test:${secure.port}${p}`, args: ['--http1.1'] },
    { name: 'CONNECT + interception, HTTP/2', origin: () => secure, url: (p: string) => `https://api.example.test:${secure.port}${p}`, args: ['--http2'] },
  ];

  for (const route of routes) {
    /** curl through boundary; `headers` as curl -H lines (a repeated name is sent twice). */
    const send = async (path: string, options: { method?: string; body?: unknown; headers?: readonly string[] } = {}): Promise<Reply> => {
      const body = options.body === undefined ? [] : ['--data-binary', typeof options.body === 'string' ? options.body : JSON.stringify(options.body)];
      const tls = route.url('').startsWith('https') ? ['--cacert', caFile] : [];
      const headers = ['Content-Type: application/json', 'Accept: application/json, text/event-stream', ...(options.headers ?? [])].flatMap((h) => ['-H', h]);
      const args = ['-sS', '-i', '--suppress-connect-headers', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, ...route.args, ...tls, '-X', options.method ?? 'POST', ...headers, ...body, route.url(path)];
      const { stdout } = await run('curl', args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
      const cut = stdout.indexOf('\r\n\r\n');
      const head = stdout.slice(0, cut);
      const text = stdout.slice(cut + 4);
      return { status: Number(/^HTTP\/[\d.]+ (\d{3})/.exec(head)?.[1]), headers: head.toLowerCase(), body: text, json: () => JSON.parse(text) as Record<string, unknown> };
    };
    const seen = () => route.origin().seen.length;
    /** The request's one decision event. */
    const eventOf = (path: string, reason: string, from: number): Promise<OcsfEvent> =>
      b.log.waitFor((e) => e.unmapped.reason_code === reason && e.http_request?.url?.path === path && e.dst_endpoint?.port === route.origin().port && b.log.events().indexOf(e) >= from);
    /** Refused before anything went upstream, with the revision rejection body. */
    const refused = async (reply: Reply, status: number, error: string, path: string, before: number): Promise<Record<string, unknown>> => {
      assert.equal(reply.status, status, reply.body);
      assert.equal(seen(), before, 'the refused request reached the origin');
      const body = reply.json();
      assert.deepEqual(Object.keys(body).sort(), ['detail', 'error', 'layer', 'method', 'path', 'policy', 'protocol']);
      assert.deepEqual([body.error, body.policy, body.layer, body.protocol, body.path], [error, 'mcp_revisions', 'l7', 'mcp', path]);
      assert.match(reply.headers, /x-boundary-policy: mcp_revisions/);
      return body;
    };

    describe(route.name, () => {
      it('M3: a legacy initialize without the header is exempt from mcp.versions and forwarded', async () => {
        const from = b.log.events().length;
        const before = seen();
        const reply = await send('/m/default', { body: req('initialize', INIT) });
        assert.equal(reply.status, 200, reply.body);
        assert.equal(seen(), before + 1);
        const event = await eventOf('/m/default', 'rule-allowed', from);
        assert.deepEqual([event.unmapped.mcp_protocol_version, event.unmapped.mcp_protocol_version_fallback, event.unmapped.mcp_bootstrap], ['2025-03-26', true, true]);
      });

      it('M4/M5: any other request without the header selects 2025-03-26: 403 when not allowed, under audit too', async () => {
        for (const path of ['/m/default', '/m/audit']) {
          const from = b.log.events().length;
          const before = seen();
          const body = await refused(await send(path, { body: req('tools/list') }), 403, 'mcp_protocol_version_not_allowed', path, before);
          assert.match(String(body.detail), /no MCP-Protocol-Version header.*fallback revision 2025-03-26/);
          const event = await eventOf(path, 'mcp-protocol-version-not-allowed', from);
          assert.equal(event.unmapped.mcp_protocol_version_fallback, true);
        }
        // The exemption is for initialize alone: one declaring 2026-07-28 in _meta is not a legacy bootstrap.
        const before = seen();
        await refused(await send('/m/v1125', { body: req('initialize', { ...INIT, _meta: META }) }), 403, 'mcp_protocol_version_not_allowed', '/m/v1125', before);
      });

      it('M6/M7: an unknown revision is 400 unsupported; a repeated, empty or hop-by-hop header 400 invalid', async () => {
        const before = seen();
        await refused(await send('/m/default', { body: req('tools/list'), headers: [V('2099-01-01')] }), 400, 'unsupported_mcp_protocol_version', '/m/default', before);
        await refused(await send('/m/default', { body: req('tools/list'), headers: [V('2025-11-25, 2025-03-26')] }), 400, 'unsupported_mcp_protocol_version', '/m/default', before);
        // A placeholder sent as the value is named in the detail only as [CREDENTIAL].
        const token = await send('/m/default', { body: req('tools/list'), headers: [V('openshell:resolve:env:API_TOKEN')] });
        const shown = String((await refused(token, 400, 'unsupported_mcp_protocol_version', '/m/default', before)).detail);
        assert.ok(!shown.includes('API_TOKEN') && shown.includes('[CREDENTIAL]'), shown);
        for (const headers of [[V('2025-11-25'), V('2025-11-25')], [V('2025-11-25'), 'Connection: MCP-Protocol-Version']]) {
          if (route.args.includes('--http2') && headers[1]?.startsWith('Connection')) continue;
          await refused(await send('/m/default', { body: req('tools/list'), headers }), 400, 'invalid_mcp_protocol_version_header', '/m/default', before);
        }
      });

      it('M8/M10/M11: a repeated key, a batch after 2025-03-26, a method of another revision: 400 invalid_mcp_request, under audit too', async () => {
        const from = b.log.events().length;
        const before = seen();
        await refused(await send('/m/v1125', { body: '{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}', headers: [V('2025-11-25')] }), 400, 'invalid_mcp_request', '/m/v1125', before);
        assert.equal((await eventOf('/m/v1125', 'json-duplicate-key', from)).unmapped.mcp_protocol_version, '2025-11-25');
        await refused(await send('/m/v1125', { body: [req('tools/list', undefined, 1), req('tools/list', undefined, 2)], headers: [V('2025-11-25')] }), 400, 'invalid_mcp_request', '/m/v1125', before);
        const body = await refused(await send('/m/v0618', { body: req('tasks/get', { taskId: 't' }), headers: [V('2025-06-18')] }), 400, 'invalid_mcp_request', '/m/v0618', before);
        assert.match(String(body.detail), /'tasks\/get' is not available in MCP 2025-06-18/);
        await eventOf('/m/v0618', 'mcp-request-invalid', from);
        // Audit relaxes none of it: a body that is not a request of its revision is refused there too.
        await refused(await send('/m/audit', { body: [req('tools/list', undefined, 1)], headers: [V('2025-11-25')] }), 400, 'invalid_mcp_request', '/m/audit', before);
      });

      it('M9: batches under 2025-03-26 are decided per call, up to 64 messages', async () => {
        const before = seen();
        const two = [req('tools/call', { name: 'a' }, 1), req('tools/call', { name: 'b' }, 2)];
        assert.equal((await send('/m/v0326', { body: two })).status, 200);
        assert.equal(seen(), before + 1);
        const many = Array.from({ length: 65 }, (_, i) => req('tools/call', { name: 'a' }, i));
        const body = await refused(await send('/m/v0326', { body: many }), 400, 'invalid_mcp_request', '/m/v0326', before + 1);
        assert.match(String(body.detail), /at most 64/);
      });

      it('M12: an extension method needs an exact allow rule; the method profile never allows one', async () => {
        const from = b.log.events().length;
        const before = seen();
        const denied = await send('/m/v1125', { body: req('vendor/thing'), headers: [V('2025-11-25')] });
        // A denied request is answered as a JSON-RPC error, so the session goes on (docs/policy.md#denials-as-json-rpc-errors).
        assert.equal(denied.status, 200);
        const error = denied.json().error as { code: number; message: string; data: Record<string, unknown> };
        assert.equal(error.code, JSON_RPC_ERROR_CODES['policy-denied']);
        assert.match(error.message, /MCP extension method has no matching exact allow rule in policy mcp_revisions/);
        assert.equal((await send('/m/v1125', { body: { jsonrpc: '2.0', method: 'vendor/thing' }, headers: [V('2025-11-25')] })).status, 403);
        assert.equal(seen(), before);
        assert.equal((await eventOf('/m/v1125', 'no-rule-matched', from)).unmapped.mcp_protocol_version, '2025-11-25');
        assert.equal((await send('/m/vendor', { body: req('vendor/thing'), headers: [V('2025-11-25')] })).status, 200);
        assert.equal(seen(), before + 1);
      });

      const sessionless = (method: string, params: Record<string, unknown>, headers: readonly string[]) =>
        send('/m/v2026', { body: req(method, { ...params, _meta: META }), headers: [V('2026-07-28'), `Mcp-Method: ${method}`, ...headers] });

      it('M13/M17: a sessionless request whose Mcp-Method and Mcp-Name (plain or base64) repeat the body is decided and forwarded', async () => {
        const before = seen();
        assert.equal((await sessionless('tools/call', { name: 'read_status', arguments: {} }, ['Mcp-Name: read_status'])).status, 200);
        assert.equal((await sessionless('prompts/get', { name: '天気' }, ['Mcp-Name: =?base64?5aSp5rCX?='])).status, 200);
        assert.equal(seen(), before + 2);
        const arrived = route.origin().seen.at(-1);
        assert.equal(arrived?.headers['mcp-name'], '=?base64?5aSp5rCX?=', 'the headers go upstream as sent');
      });

      it('M14: a sessionless request whose headers differ from its body: 400 invalid_mcp_request_metadata', async () => {
        const from = b.log.events().length;
        const before = seen();
        const wrong = await sessionless('tools/call', { name: 'read_status' }, ['Mcp-Name: Read_Status']);
        assert.match(String((await refused(wrong, 400, 'invalid_mcp_request_metadata', '/m/v2026', before)).detail), /Mcp-Name differs/);
        await refused(await sessionless('tools/call', { name: 'read_status' }, []), 400, 'invalid_mcp_request_metadata', '/m/v2026', before);
        const method = await send('/m/v2026', { body: req('tools/list', { _meta: META }), headers: [V('2026-07-28'), 'Mcp-Method: tools/call'] });
        await refused(method, 400, 'invalid_mcp_request_metadata', '/m/v2026', before);
        await refused(await sessionless('tools/call', { name: 'read_status' }, ['Mcp-Name: read_status', 'Mcp-Name: read_status']), 400, 'invalid_mcp_request_metadata', '/m/v2026', before);
        await eventOf('/m/v2026', 'mcp-request-metadata-invalid', from);
      });

      it('M15/M16: under 2026-07-28 only POST (405, Allow: POST), and no initialize, no _meta-less request', async () => {
        const before = seen();
        const get = await send('/m/v2026', { method: 'GET', headers: [V('2026-07-28'), 'Accept: text/event-stream'] });
        await refused(get, 405, 'mcp_http_method_not_allowed', '/m/v2026', before);
        assert.match(get.headers, /\nallow: post/);
        await refused(await send('/m/v2026', { method: 'DELETE', headers: [V('2026-07-28')] }), 405, 'mcp_http_method_not_allowed', '/m/v2026', before);
        await refused(await sessionless('initialize', INIT, []), 400, 'invalid_mcp_request', '/m/v2026', before);
        await refused(await send('/m/v2026', { body: req('tools/list'), headers: [V('2026-07-28'), 'Mcp-Method: tools/list'] }), 400, 'invalid_mcp_request', '/m/v2026', before);
        // Without the header the fallback 2025-03-26 is selected, which this endpoint does not allow.
        await refused(await send('/m/v2026', { body: req('tools/list', { _meta: META }) }), 403, 'mcp_protocol_version_not_allowed', '/m/v2026', before);
      });

      it('M18: the legacy receive stream and session end are under revision selection too', async () => {
        const before = seen();
        const stream = ['Accept: text/event-stream'];
        await refused(await send('/m/v1125', { method: 'GET', headers: stream }), 403, 'mcp_protocol_version_not_allowed', '/m/v1125', before);
        assert.equal((await send('/m/v1125', { method: 'GET', headers: [...stream, V('2025-11-25')] })).status, 200);
        await refused(await send('/m/v1125', { method: 'DELETE' }), 403, 'mcp_protocol_version_not_allowed', '/m/v1125', before + 1);
        assert.equal((await send('/m/v1125', { method: 'DELETE', headers: [V('2025-11-25')] })).status, 200);
        assert.equal(seen(), before + 2);
      });
    });
  }
});
