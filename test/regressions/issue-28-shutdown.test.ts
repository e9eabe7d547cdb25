// Regression of issue 28, "SIGTERM hang, again" (`issues show 28`): after HTTP/2 requests relayed to an origin that
// speaks only HTTP/1.1, `boundary run` logged "drained in 7 ms" and stayed alive past the forced deadline. A tunnel
// that closed while its upstream was still being chosen left the TLS socket dialled for it to no one: the HTTP/1.1
// pool made for it afterwards (or the HTTP/2 client it was handed to) was never closed, not even by the drain, and
// after a clean drain nothing bounded the process. Now the drain closes what every tunnel chose, and the entry point
// exits at the drain deadline (code 3) whatever still holds the process. Runs the real CLI and sends SIGTERM.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect as h2Connect } from 'node:http2';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { EXIT_DRAIN_FORCED, EXIT_OK } from '../../src/app/cli/run.js';
import { makeTestPki, type TestPki } from '../harness/certs.js';
import { type BoundaryCli, spawnBoundaryCli, standaloneFlags } from '../harness/cli-boundary.js';
import { FRAME, PREFACE, readFrames, requestHeaders, settings } from '../harness/h2-frames.js';
import { h2TlsOrigin } from '../harness/h2-origin.js';
import { rawClient, type TcpOrigin, tcpOrigin } from '../harness/liveness.js';
import { openTunnel } from '../harness/proxy-client.js';
import { echoServer, tlsOrigin } from '../harness/servers.js';
import { withinDeadline } from '../harness/waiters.js';

/** The drain deadline every case sets (`--shutdown-drain-ms`): far below the 8 s default, far above a clean drain. */
const DRAIN_MS = 1_500;
/**
 * Bounds a hang only, beyond the deadline: the bug kept the process alive for minutes (still alive after ten), while
 * what ended the drain is told by the exit code (0 drained, 3 forced at the deadline), never by how long a loaded
 * host took to get there.
 */
const EXIT_MARGIN_MS = 60_000;
/** Clients of each kind that build the red team's state. */
const CLIENTS = 3;
/** SETTINGS_INITIAL_WINDOW_SIZE. */
const INITIAL_WINDOW = 0x4;

type Exit = [number | null, NodeJS.Signals | null];

interface Origins {
  readonly pki: TestPki;
  readonly h1Port: number;
  readonly h2Port: number;
  readonly echoPort: number;
  close(): Promise<void>;
}

async function origins(t: TestContext): Promise<Origins> {
  const pki = await makeTestPki();
  // An HTTP/1.1-only TLS origin (ALPN http/1.1): HTTP/2 streams to it go as HTTP/1.1 on kept-alive sockets.
  const h1 = await tlsOrigin({ ca: pki.ca, names: ['h1.example.test'] });
  const h2 = await h2TlsOrigin({ ca: pki.ca, names: ['h2.example.test'] });
  const echo = await echoServer();
  const all = { pki, h1Port: h1.port, h2Port: h2.port, echoPort: echo.port, close: async () => void (await Promise.all([h1.close(), h2.close(), echo.close()])) };
  t.after(() => all.close());
  return all;
}

function policy(o: Origins, stuckPort: number): string {
  const l7 = (key: string, host: string, port: number): string => `  ${key}:
    endpoints:
      - host: ${host}
        port: ${port}
        protocol: rest
        enforcement: enforce
        access: full
    binaries: [{ path: "/**" }]
`;
  return `version: 1\nnetwork_policies:\n${l7('h1', 'h1.example.test', o.h1Port)}${l7('h2', 'h2.example.test', o.h2Port)}${l7('stuck', 'stuck.example.test', stuckPort)}  raw:
    endpoints:
      - { host: raw.example.test, port: ${o.echoPort} }
    binaries: [{ path: "/**" }]
`;
}

