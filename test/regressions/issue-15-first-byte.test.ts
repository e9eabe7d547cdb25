// Regression of issue 15, "zero-byte idle connections are never reaped" (`issues show 15`): a connection that
// sent nothing held its slot until the head timeout (10 s) on the proxy listener, and for the whole tunnel idle
// timeout (300 s) on a capture listener, so a client opening silent connections kept everyone else at 503. Now
// each is closed, unanswered, FIRST_BYTE_TIMEOUT_MS after accept (here shortened through ProxyLimits).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { buildQuery, udpQuery } from '../harness/dns-client.js';
import { metric, tcpOrigin } from '../harness/liveness.js';
import { rawExchange, statusOf } from '../harness/proxy-client.js';
import { httpOrigin } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

const run = promisify(execFile);
const LIMIT = 4;
/** Long enough for the raw exchange below to meet the full listener first; reaped 1-2 s after accept. */
const FIRST_BYTE_MS = 1_000;
/** Far beyond the first-byte timeout: on the old code only these bounded a silent connection. */
const HEADERS_TIMEOUT_MS = 60_000;
const TUNNEL_IDLE_MS = 60_000;
/**
 * A silent connection must be closed by the first-byte timeout, not by the headers or idle timeout the old code
 * relied on: half of those, so however late a loaded host runs the sweep, only the first-byte timeout fits.
 */
const REAP_DEADLINE_MS = Math.min(HEADERS_TIMEOUT_MS, TUNNEL_IDLE_MS) / 2;

interface Silent {
  readonly socket: Socket;
  readonly closed: Promise<void>;
  /** Bytes the boundary sent before it closed the connection. */
  received(): number;
}

async function silent(host: string, port: number): Promise<Silent> {
  const socket = connect({ host, port });
  let bytes = 0;
  socket.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  socket.on('error', () => undefined);
  // Not events.once: it rejects on 'error', and a reset is one way of being closed.
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await once(socket, 'connect');
  return { socket, closed, received: () => bytes };
}

async function synthetic(b: RunningBoundary, name: string): Promise<string> {
  const answer = await udpQuery(b.dnsPort as number, buildQuery(name));
  const record = answer.answers?.find((r) => r.type === 'A');
  const ip = record !== undefined && 'data' in record ? record.data : undefined;
  assert.equal(typeof ip, 'string', `an A record for ${name}`);
  return ip as string;
}

