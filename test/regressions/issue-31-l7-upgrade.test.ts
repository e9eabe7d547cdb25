// Regression of issue 31, "Current OpenShell policies load and work": a graphql, json-rpc or mcp endpoint answered an
// Upgrade with a 400 JSON-RPC or GraphQL error (or let the body decide first), where OpenShell answers any Upgrade
// there with 403 unsupported_l7_protocol and Connection: close, under audit too, before the body is read
// (docs/policy.md#protocol-upgrades); and persisted_queries: allow_registered without a registry failed the load.
// Clients: curl (forward HTTP and CONNECT with TLS interception) and undici's
// WebSocket as the clients, a real graphql-js server and a WebSocket origin behind boundary. Loopback only.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ProxyAgent, WebSocket } from 'undici';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { type GraphqlOrigin, graphqlOrigin, graphqlTlsOrigin, persistedHash } from '../harness/graphql-origin.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { type WsOrigin, wsOrigin } from '../harness/ws.js';

const run = promisify(execFile);
const CURL_TIMEOUT_S = '10';
const VIEWER = 'query Viewer { viewer { login } }';
const WS_HOST = 'ws.example.test';

const policy = (ports: readonly number[], wsPort: number): string => `version: 1
network_policies:
  gql:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /graphql
        protocol: graphql
        enforcement: audit
        persisted_queries: allow_registered
        graphql_persisted_queries:
          ${persistedHash(VIEWER)}: { operation_type: query, fields: [viewer] }
        rules:
          - allow: { operation_type: query, fields: [viewer] }
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /graphql-unregistered
        protocol: graphql
        enforcement: enforce
        persisted_queries: allow_registered
        rules:
          - allow: { operation_type: query, fields: [viewer] }
    binaries: [{ path: "/**" }]
  rpc:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /rpc
        protocol: json-rpc
        enforcement: audit
        rules:
          - allow: { method: "*" }
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /mcp
        protocol: mcp
        enforcement: enforce
        mcp: { allow_all_known_mcp_methods: true }
    binaries: [{ path: "/**" }]
  ws:
    endpoints:
      - host: ${WS_HOST}
        port: ${wsPort}
        path: /ws
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: /ws }
          - allow: { method: WEBSOCKET_TEXT, path: /ws }
    binaries: [{ path: "/**" }]
`;

interface Reply {
  readonly code: number;
  readonly head: string;
  readonly body: Record<string, unknown>;
}

