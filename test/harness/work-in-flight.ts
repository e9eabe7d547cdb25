// startWorkInFlight(): a boundary attached to an in-process reference supervisor over mTLS (the `boundary run` child,
// or in-process: attached-launch.ts), with one of every kind of long-lived work open through it: CONNECT tunnels
// (idle and streaming), inspected keep-alive connections (plain and TLS-intercepted), a request to an origin that
// never answers, a WebSocket with traffic, policy DNS queries and a CONNECT waiting on an upstream that never
// answers, and a control relay through the supervisor. Loopback only.

import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { rawConnect, statusLine } from './admin-client.js';
import { type DrainSettings, type Launched, launchCli, launchInProcess } from './attached-launch.js';
import { CA_CERT_FILE } from '../../src/pki/ca.js';
import { writeTlsDir } from './attached-boundary.js';
import { makeTestPki, type TestPki } from './certs.js';
import { startTestSupervisor, type TestSupervisor } from './control.js';
import { buildQuery } from './dns-client.js';
import { echo, l4Policy, rawClient, type TcpOrigin, tcpOrigin } from './liveness.js';
import { openTunnel, readHead, tlsOverTunnel } from './proxy-client.js';
import { httpOrigin, tlsOrigin } from './servers.js';
import { openWebSocket, type WsClient, type WsOrigin, wsOrigin } from './ws.js';
import { SILENT_NAME, silentUpstream } from './silent-upstream.js';
import { withinDeadline } from './waiters.js';

const NAME = 'api.example.test';
/** Queries from several clients for one silent name: policy DNS holds them all on one upstream exchange. */
const PENDING_DNS_QUERIES = 4;
/** The streaming tunnel's chunk: big enough that some is always in a socket buffer when SIGTERM lands. */
const STREAM_CHUNK = Buffer.alloc(16_384, 0x61);

export function workPolicy(ports: { readonly l7: readonly number[]; readonly l4: readonly number[] }): string {
  return `version: 1
network_policies:
  l7:
    endpoints:
      - host: ${NAME}
        ports: [${ports.l7.join(', ')}]
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
    binaries: [{ path: "/**" }]
  ws:
    endpoints:
      - host: ws.example.test
        port: ${ports.l7.at(-1)}
        protocol: websocket
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
          - allow: { method: WEBSOCKET_TEXT, path: "/**" }
    binaries: [{ path: "/**" }]
${l4Policy('l4', NAME, ports.l4)}${l4Policy('silent', SILENT_NAME, [443])}`;
}

/** One client-side socket of the work, named for the assertion messages. */
export interface ClientEnd {
  readonly what: string;
  readonly closed: Promise<unknown>;
}

export interface WorkInFlight extends Launched {
  readonly sup: TestSupervisor;
  readonly pki: TestPki;
  readonly ports: { readonly l7: readonly number[]; readonly l4: readonly number[] };
  /** Every client socket opened through the boundary (and the relay client through the supervisor). */
  readonly clients: readonly ClientEnd[];
  /** The WebSocket's client end: its frames stay buffered, so its close frame can be read after the exit. */
  readonly websocket: WsClient;
  /** The streaming tunnel's byte counter: it still grows right before SIGTERM. */
  streamed(): number;
  close(): Promise<void>;
}

function ended(what: string, socket: Socket | UdpSocket): ClientEnd {
  // Not events.once: it rejects on 'error', and a reset is one way a client sees its close.
  return { what, closed: new Promise((resolve) => socket.once('close', resolve)) };
}

export interface WorkOptions {
  /** Leave out the request to the origin that never answers (it holds the drain for the proxy's whole grace). */
  readonly withoutStuckRequest?: boolean;
  /** createBoundary in this process instead of the CLI, with these drain settings (the CLI has no flags for them). */
  readonly inProcess?: DrainSettings;
}

