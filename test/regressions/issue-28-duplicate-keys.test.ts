// Regression of issue 28, "One reading of every request", finding 7: boundary read a repeated JSON key as JSON.parse
// does (the last one wins) while first-key parsers (cJSON, RapidJSON) run the other value, so a tools/call naming a
// denied tool and then an allowed one was allowed and ran the denied tool. Now a key repeated in any object of an
// inspected body (MCP, JSON-RPC, GraphQL; HTTP/1.1 and HTTP/2; audit mode too) is refused 400 before policy.
// The origin is a real first-key reader: Debian's libcjson behind python3 (test/harness/cjson-origin.py).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { issueCertificate } from '../../src/pki/issue.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { type CjsonOrigin, cjsonOrigin } from '../harness/cjson-origin.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openWebSocket, type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);

const policy = (port: number, tlsPort: number, wsPort: number): string => `version: 1
network_policies:
  tools:
    endpoints:
      - host: api.example.test
        ports: [${port}, ${tlsPort}]
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp: { versions: ["2025-03-26"] }
        rules:
          - allow: { method: tools/call, tool: read_status }
        deny_rules:
          - { method: tools/call, tool: delete_resource }
      - host: api.example.test
        port: ${port}
        path: /audit/mcp
        protocol: mcp
        enforcement: audit
        mcp: { versions: ["2025-03-26"] }
        rules:
          - allow: { method: tools/call, tool: read_status }
      - host: api.example.test
        port: ${port}
        path: /rpc
        protocol: json-rpc
        enforcement: enforce
        rules:
          - allow: { method: ledger_read }
      - host: api.example.test
        port: ${port}
        path: /graphql
        protocol: graphql
        enforcement: enforce
        rules:
          - allow: { operation_type: query, fields: [viewer] }
      - host: api.example.test
        port: ${wsPort}
        protocol: websocket
        enforcement: audit
        rules:
          - allow: { method: GET, path: /graphql }
          - allow: { operation_type: query, fields: [viewer] }
    binaries: [{ path: "/**" }]
`;

interface Reply {
  readonly code: number;
  readonly body: string;
}

