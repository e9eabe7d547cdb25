// Regression of issue 15, "one process should not starve the others" (`issues show 15`): a single source
// address could take every slot of the proxy listener, and every other client then got 503. Now a source may
// hold MAX_CONNECTIONS_PER_SOURCE_PERCENT of the limit; beyond it, it alone gets 503
// too_many_connections_from_source, counted. 127.0.0.2 is a loopback alias: Linux needs no setup for it.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { MAX_CONNECTIONS_PER_SOURCE_PERCENT } from '../../src/proxy/admission.js';
import { startBoundary } from '../harness/boundary.js';
import { metric } from '../harness/liveness.js';
import { readAll, statusOf } from '../harness/proxy-client.js';
import { httpOrigin } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

const run = promisify(execFile);
const LIMIT = 4;
const SHARE = (LIMIT * MAX_CONNECTIONS_PER_SOURCE_PERCENT) / 100;
const HOG = '127.0.0.2';
/** Held connections must not be reaped as silent while the test runs: each sends half a request head. */
const HEADERS_TIMEOUT_MS = 60_000;

async function halfSent(proxyPort: number, originPort: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port: proxyPort, localAddress: HOG });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write(`GET http://api.example.test:${originPort}/slow HTTP/1.1\r\nHost: api.example.test\r\nX-Trickle: `);
  return socket;
}

describe('issue 15: one source address fills its share of the proxy listener', () => {
  it('is refused beyond it with 503 too_many_connections_from_source while a client from another address gets through', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({
      policy: `version: 1\nnetwork_policies:\n  api:\n    endpoints:\n      - { host: api.example.test, port: ${origin.port} }\n    binaries: [{ path: "/**" }]\n`,
      limits: { maxConnections: LIMIT, headersTimeoutMs: HEADERS_TIMEOUT_MS },
    });
    const hog: Socket[] = [];
    t.after(async () => {
      for (const s of hog) s.destroy();
      await b.close();
      await origin.close();
    });
    // The hog tries to take the whole listener; accepted in order, so the first SHARE are the ones admitted.
    for (let i = 0; i < LIMIT; i++) hog.push(await halfSent(b.proxyPort, origin.port));
    const refusals = hog.slice(SHARE).map((s) => withinDeadline(readAll(s), 'the over-share refusal'));

    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '-o', '/dev/null', '-w', '%{http_code}', `http://api.example.test:${origin.port}/other-source`]);
    assert.equal(stdout, '200', 'a client from 127.0.0.1 is not starved by 127.0.0.2');

    for (const text of await Promise.all(refusals)) {
      assert.equal(statusOf(text), 503);
      assert.equal((JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: string }).error, 'too_many_connections_from_source');
    }
    const event = await b.log.waitFor((e) => e.activity_name === 'Refuse' && e.unmapped.reason_code === 'too-many-connections-from-source');
    assert.equal(event.src_endpoint?.ip, HOG);
    assert.equal(await metric(b, 'boundary_proxy_refused_connections_total{reason="too-many-connections-from-source"}'), LIMIT - SHARE);
    assert.equal(await metric(b, 'boundary_proxy_refused_connections_total{reason="too-many-connections"}'), 0);
    assert.equal(origin.seen.length, 1, 'only the other source reached the origin');
  });
});