/** `boundary run` with the policy above, `--shutdown-drain-ms DRAIN_MS` and `flags`; its proxy port and CA. */
async function runCli(t: TestContext, o: Origins, flags: readonly string[], env?: NodeJS.ProcessEnv): Promise<{ cli: BoundaryCli; port: number; ca: string; stuck: TcpOrigin }> {
  const stuck = await tcpOrigin(() => undefined);
  const dir = await mkdtemp(join(tmpdir(), 'boundary-issue-28-'));
  let cli: BoundaryCli | undefined;
  // boundary first: it keeps its state in dir until it has exited. SIGKILL: on the bug a SIGTERM is exactly what
  // does not end it.
  t.after(async () => {
    await cli?.kill();
    await stuck.close();
    await rm(dir, { recursive: true, force: true });
  });
  await writeFile(join(dir, 'policy.yaml'), policy(o, stuck.port));
  await writeFile(join(dir, 'hosts'), ['h1', 'h2', 'stuck', 'raw'].map((n) => `127.0.0.1 ${n}.example.test\n`).join(''));
  await writeFile(join(dir, 'upstream-ca.pem'), o.pki.ca.certPem);
  cli = spawnBoundaryCli(
    [...standaloneFlags(dir), '--upstream-ca', join(dir, 'upstream-ca.pem'), '--shutdown-drain-ms', String(DRAIN_MS), ...flags],
    env === undefined ? {} : { env },
  );
  const listening = await cli.waitFor((line) => (line.ocsf?.message ?? '').startsWith('proxy listening on '));
  const port = Number(/:(\d+)$/.exec(listening.ocsf?.message ?? '')?.[1]);
  return { cli, port, ca: await readFile(join(dir, 'state', 'ca.pem'), 'utf8'), stuck };
}

/** An intercepted TLS tunnel to `host:port` whose client speaks HTTP/2 (ALPN h2). */
async function h2Tunnel(t: TestContext, proxyPort: number, ca: string, host: string, port: number): Promise<TLSSocket> {
  const tunnel = await openTunnel(proxyPort, `${host}:${port}`);
  assert.equal(tunnel.status, 200);
  const tls = tlsConnect({ socket: tunnel.socket, ca, servername: host, ALPNProtocols: ['h2'] });
  tls.on('error', () => undefined);
  t.after(() => tls.destroy());
  await once(tls, 'secureConnect');
  assert.equal(tls.alpnProtocol, 'h2');
  return tls;
}

/** GET `path` on a node:http2 session; resolves with the status once the body has ended. */
async function get(session: ReturnType<typeof h2Connect>, path: string): Promise<number> {
  const req = session.request({ ':path': path });
  req.resume();
  const [head] = (await once(req, 'response')) as [Record<string, unknown>];
  await once(req, 'end');
  return Number(head[':status']);
}

/**
 * What the red team left before SIGTERM: HTTP/2 clients whose streams went to the HTTP/1.1-only origin over kept-alive
 * sockets (some still connected, some closed right after sending, while their upstream was being chosen), an idle
 * HTTP/2 upstream session, a client with a zero window that never reads, and a raw tunnel that never reads.
 */
async function redTeamState(t: TestContext, proxyPort: number, ca: string, o: Origins): Promise<void> {
  for (let i = 0; i < CLIENTS; i++) {
    const tls = await h2Tunnel(t, proxyPort, ca, 'h1.example.test', o.h1Port);
    const session = h2Connect(`https://h1.example.test:${o.h1Port}`, { createConnection: () => tls });
    session.on('error', () => undefined);
    t.after(() => session.destroy());
    assert.deepEqual(await Promise.all([get(session, '/a'), get(session, '/b')]), [200, 200]);
  }
  for (let i = 0; i < CLIENTS; i++) {
    const tls = await h2Tunnel(t, proxyPort, ca, 'h1.example.test', o.h1Port);
    tls.write(Buffer.concat([PREFACE, settings(), requestHeaders(1, { authority: `h1.example.test:${o.h1Port}`, path: '/gone', scheme: 'https' })]));
    // Gone before boundary has learnt which protocol the origin speaks.
    setImmediate(() => tls.destroy());
    await once(tls, 'close');
  }
  const idle = await h2Tunnel(t, proxyPort, ca, 'h2.example.test', o.h2Port);
  const session = h2Connect(`https://h2.example.test:${o.h2Port}`, { createConnection: () => idle });
  session.on('error', () => undefined);
  assert.equal(await get(session, '/idle'), 200);
  session.close();
  await once(session, 'close');

  const stalled = await h2Tunnel(t, proxyPort, ca, 'h2.example.test', o.h2Port);
  const frames = readFrames(stalled as unknown as Socket);
  stalled.write(Buffer.concat([PREFACE, settings([[INITIAL_WINDOW, 0]]), requestHeaders(1, { authority: `h2.example.test:${o.h2Port}`, path: '/stalled', scheme: 'https' })]));
  await withinDeadline(frames.next((f) => f.type === FRAME.HEADERS && f.streamId === 1), 'the stalled stream answered');
  stalled.pause();

  const raw = await openTunnel(proxyPort, `raw.example.test:${o.echoPort}`);
  assert.equal(raw.status, 200);
  t.after(() => raw.socket.destroy());
  raw.socket.write('never read back');
}

