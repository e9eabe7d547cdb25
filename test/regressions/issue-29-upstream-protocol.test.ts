// Issue 29 (what boundary tells users is what it does): an upstream that broke HTTP/1.1 framing was answered 502
// `upstream_unreachable`, as if it could not be reached. It answered, just not in HTTP: the denial is
// `upstream_protocol_error` and the event's reason code `upstream-protocol-error`, apart from an unreachable upstream.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { json, sendRequest } from '../harness/proxy-client.js';
import { freePort } from '../harness/supervisor-cli.js';

// Content-Length beside Transfer-Encoding: the answer a request smuggler would want relayed.
const SMUGGLING_ANSWER = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n';

describe('issue 29: an upstream that breaks HTTP framing is named as such', () => {
  let origin: Server;
  const sockets: Socket[] = [];
  let port = 0;
  let closed = 0;
  let b: RunningBoundary;
  before(async () => {
    origin = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.once('data', () => socket.write(SMUGGLING_ANSWER));
    });
    origin.listen(0, '127.0.0.1');
    await once(origin, 'listening');
    port = (origin.address() as { port: number }).port;
    closed = await freePort();
    b = await startBoundary({
      policy: `version: 1
network_policies:
  api:
    endpoints: [{ host: api.example.test, ports: [${port}, ${closed}] }]
    binaries: [{ path: "/**" }]
`,
    });
  });
  after(async () => {
    await b?.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
  });

  it('answers 502 upstream_protocol_error with reason code upstream-protocol-error, engine upstream', async () => {
    const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${port}/x` });
    assert.equal(response.status, 502);
    assert.equal(json(response).error, 'upstream_protocol_error');
    assert.match(response.statusMessage ?? '', /broke the HTTP protocol/);
    const event = await b.log.waitFor((e) => e.unmapped.adapter === 'forward' && e.dst_endpoint?.port === port && e.activity_name === 'Fail');
    assert.equal(event.unmapped.reason_code, 'upstream-protocol-error');
    assert.equal(event.firewall_rule?.type, 'upstream');
  });

  it('keeps upstream_unreachable for an upstream that cannot be reached', async () => {
    const response = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${closed}/x` });
    assert.equal(response.status, 502);
    assert.equal(json(response).error, 'upstream_unreachable');
    const event = await b.log.waitFor((e) => e.unmapped.adapter === 'forward' && e.dst_endpoint?.port === closed && e.activity_name === 'Fail');
    assert.equal(event.unmapped.reason_code, 'dial-failed');
  });
});