describe('protocol upgrades on inspected endpoints, and persisted queries (curl, undici WebSocket)', { timeout: SUITE_TIMEOUT_MS }, () => {
  let plain: GraphqlOrigin;
  let secure: GraphqlOrigin;
  let ws: WsOrigin;
  let b: RunningBoundary;
  let caFile: string;

  before(async () => {
    const pki = await makeTestPki();
    plain = await graphqlOrigin({ persisted: [VIEWER] });
    secure = await graphqlTlsOrigin({ ca: pki.ca, persisted: [VIEWER] });
    ws = await wsOrigin();
    b = await startBoundary({
      policy: policy([plain.port, secure.port], ws.port),
      upstreamCaPem: pki.ca.certPem,
      names: { [WS_HOST]: ['127.0.0.1'] },
    });
    caFile = join(b.dir, 'boundary-ca.pem');
    await writeFile(caFile, b.caPem ?? '');
  });

  after(async () => {
    await b?.close();
    await Promise.all([plain?.close(), secure?.close(), ws?.close()]);
  });

  /** curl through boundary; `-D -` puts every response head (a 100 Continue too) before the body. */
  async function curl(transport: 'forward' | 'connect', path: string, args: readonly string[]): Promise<Reply> {
    const url = transport === 'forward' ? `http://api.example.test:${plain.port}${path}` : `https://api.example.test:${secure.port}${path}`;
    const tls = transport === 'connect' ? ['--cacert', caFile] : [];
    const { stdout } = await run('curl', ['-sS', '--http1.1', '--max-time', CURL_TIMEOUT_S, '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`,
      '-D', '-', '-w', '\n%{http_code}', ...tls, ...args, url]);
    const cut = stdout.lastIndexOf('\n');
    const text = stdout.slice(0, cut);
    const split = text.lastIndexOf('\r\n\r\n');
    const body = text.slice(split + 4);
    return { code: Number(stdout.slice(cut + 1)), head: text.slice(0, split), body: body === '' ? {} : (JSON.parse(body) as Record<string, unknown>) };
  }

  const seen = (): number => plain.seen.length + secure.seen.length;
  const WEBSOCKET = ['-H', 'Connection: Upgrade', '-H', 'Upgrade: websocket', '-H', 'Sec-WebSocket-Version: 13', '-H', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='];
  const RPC_BODY = '{"jsonrpc":"2.0","id":1,"method":"reports.list"}';
  const MCP_BODY = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';

  const refused: readonly { readonly name: string; readonly path: string; readonly args: readonly string[] }[] = [
    { name: 'U1: GET /graphql with a WebSocket upgrade, on an audit endpoint', path: '/graphql?query=%7Bviewer%7Blogin%7D%7D', args: WEBSOCKET },
    { name: 'U2: POST /rpc with Upgrade: foo (no Connection: upgrade), on an audit endpoint', path: '/rpc', args: ['-H', 'Upgrade: foo', '-H', 'Content-Type: application/json', '--data-binary', RPC_BODY] },
    { name: 'Q4: POST /graphql with Upgrade: websocket', path: '/graphql', args: ['-H', 'Upgrade: websocket', '-H', 'Content-Type: application/json', '--data-binary', JSON.stringify({ query: VIEWER })] },
    { name: 'an MCP POST with a WebSocket upgrade and Expect: 100-continue', path: '/mcp', args: [...WEBSOCKET, '-H', 'Expect: 100-continue', '-H', 'Content-Type: application/json', '--data-binary', MCP_BODY] },
    { name: 'a json-rpc POST whose Upgrade is empty', path: '/rpc', args: ['-H', 'Upgrade;', '-H', 'Content-Type: application/json', '--data-binary', RPC_BODY] },
  ];
  for (const transport of ['forward', 'connect'] as const) {
    for (const { name, path, args } of refused) {
      it(`${name} (${transport}): 403 unsupported_l7_protocol, Connection: close, nothing upstream, before the body`, async () => {
        const before = seen();
        const from = b.log.events().length;
        const reply = await curl(transport, path, args);
        assert.equal(reply.code, 403, JSON.stringify(reply));
        assert.equal(reply.body.error, 'unsupported_l7_protocol');
        assert.match(reply.head, /^connection: close\r?$/im);
        assert.doesNotMatch(reply.head, /100 Continue/);
        assert.equal(seen(), before);
        const event = await b.log.waitFor((e) => b.log.events().indexOf(e) >= from && e.unmapped.reason_code === 'unsupported-l7-protocol');
        assert.equal(event.unmapped.verdict, 'deny');
      });
    }
  }

  it('still serves the same requests without an Upgrade (forward and CONNECT)', async () => {
    for (const transport of ['forward', 'connect'] as const) {
      const reply = await curl(transport, '/graphql?query=%7Bviewer%7Blogin%7D%7D', []);
      assert.equal(reply.code, 200, JSON.stringify(reply));
      assert.deepEqual(reply.body, { data: { viewer: { login: 'octo' } } });
    }
  });

  it('U3: relays a WebSocket upgrade on a websocket endpoint (undici WebSocket through the proxy)', async () => {
    const socket = new WebSocket(`ws://${WS_HOST}:${ws.port}/ws`, { dispatcher: new ProxyAgent(`http://127.0.0.1:${b.proxyPort}`) });
    try {
      await new Promise<void>((resolve, reject) => {
        socket.addEventListener('open', () => resolve());
        socket.addEventListener('error', () => reject(new Error('the WebSocket did not open')));
      });
      const echoed = new Promise<string>((resolve) => socket.addEventListener('message', (m) => resolve(String(m.data))));
      socket.send('hello');
      assert.equal(await echoed, 'echo:hello');
      assert.ok(ws.records.some((r) => r.kind === 'upgrade' && r.url === '/ws'));
    } finally {
      socket.close();
    }
  });

  const extensions = (hash: string): string => encodeURIComponent(JSON.stringify({ persistedQuery: { version: 1, sha256Hash: hash } }));
  it('Q1/Q2: a registered hash-only query goes; an unregistered one is a policy miss, forwarded and logged under audit', async () => {
    const ok = await curl('forward', `/graphql?extensions=${extensions(persistedHash(VIEWER))}`, []);
    assert.equal(ok.code, 200, JSON.stringify(ok));
    const from = b.log.events().length;
    const before = seen();
    await curl('forward', `/graphql?extensions=${extensions('zzz')}`, []);
    assert.equal(seen(), before + 1);
    const event = await b.log.waitFor((e) => b.log.events().indexOf(e) >= from && e.unmapped.verdict === 'audit');
    assert.match(String(event.unmapped.reason), /not registered/);
  });

  it('Q3: allow_registered without a registry loads, and every hash-only query is denied', async () => {
    const before = seen();
    const reply = await curl('forward', `/graphql-unregistered?extensions=${extensions(persistedHash(VIEWER))}`, []);
    assert.equal(reply.code, 403, JSON.stringify(reply));
    assert.equal(reply.body.error, 'policy_denied');
    assert.match(String(reply.body.detail), /not registered/);
    assert.equal(seen(), before);
  });
});