async function sigterm(cli: BoundaryCli, t: TestContext): Promise<{ code: number | null; signal: NodeJS.Signals | null; tookMs: number }> {
  const exited = once(cli.child, 'exit') as Promise<Exit>;
  const started = performance.now();
  cli.child.kill('SIGTERM');
  const [code, signal] = await withinDeadline(exited, 'exit after SIGTERM', DRAIN_MS + EXIT_MARGIN_MS);
  const tookMs = performance.now() - started;
  t.diagnostic(`exit ${code} ${Math.round(tookMs)} ms after SIGTERM`);
  return { code, signal, tookMs };
}

describe('issue 28: SIGTERM after HTTP/2 streams downgraded to HTTP/1.1 upstream sockets', () => {
  it('exits 0 once everything idles: the drain closes every upstream socket a tunnel chose', async (t) => {
    const o = await origins(t);
    const { cli, port, ca } = await runCli(t, o, []);
    await redTeamState(t, port, ca, o);
    const exit = await sigterm(cli, t);
    assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: EXIT_OK, signal: null }, cli.stderr());
    assert.ok(cli.lines.some((line) => line.ocsf?.status_detail === 'boundary_drained'));
    assert.ok(!cli.stderr().includes('still running at the drain deadline'), cli.stderr());
  });

  it('exits 3 at the deadline when a request in flight cannot drain', async (t) => {
    const o = await origins(t);
    // A grace far beyond the deadline: only the deadline ends the request the origin never answers.
    const { cli, port, ca, stuck } = await runCli(t, o, ['--close-grace-ms', '600000']);
    await redTeamState(t, port, ca, o);
    const client = await rawClient(port);
    t.after(() => client.destroy());
    client.write(`GET http://stuck.example.test:${stuck.port}/stuck HTTP/1.1\r\nhost: stuck.example.test\r\n\r\n`);
    await withinDeadline(stuck.next(), 'the request reaching the origin');
    const exit = await sigterm(cli, t);
    assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: EXIT_DRAIN_FORCED, signal: null }, cli.stderr());
    assert.ok(exit.tookMs >= DRAIN_MS, `exited ${Math.round(exit.tookMs)} ms after SIGTERM, before the deadline`);
    assert.ok(cli.lines.some((line) => line.msg === 'drain deadline passed: the remaining connections and listeners were destroyed'));
  });

  it('exits 3 at the deadline when something the drain does not know holds the process', async (t) => {
    const o = await origins(t);
    const dir = await mkdtemp(join(tmpdir(), 'boundary-issue-28-hold-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    // A handle no part of boundary owns, so no drain can close it: the entry point's deadline must end the process.
    const hold = join(dir, 'hold.mjs');
    await writeFile(hold, 'setInterval(() => undefined, 60_000);\n');
    const { cli, port, ca } = await runCli(t, o, [], { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_OPTIONS: `--import ${hold}` });
    await redTeamState(t, port, ca, o);
    const exit = await sigterm(cli, t);
    assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: EXIT_DRAIN_FORCED, signal: null }, cli.stderr());
    assert.ok(exit.tookMs >= DRAIN_MS, `exited ${Math.round(exit.tookMs)} ms after SIGTERM, before the deadline`);
    assert.ok(cli.lines.some((line) => line.ocsf?.status_detail === 'boundary_drained'), 'the drain itself was clean');
    assert.match(cli.stderr(), /still running at the drain deadline \(held by [^)]*Timeout/);
  });
});
