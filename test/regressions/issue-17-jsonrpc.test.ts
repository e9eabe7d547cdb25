// Regression of issue 17, "JSON-RPC inspection": `protocol: json-rpc` endpoints denied every request
// (unsupported-l7-protocol). Now each body is held up to json_rpc.max_body_bytes, parsed, and every call decided
// by its exact method before a byte goes upstream; a denied call gets a JSON-RPC error for its id
// (docs/policy.md#json-rpc-and-mcp-inspection). The reference's cases J1-J18 end to end: the `json-rpc-2.0`
// library's client and server through boundary, forward HTTP and CONNECT with TLS interception.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { JSONRPCClient, JSONRPCErrorException, type JSONRPCRequest } from 'json-rpc-2.0';
import { fetch, ProxyAgent } from 'undici';
import { JSON_RPC_ERROR_CODES } from '../../src/jsonrpc/answer.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { type JsonRpcOrigin, jsonRpcOrigin, jsonRpcTlsOrigin } from '../harness/jsonrpc-origin.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';

const DENIED = JSON_RPC_ERROR_CODES['policy-denied'];

/** JR-E on /rpc (enforce), JR-A on /audit (no enforcement: audit). */
const policy = (ports: readonly number[]): string => `version: 1
network_policies:
  rpc_enforced:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /rpc
        protocol: json-rpc
        enforcement: enforce
        json_rpc: { max_body_bytes: 65536 }
        rules:
          - allow: { method: initialize }
          - allow: { method: tools/list }
          - allow: { method: tools/call }
        deny_rules:
          - method: tools/delete
    binaries: [{ path: "/**" }]
  rpc_audited:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /audit
        protocol: json-rpc
        rules:
          - allow: { method: initialize }
    binaries: [{ path: "/**" }]
`;

interface Reply {
  readonly status: number;
  readonly body: string;
}