export async function startWorkInFlight(options: WorkOptions = {}): Promise<WorkInFlight> {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  const pki = await makeTestPki();
  const upstream = await silentUpstream([NAME, 'ws.example.test']);
  cleanups.push(() => upstream.close());
  const echoOrigin: TcpOrigin = await tcpOrigin(echo);
  const silentOrigin: TcpOrigin = await tcpOrigin(() => undefined);
  const keepAlive = await httpOrigin();
  const inspected = await tlsOrigin({ ca: pki.ca, names: [NAME] });
  const ws: WsOrigin = await wsOrigin();
  const relayTarget: TcpOrigin = await tcpOrigin(echo);
  cleanups.push(() => echoOrigin.close(), () => silentOrigin.close(), () => keepAlive.close(), () => inspected.close(), () => ws.close(), () => relayTarget.close());
  const ports = { l7: [keepAlive.port, inspected.port, silentOrigin.port, ws.port], l4: [echoOrigin.port] };
  const sup = await startTestSupervisor(pki, { policies: { [pki.sandboxId]: workPolicy(ports) } });
  cleanups.push(() => sup.close());
  const tlsDir = await writeTlsDir(pki);
  const stateDir = await mkdtemp(join(tmpdir(), 'boundary-state-'));
  cleanups.push(() => rm(tlsDir, { recursive: true, force: true }), () => rm(stateDir, { recursive: true, force: true }));
  // The origins' CA, for the boundary's upstream TLS on the intercepted connection.
  const upstreamCa = join(stateDir, 'upstream-ca.pem');
  await writeFile(upstreamCa, pki.ca.certPem);
  const close = async (): Promise<void> => {
    for (const cleanup of cleanups) await cleanup();
  };
  try {
    const site = { sup, pki, tlsDir, stateDir, upstreamCa, upstreamPort: upstream.port, relayPort: relayTarget.port };
    const launched = options.inProcess === undefined ? await launchCli(site, cleanups) : await launchInProcess(site, options.inProcess, cleanups);
    const { proxyPort, dnsPort } = launched;
    await sup.waitFor((e) => e.type === 'status');

    const clients: ClientEnd[] = [];
    let dnsClient: UdpSocket | undefined;
    const sockets: (Socket | UdpSocket)[] = [];
    cleanups.unshift(() => {
      for (const s of sockets) if ('destroy' in s) s.destroy();
      dnsClient?.close();
    });
    const track = <T extends Socket | UdpSocket>(what: string, socket: T): T => {
      sockets.push(socket);
      clients.push(ended(what, socket));
      return socket;
    };

    // CONNECT tunnels: one idle after a round trip, one streaming without pause.
    const idle = await openTunnel(proxyPort, `${NAME}:${echoOrigin.port}`);
    if (idle.status !== 200) throw new Error(`idle tunnel: CONNECT answered ${idle.status}`);
    track('idle tunnel', idle.socket);
    await roundTrip(idle.socket, 'idle tunnel hello');
    const streaming = await openTunnel(proxyPort, `${NAME}:${echoOrigin.port}`);
    if (streaming.status !== 200) throw new Error(`streaming tunnel: CONNECT answered ${streaming.status}`);
    track('streaming tunnel', streaming.socket);
    let streamed = 0;
    streamTo(streaming.socket, (n) => {
      streamed += n;
    });
    // An inspected keep-alive connection that served one request and waits for the next.
    const kept = track('inspected keep-alive', await rawClient(proxyPort));
    kept.write(`GET http://${NAME}:${keepAlive.port}/first HTTP/1.1\r\nhost: ${NAME}:${keepAlive.port}\r\n\r\n`);
    const first = await readHead(kept);
    if (first.status !== 200) throw new Error(`keep-alive request answered ${first.status}`);
    kept.resume();
    // The same over CONNECT with TLS interception: the boundary terminates TLS with a leaf from its CA.
    const tunnel = await openTunnel(proxyPort, `${NAME}:${inspected.port}`);
    if (tunnel.status !== 200) throw new Error(`intercepted tunnel: CONNECT answered ${tunnel.status}`);
    track('intercepted tunnel', tunnel.socket);
    const intercepted = track('intercepted keep-alive (TLS)', await tlsOverTunnel(tunnel.socket, { servername: NAME, ca: await readFile(join(site.stateDir, CA_CERT_FILE), 'utf8') }));
    intercepted.write(`GET /first HTTP/1.1\r\nhost: ${NAME}:${inspected.port}\r\n\r\n`);
    const answered = await readHead(intercepted);
    if (answered.status !== 200) throw new Error(`intercepted request answered ${answered.status}`);
    intercepted.resume();
    // A request whose origin accepts and never answers: in flight for the whole drain.
    if (options.withoutStuckRequest !== true) {
      const stuck = track('stuck request', await rawClient(proxyPort));
      stuck.write(`GET http://${NAME}:${silentOrigin.port}/stuck HTTP/1.1\r\nhost: ${NAME}:${silentOrigin.port}\r\n\r\n`);
      stuck.resume();
      await withinDeadline(silentOrigin.next(), 'the stuck request reaching its origin');
    }
    // A WebSocket with one echoed message, then more on the way.
    const socket = await openWebSocket({ proxyPort, transport: 'forward', host: 'ws.example.test', port: ws.port, path: '/live' });
    if (socket.status !== 101) throw new Error(`WebSocket upgrade answered ${socket.status}`);
    track('websocket', socket.client.socket);
    await wsEcho(socket.client, 'hello');
    socket.client.sendText('in flight at SIGTERM');
    // Policy DNS queries for a name whose upstream never answers: each waits on an upstream exchange.
    dnsClient = createSocket('udp4');
    for (let i = 0; i < PENDING_DNS_QUERIES; i++) dnsClient.send(buildQuery(SILENT_NAME, 'A', { id: 100 + i }), dnsPort, '127.0.0.1');
    const dnsTcp = track('pending DNS (tcp)', await rawClient(dnsPort));
    const query = buildQuery(SILENT_NAME, 'A', { id: 200 });
    const prefix = Buffer.alloc(2);
    prefix.writeUInt16BE(query.length);
    dnsTcp.write(Buffer.concat([prefix, query]));
    dnsTcp.resume();
    const proxyLookup = track('CONNECT waiting on DNS', await rawClient(proxyPort));
    proxyLookup.write(`CONNECT ${SILENT_NAME}:443 HTTP/1.1\r\nhost: ${SILENT_NAME}:443\r\n\r\n`);
    proxyLookup.resume();
    // Identical questions share one upstream exchange (policy DNS coalesces them): one arriving is enough.
    await upstream.silentQueries(1);
    // A control relay: the operator's CONNECT through the supervisor's admin listener into the sandbox.
    const admin = sup.supervisor.adminAddress();
    if (admin === undefined) throw new Error('the supervisor has no admin listener');
    const relay = await rawConnect(admin.port, `${pki.sandboxId}:${relayTarget.port}`, [`proxy-authorization: Bearer ${sup.adminToken}`]);
    if (statusLine(relay.head) !== 'HTTP/1.1 200 Connection Established') throw new Error(`relay: ${relay.head}`);
    track('control relay', relay.socket);
    await roundTrip(relay.socket, 'relay hello');
    return { ...launched, sup, pki, ports, clients, websocket: socket.client, streamed: () => streamed, close };
  } catch (err) {
    await close();
    throw err;
  }
}

async function roundTrip(socket: Socket, text: string): Promise<void> {
  const got: Buffer[] = [];
  let length = 0;
  const echoed = new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      got.push(chunk);
      length += chunk.length;
      if (length >= text.length) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`closed before the echo of ${text}`)));
  });
  // Tunnel sockets come paused (proxy-client.ts readHead).
  socket.resume();
  socket.write(text);
  await withinDeadline(echoed, `the echo of ${text}`);
}

/** Keeps writing whenever the socket drains; counts the echo. Ends when the socket closes. */
function streamTo(socket: Socket, onEcho: (bytes: number) => void): void {
  socket.on('data', (chunk: Buffer) => onEcho(chunk.length));
  const pump = (): void => {
    // Bounded per turn: stops at the first full buffer and resumes on 'drain'.
    while (!socket.destroyed && socket.write(STREAM_CHUNK));
  };
  socket.on('drain', pump);
  socket.resume();
  pump();
}

async function wsEcho(client: WsClient, text: string): Promise<void> {
  client.sendText(text);
  const frame = await client.next();
  if (frame.payload.toString() !== `echo:${text}`) throw new Error(`WebSocket echo: ${frame.payload.toString()}`);
}