describe('issue 15: connections that send nothing', () => {
  it('are closed on the proxy listener after the first-byte timeout, and curl then gets through', async (t) => {
    const origin = await httpOrigin();
    const b = await startBoundary({
      policy: `version: 1\nnetwork_policies:\n  api:\n    endpoints:\n      - { host: api.example.test, port: ${origin.port} }\n    binaries: [{ path: "/**" }]\n`,
      // Every client here is 127.0.0.1: the per-source share is lifted so that one source can fill the listener.
      limits: { maxConnections: LIMIT, maxConnectionsPerSourcePercent: 100, firstByteTimeoutMs: FIRST_BYTE_MS, headersTimeoutMs: HEADERS_TIMEOUT_MS },
    });
    const held: Silent[] = [];
    t.after(async () => {
      for (const s of held) s.socket.destroy();
      await b.close();
      await origin.close();
    });
    for (let i = 0; i < LIMIT; i++) held.push(await silent('127.0.0.1', b.proxyPort));

    // The listener is full of silent connections: accepted in order, this one comes after them.
    const refused = await rawExchange(b.proxyPort, `GET http://api.example.test:${origin.port}/ HTTP/1.1\r\nhost: api.example.test\r\n\r\n`);
    assert.equal(statusOf(refused), 503);
    assert.ok(refused.includes('"too_many_connections"'), refused);

    await withinDeadline(Promise.all(held.map((s) => s.closed)), 'the silent connections closed', REAP_DEADLINE_MS);
    assert.deepEqual(
      held.map((s) => s.received()),
      held.map(() => 0),
      'a client that asked nothing is answered nothing',
    );
    assert.equal(await metric(b, 'boundary_proxy_first_byte_timeouts_total{listener="proxy"}'), LIMIT);

    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--noproxy', '', '-x', `http://127.0.0.1:${b.proxyPort}`, '-o', '/dev/null', '-w', '%{http_code}', `http://api.example.test:${origin.port}/after`]);
    assert.equal(stdout, '200');
  });

  it('leaves alone a connection that sent its request, however long the upstream takes to answer', async (t) => {
    const origin = await tcpOrigin(() => undefined);
    const b = await startBoundary({
      policy: `version: 1\nnetwork_policies:\n  api:\n    endpoints:\n      - { host: api.example.test, port: ${origin.port} }\n    binaries: [{ path: "/**" }]\n`,
      limits: { firstByteTimeoutMs: FIRST_BYTE_MS },
    });
    const open: Socket[] = [];
    t.after(async () => {
      for (const s of open) s.destroy();
      await b.close();
      await origin.close();
    });
    const client = connect({ host: '127.0.0.1', port: b.proxyPort });
    open.push(client);
    client.on('error', () => undefined);
    await once(client, 'connect');
    client.write(`GET http://api.example.test:${origin.port}/slow HTTP/1.1\r\nhost: api.example.test\r\n\r\n`);
    const upstream = await origin.next();
    // node:http reads this socket natively after accept: only the handle's bytesRead shows it spoke.
    const canary = await silent('127.0.0.1', b.proxyPort);
    open.push(canary.socket);
    await withinDeadline(canary.closed, 'the silent canary closed', REAP_DEADLINE_MS);
    // Admitted first, so due first: the sweep that closed the canary had passed the waiting client.
    assert.equal(client.destroyed, false);
    const answered = once(client, 'data');
    upstream.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    const [chunk] = (await withinDeadline(answered, 'the slow answer')) as [Buffer];
    assert.equal(statusOf(chunk.toString('latin1')), 200);
  });

  it('are closed on a capture listener (as a TLS client that never sends its ClientHello is), while a server-first greeting keeps one open', async (t) => {
    const quiet = await tcpOrigin(() => undefined);
    const greeting = await tcpOrigin((s) => s.write('220 greeting.example.test ready\r\n'));
    const b = await startBoundary({
      names: { 'quiet.example.test': ['127.0.0.1'], 'greeting.example.test': ['127.0.0.1'] },
      policy: `version: 1
network_policies:
  raw:
    endpoints:
      - { host: quiet.example.test, port: ${quiet.port}, protocol: tcp }
      - { host: greeting.example.test, port: ${greeting.port}, protocol: tcp }
    binaries: [{ path: "/**" }]
`,
      limits: { firstByteTimeoutMs: FIRST_BYTE_MS, tunnelIdleTimeoutMs: TUNNEL_IDLE_MS },
    });
    const open: Silent[] = [];
    t.after(async () => {
      for (const s of open) s.socket.destroy();
      await b.close();
      await quiet.close();
      await greeting.close();
    });
    const greeted = await silent(await synthetic(b, 'greeting.example.test'), greeting.port);
    open.push(greeted);
    await greeting.next();
    const mute = await silent(await synthetic(b, 'quiet.example.test'), quiet.port);
    open.push(mute);

    await withinDeadline(mute.closed, 'the silent captured connection closed', REAP_DEADLINE_MS);
    assert.equal(mute.received(), 0);
    assert.equal(await metric(b, 'boundary_proxy_first_byte_timeouts_total{listener="transparent"}'), 1);
    // Admitted first, so due first: the sweep that closed `mute` had passed it, and the greeting kept it.
    assert.equal(greeted.socket.destroyed, false, 'a server-first connection is not silent');
    assert.ok(greeted.received() > 0);
  });
});