const TOOLS_CALL = (params: string): string => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${params}}`;

describe('issue 28: a JSON key repeated in an inspected body is refused, never decided one way and run another', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: CjsonOrigin;
  let tlsOrigin: CjsonOrigin;
  let ws: WsOrigin;
  let b: RunningBoundary;
  let dir: string;
  let caFile: string;

  before(async () => {
    const pki = await makeTestPki();
    dir = await mkdtemp(join(tmpdir(), 'boundary-i28-'));
    const leaf = await issueCertificate({ ca: pki.ca, kind: 'server', names: ['api.example.test'], now: Date.now });
    await writeFile(join(dir, 'origin.pem'), leaf.certPem);
    await writeFile(join(dir, 'origin.key'), leaf.keyPem);
    origin = await cjsonOrigin();
    tlsOrigin = await cjsonOrigin({ certFile: join(dir, 'origin.pem'), keyFile: join(dir, 'origin.key') });
    ws = await wsOrigin();
    b = await startBoundary({ policy: policy(origin.port, tlsOrigin.port, ws.port), upstreamCaPem: pki.ca.certPem });
    caFile = join(dir, 'boundary-ca.pem');
    await writeFile(caFile, b.caPem ?? '');
  });

  after(async () => {
    await b?.close();
    await Promise.all([origin?.close(), tlsOrigin?.close(), ws?.close()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  /** curl through boundary's forward proxy (or, with `h2`, CONNECT + interception and HTTP/2 to boundary). */
  const post = async (path: string, body: string, h2 = false): Promise<Reply> => {
    const url = h2 ? `https://api.example.test:${tlsOrigin.port}${path}` : `http://api.example.test:${origin.port}${path}`;
    const tls = h2 ? ['--http2', '--cacert', caFile] : [];
    const args = ['-sS', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, ...tls, '-w', '\n%{http_code}', '-H', 'content-type: application/json', '--data-binary', body, url];
    const { stdout } = await run('curl', args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    const cut = stdout.lastIndexOf('\n');
    return { body: stdout.slice(0, cut), code: Number(stdout.slice(cut + 1)) };
  };

  /** Refused 400 `duplicate_json_key`, nothing reached the origin, and exactly one decision event says why. */
  const refused = async (reply: Reply, o: CjsonOrigin, ranBefore: number, path: string): Promise<Record<string, unknown>> => {
    assert.equal(o.ran().length, ranBefore, `the origin read ${JSON.stringify(o.ran().slice(ranBefore))}`);
    assert.equal(reply.code, 400, reply.body);
    const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'json-duplicate-key' && e.http_request?.url?.path === path && !seen.has(e));
    seen.add(event);
    refusals++;
    assert.equal(event.action, 'Denied');
    assert.equal(event.unmapped.status_code, 400);
    return JSON.parse(reply.body) as Record<string, unknown>;
  };
  const seen = new Set<OcsfEvent>();
  let refusals = 0;

  it('the cJSON origin reads the first of repeated keys: with boundary out of the way, the denied tool is the one it runs', async () => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-H', 'content-type: application/json', '--data-binary', TOOLS_CALL('{"name":"delete_resource","name":"read_status","arguments":{}}'), `http://127.0.0.1:${origin.port}/mcp`]);
    assert.equal((JSON.parse(stdout) as { result: { tool: string } }).result.tool, 'delete_resource');
  });

  it('refuses an MCP tools/call naming a denied tool and then an allowed one: 400 invalid_mcp_request naming the key, nothing runs', async () => {
    const before = origin.ran().length;
    const body = await refused(await post('/mcp', TOOLS_CALL('{"name":"delete_resource","name":"read_status","arguments":{}}')), origin, before, '/mcp');
    // MCP answers every request it cannot read under its revision alike (docs/policy.md#mcp-protocol-revisions).
    assert.equal(body.error, 'invalid_mcp_request');
    assert.equal(body.protocol, 'mcp');
    assert.match(String(body.detail), /key "name" appears more than once in the object at \$\.params/);
  });

  it('still relays the same call without the repeated key', async () => {
    const before = origin.ran().length;
    const reply = await post('/mcp', TOOLS_CALL('{"name":"read_status","arguments":{}}'));
    assert.equal(reply.code, 200, reply.body);
    assert.equal(origin.ran()[before]?.tool, 'read_status');
  });

  it('refuses a repeated key written with an escape ("name" and "\\u006eame" are one key to every parser)', async () => {
    const before = origin.ran().length;
    await refused(await post('/mcp', TOOLS_CALL('{"name":"delete_resource","\\u006eame":"read_status","arguments":{}}')), origin, before, '/mcp');
  });

  it('refuses a repeated key nested deep inside the arguments, and one in a batch item', async () => {
    const before = origin.ran().length;
    await refused(await post('/mcp', TOOLS_CALL('{"name":"read_status","arguments":{"a":[{"b":{"c":1,"c":2}}]}}')), origin, before, '/mcp');
    await refused(await post('/mcp', `[${TOOLS_CALL('{"name":"read_status","arguments":{}}')},{"jsonrpc":"2.0","id":2,"id":3,"method":"tools/call","params":{"name":"read_status"}}]`), origin, before, '/mcp');
  });

  it('refuses it under enforcement: audit too (audit forwards policy misses, never a body read two ways)', async () => {
    const before = origin.ran().length;
    await refused(await post('/audit/mcp', TOOLS_CALL('{"name":"delete_resource","name":"read_status","arguments":{}}')), origin, before, '/audit/mcp');
  });

  it('refuses a JSON-RPC method named twice (a denied method, then an allowed one)', async () => {
    const before = origin.ran().length;
    const body = await refused(await post('/rpc', '{"jsonrpc":"2.0","id":1,"method":"ledger_transfer","method":"ledger_read"}'), origin, before, '/rpc');
    assert.equal((body.error as { data: { error: string } }).data.error, 'duplicate_json_key');
  });

  it('refuses a GraphQL envelope with query twice (a denied mutation, then an allowed query): 400 with next_steps', async () => {
    const before = origin.ran().length;
    const body = await refused(await post('/graphql', '{"query":"mutation { deleteRepository(id: 1) }","query":"{ viewer }"}'), origin, before, '/graphql');
    assert.equal(body.error, 'duplicate_json_key');
    assert.equal(body.reason, 'json-duplicate-key');
    assert.match(String(body.detail), /"query"/);
    assert.deepEqual((body.next_steps as { kind: string }[]).map((s) => s.kind), ['fix_request']);
  });

  it('refuses the repeated tool name on an HTTP/2 stream inside an intercepted tunnel as well', async () => {
    const before = tlsOrigin.ran().length;
    await refused(await post('/mcp', TOOLS_CALL('{"name":"delete_resource","name":"read_status","arguments":{}}'), true), tlsOrigin, before, '/mcp');
    const ok = await post('/mcp', TOOLS_CALL('{"name":"read_status","arguments":{}}'), true);
    assert.equal(ok.code, 200, ok.body);
    assert.equal(tlsOrigin.ran()[before]?.tool, 'read_status');
  });

  it('closes a graphql-ws message repeating a key with 1008, on an audit endpoint that forwards a policy miss', async () => {
    const opened = await openWebSocket({ proxyPort: b.proxyPort, transport: 'forward', host: 'api.example.test', port: ws.port, path: '/graphql' });
    assert.equal(opened.status, 101, opened.head);
    const before = ws.records.length;
    // A policy miss under audit goes through...
    opened.client.sendText('{"id":"1","type":"subscribe","payload":{"query":"{ adminAuditLog }"}}');
    await ws.waitFor((r) => r.kind === 'text' && r.text.includes('adminAuditLog'));
    // ...a message read two ways does not.
    opened.client.sendText('{"id":"2","type":"subscribe","payload":{"query":"mutation { deleteRepository }","query":"{ viewer }"}}');
    assert.equal(await opened.client.closeCode(), 1008);
    assert.ok(!ws.records.slice(before).some((r) => r.kind === 'text' && r.text.includes('deleteRepository')), 'the message never reached the origin');
    const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'json-duplicate-key' && e.http_request?.http_method === 'WEBSOCKET_TEXT');
    assert.equal(event.action, 'Denied');
    refusals++;
  });

  it('wrote exactly one decision event per refused request', () => {
    assert.equal(b.log.decisions().filter((e) => e.unmapped.reason_code === 'json-duplicate-key').length, refusals);
  });
});