describe('issue 17: JSON-RPC inspection through boundary (json-rpc-2.0 client and server)', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: JsonRpcOrigin;
  let secure: JsonRpcOrigin;
  let b: RunningBoundary;
  let dispatcher: ProxyAgent;

  before(async () => {
    const pki = await makeTestPki();
    plain = await jsonRpcOrigin();
    secure = await jsonRpcTlsOrigin({ ca: pki.ca });
    b = await startBoundary({ policy: policy([plain.port, secure.port]), upstreamCaPem: pki.ca.certPem });
    dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${b.proxyPort}`, requestTls: { ca: b.caPem ?? '' } });
  });

  after(async () => {
    await dispatcher?.close();
    await b?.close();
    await Promise.all([plain?.close(), secure?.close()]);
  });

  const routes = [
    { name: 'forward HTTP', origin: () => plain, url: (p: string) => `http://api.example.test:${plain.port}${p}` },
    { name: 'CONNECT + TLS interception', origin: () => secure, url: (p: string) => `https://api.example.test:${secure.port}${p}` },
  ];

  for (const route of routes) {
    const send = async (path: string, body: string, init: { method?: string; headers?: Record<string, string> } = {}): Promise<Reply> => {
      const res = await fetch(route.url(path), { method: init.method ?? 'POST', body, headers: { 'content-type': 'application/json', ...init.headers }, dispatcher });
      return { status: res.status, body: await res.text() };
    };
    /** The library's own client, its transport a POST through the proxy. */
    const client = (path = '/rpc'): JSONRPCClient =>
      new JSONRPCClient(async (request: JSONRPCRequest | JSONRPCRequest[]) => {
        const reply = await send(path, JSON.stringify(request));
        if (reply.status === 200) rpc.receive(JSON.parse(reply.body));
        else throw new Error(`HTTP ${reply.status}: ${reply.body}`);
      });
    let rpc: JSONRPCClient;
    const denial = async (p: PromiseLike<unknown>): Promise<JSONRPCErrorException> => {
      const err = await Promise.resolve(p).then(() => assert.fail('resolved'), (e: unknown) => e);
      assert.ok(err instanceof JSONRPCErrorException, String(err));
      return err;
    };

    describe(route.name, () => {
      it('J1/J2: relays allowed methods, params untouched (tools/call with any arguments)', async () => {
        rpc = client();
        assert.deepEqual(await rpc.request('initialize', { protocolVersion: '2025-11-25' }), { serverInfo: { name: 'ledger' } });
        assert.deepEqual(await rpc.request('tools/call', { name: 'blocked_action', arguments: { x: 1 } }), { ran: 'blocked_action' });
      });

      it('J3: answers a denied method with a JSON-RPC error for its id, nothing sent upstream', async () => {
        rpc = client();
        const seen = route.origin().seen.length;
        const err = await denial(rpc.request('tools/delete', { id: 'x' }));
        assert.equal(err.code, DENIED);
        assert.match(err.message, /boundary policy rpc_enforced/);
        assert.match(err.message, /tools\/delete/);
        assert.equal(route.origin().seen.length, seen);
        const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'deny-rule-matched' && e.dst_endpoint?.port === route.origin().port);
        assert.equal(event.firewall_rule?.name, 'rpc_enforced');
        assert.deepEqual(event.unmapped.rpc_methods, ['tools/delete']);
      });

      it('J4/J5/J17: an allowed batch goes through; one denied call denies the whole batch, every id answered, the event names only it', async () => {
        rpc = client();
        const ok = await rpc.requestAdvanced([
          { jsonrpc: '2.0', id: 1, method: 'tools/list' },
          { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'search', arguments: { secret: 'q-value' } } },
        ]);
        assert.deepEqual(ok.map((r) => r.id), [1, 2]);
        assert.ok(ok.every((r) => r.error === undefined));
        const seen = route.origin().seen.length;
        const from = b.log.events().length;
        const denied = await rpc.requestAdvanced([
          { jsonrpc: '2.0', id: 3, method: 'tools/list' },
          { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'search', arguments: { secret: 'q-value' } } },
          { jsonrpc: '2.0', id: 5, method: 'tools/delete' },
        ]);
        assert.deepEqual(denied.map((r) => [r.id, r.error?.code]), [[3, DENIED], [4, DENIED], [5, DENIED]]);
        assert.equal(route.origin().seen.length, seen);
        const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'deny-rule-matched' && b.log.events().indexOf(e) >= from);
        assert.deepEqual(event.unmapped.rpc_methods, ['tools/delete']);
        assert.ok(!JSON.stringify(event).includes('q-value'), 'a param reached the event');
      });

      it('J6/J12-J15: a body that is not JSON-RPC is refused even under audit (400 for id null, 200 when an id can be answered)', async () => {
        const seen = route.origin().seen.length;
        const notJson = await send('/audit', 'not valid json {');
        assert.equal(notJson.status, 400);
        assert.equal(JSON.parse(notJson.body).error.code, JSON_RPC_ERROR_CODES['parse-error']);
        for (const [body, why] of [
          ['{"id":1,"method":"reports.list"}', "missing or non-string 'jsonrpc' field"],
          ['{"jsonrpc":"1.0","id":1,"method":"initialize"}', "unsupported JSON-RPC version '1.0'"],
          ['[{"jsonrpc":"2.0","id":1,"method":"initialize"},{"id":2,"method":"x"}]', 'batch item invalid'],
          ['{"jsonrpc":"2.0","id":1,"method":"initialize","result":{}}', 'both method and result/error'],
        ] as const) {
          const reply = await send('/audit', body);
          assert.equal(reply.status, 200, reply.body);
          const answers = [JSON.parse(reply.body)].flat() as { id: number; error: { code: number; message: string } }[];
          assert.ok(answers.length > 0 && answers.every((a) => a.error.code === JSON_RPC_ERROR_CODES['invalid-request'] && a.error.message.includes(why)), reply.body);
        }
        assert.equal(route.origin().seen.length, seen, 'an unreadable body reached the server');
      });

      it('J7/J8: audit forwards an unknown method, but never a client-sent response frame', async () => {
        const seen = route.origin().seen.length;
        const unknown = await send('/audit', '{"jsonrpc":"2.0","id":1,"method":"unknown/method"}');
        assert.equal(unknown.status, 200);
        assert.deepEqual(JSON.parse(unknown.body).result, { unknown: true });
        await b.log.waitFor((e) => e.unmapped.verdict === 'audit' && e.dst_endpoint?.port === route.origin().port);
        const frame = await send('/audit', '{"jsonrpc":"2.0","id":1,"result":{}}');
        assert.equal(frame.status, 400);
        assert.match(JSON.parse(frame.body).error.message, /response frames are not permitted/);
        assert.equal(route.origin().seen.length, seen + 1);
      });

      it('J9/J18: an allowed method sent with PUT, and the receive-stream GET, are denied', async () => {
        const put = await send('/rpc', '{"jsonrpc":"2.0","id":9,"method":"initialize"}', { method: 'PUT' });
        assert.equal(put.status, 200);
        assert.match(JSON.parse(put.body).error.message, /POST only/);
        const res = await fetch(route.url('/rpc'), { headers: { accept: 'text/event-stream' }, dispatcher });
        assert.equal(res.status, 403);
        assert.equal(((await res.json()) as { reason: string }).reason, 'no-rule-matched');
      });

      it('G6-like: relays a chunked allowed body re-framed with Content-Length', async () => {
        const seen = route.origin().seen.length;
        const body = '{"jsonrpc":"2.0","id":11,"method":"initialize"}';
        const stream = new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(body.slice(0, 10)));
            controller.enqueue(new TextEncoder().encode(body.slice(10)));
            controller.close();
          },
        });
        const res = await fetch(route.url('/rpc'), { method: 'POST', body: stream, duplex: 'half', headers: { 'content-type': 'application/json' }, dispatcher });
        assert.equal(res.status, 200);
        await res.text();
        const got = route.origin().seen[seen];
        assert.equal(got?.headers['transfer-encoding'], undefined);
        assert.equal(got?.headers['content-length'], String(body.length));
      });
    });
  }
});
