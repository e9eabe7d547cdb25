// Regression of issue 17, GraphQL over WebSocket (openshell-l7.md §1.7, G24-G27): a `protocol: websocket`
// endpoint with GraphQL rules refused every text message as uninspected. Now each graphql-transport-ws or
// graphql-ws message is classified: control messages pass, `subscribe`/`start` operations are decided by type,
// name and root fields, anything else closes with 1008 (docs/policy.md#graphql-over-websocket).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { openWebSocket, type WsOrigin, wsOrigin } from '../harness/ws.js';

const policy = (port: number): string => `version: 1
network_policies:
  chat:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: /graphql }
          - allow: { operation_type: query, fields: [viewer] }
          - allow: { operation_type: subscription, fields: [messageAdded] }
        deny_rules:
          - { operation_type: mutation }
    binaries: [{ path: "/**" }]
`;

const subscribe = (id: string, query: string): string => JSON.stringify({ id, type: 'subscribe', payload: { query } });

describe('issue 17: GraphQL over WebSocket', { timeout: SUITE_TIMEOUT_MS }, () => {
  let origin: WsOrigin;
  let b: RunningBoundary;

  before(async () => {
    origin = await wsOrigin();
    b = await startBoundary({ policy: policy(origin.port) });
  });

  after(async () => {
    await b?.close();
    await origin?.close();
  });

  const open = async () => {
    const opened = await openWebSocket({ proxyPort: b.proxyPort, transport: 'forward', host: 'api.example.test', port: origin.port, path: '/graphql' });
    assert.equal(opened.status, 101, opened.head);
    return opened.client;
  };

  it('G24: relays control messages and an allowed subscription', async () => {
    const client = await open();
    client.sendText(JSON.stringify({ type: 'connection_init', payload: {} }));
    await origin.waitFor((r) => r.kind === 'text' && r.text.includes('connection_init'));
    client.sendText(subscribe('1', 'subscription NewMessages { messageAdded { id } }'));
    await origin.waitFor((r) => r.kind === 'text' && r.text.includes('NewMessages'));
    client.socket.destroy();
  });

  for (const [name, text] of [
    ['G25: a query with an unlisted field', subscribe('2', '{ adminAuditLog }')],
    ['G26: a mutation a deny rule names', subscribe('3', 'mutation DeleteRepo { deleteRepository }')],
    ['an unknown message type', JSON.stringify({ type: 'execute', id: '4', payload: { query: '{ viewer }' } })],
  ] as const) {
    it(`closes with 1008 on ${name}, sending nothing upstream`, async () => {
      const client = await open();
      const before = origin.records.length;
      client.sendText(text);
      assert.equal(await client.closeCode(), 1008);
      assert.ok(!origin.records.slice(before).some((r) => r.kind === 'text'), 'the message never reached the origin');
      await b.log.waitFor((e) => e.class_uid === 4002 && e.action === 'Denied' && e.http_request?.http_method === 'WEBSOCKET_TEXT');
    });
  }
});
