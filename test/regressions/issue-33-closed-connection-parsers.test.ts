// Issue 33's own HTTP/1.1 server (boundary's, on node's llhttp) kept the parser of every client connection it had
// closed: free() does not delete a native llhttp parser, which holds its callbacks, and through them the connection
// and its socket, from a global handle, so the collector could never take them. A workload that opens a connection
// per request (every denial closes one) grew the sidecar by about 3 KB a connection, for good: 70 MiB of heap after
// 21,000 denials. Real boundary, real sockets: connections opened, answered and closed, then the llhttp parsers
// left in the heap are counted after a collection (v8.queryObjects).

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { type AddressInfo, connect, createServer } from 'node:net';
import { describe, it } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { queryObjects } from 'node:v8';
import { startBoundary } from '../harness/boundary.js';

/** Connections opened and closed, one after the other. */
const CONNECTIONS = 300;
/** At most this many parsers may outlive their connection (a collection may find a few not yet deleted). */
const PARSERS_LEFT_AT_MOST = 10;

const { HTTPParser } = createRequire(import.meta.url)('_http_common') as { HTTPParser: new () => unknown };

function policy(port: number): string {
  return `version: 1
network_policies:
  api:
    endpoints: [{ host: api.example.test, port: ${port} }]
    binaries: [{ path: "/**" }]
`;
}

/**
 * `head` on a connection of its own; resolves with the status line once the proxy has closed the connection. The
 * client closes its side once the answer's head is in when `endAfterHead` (a tunnel stays open until then).
 */
function exchangeOnce(port: number, head: string, endAfterHead: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      answer += chunk;
      if (endAfterHead && answer.includes('\r\n\r\n')) socket.end();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(answer.slice(0, answer.indexOf('\r\n'))));
    socket.write(head);
  });
}

/** One request on a connection of its own, as curl in a loop sends it. */
const requestOnce = (port: number, host: string): Promise<string> =>
  exchangeOnce(port, `GET http://${host}/ HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, false);

/** A CONNECT tunnel of its own, closed by the client once the proxy said 200. */
const tunnelOnce = (port: number, target: string): Promise<string> => exchangeOnce(port, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`, true);

async function parsersAlive(): Promise<number> {
  // Parsers are deleted a turn after their connection goes: let those turns pass.
  for (let i = 0; i < 3; i++) await turn();
  return queryObjects(HTTPParser as never, { format: 'count' }) as number;
}

describe('issue 33: a closed client connection leaves no parser behind', () => {
  it('deletes the llhttp parser of every connection the proxy answered and closed', async (t) => {
    const b = await startBoundary({ policy: policy(443) });
    t.after(() => b.close());
    // One connection first: whatever is made once per process is in the baseline.
    assert.match(await requestOnce(b.proxyPort, 'denied.example.test'), /^HTTP\/1\.1 403 /);
    const before = await parsersAlive();
    for (let i = 0; i < CONNECTIONS; i++) assert.match(await requestOnce(b.proxyPort, 'denied.example.test'), /^HTTP\/1\.1 403 /);
    const left = (await parsersAlive()) - before;
    assert.ok(left <= PARSERS_LEFT_AT_MOST, `${left} parsers of ${CONNECTIONS} closed connections are still in the heap`);
  });

  it('deletes the parser of every CONNECT it handed over to a tunnel, once the tunnel closed', async (t) => {
    const origin = createServer((socket) => socket.on('error', () => {}).end());
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    t.after(() => origin.close());
    const port = (origin.address() as AddressInfo).port;
    const b = await startBoundary({ policy: policy(port) });
    t.after(() => b.close());
    const target = `api.example.test:${port}`;
    assert.match(await tunnelOnce(b.proxyPort, target), /^HTTP\/1\.1 200 /);
    const before = await parsersAlive();
    for (let i = 0; i < CONNECTIONS; i++) assert.match(await tunnelOnce(b.proxyPort, target), /^HTTP\/1\.1 200 /);
    const left = (await parsersAlive()) - before;
    assert.ok(left <= PARSERS_LEFT_AT_MOST, `${left} parsers of ${CONNECTIONS} closed tunnels are still in the heap`);
  });
});
