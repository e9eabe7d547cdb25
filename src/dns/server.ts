// The DNS transport: UDP and TCP on one address and port, bytes in and bytes out through one handler.
// Owns sockets, bounds and the sweep timer; never parses DNS beyond TCP length prefixes and never decides.

import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import { BoundaryError } from '../errors.js';
import { parseIp } from '../net/ip.js';
import { MAX_DNS_MESSAGE_BYTES } from './answer.js';

/** Queries whose answer is still being worked out (upstream); the rest wait in the queue below. */
export const MAX_UDP_IN_FLIGHT = 64;
const MAX_UDP_QUEUED = 1_024;
const MAX_TCP_CONNECTIONS = 128;
/** Complete queries waiting on one TCP connection; a client that pipelines more is disconnected. */
const MAX_TCP_PIPELINED = 16;
const TCP_IDLE_TIMEOUT_MS = 10_000;
/** Bursts of small datagrams (benchmarks, parallel stub lookups) must not overflow the kernel queue. */
const UDP_RECEIVE_BUFFER_BYTES = 4 * 1_048_576;
/** onTick period: the synthetic pool's sweep (docs/dns.md#synthetic-pools: expired records are swept every 1 s). */
export const TICK_INTERVAL_MS = 1_000;
/** Binding TCP to the port the kernel picked for UDP can collide; try a few times. */
const MAX_BIND_ATTEMPTS = 8;

export interface DnsRequestInfo {
  readonly transport: 'udp' | 'tcp';
  readonly remote: { readonly ip: string; readonly port: number };
}

/** The handler chose to send nothing (a runt or other undecodable datagram). */
export const NO_RESPONSE: unique symbol = Symbol('no-response');
/** One query's response bytes, or NO_RESPONSE. */
export type DnsAnswer = Buffer | typeof NO_RESPONSE;

/** One query in, one answer out. */
export interface DnsHandler {
  /** The answer from what is known now (cache hits, local answers, malformed queries), or undefined on a miss. Never starts upstream work. */
  cached(message: Buffer, info: DnsRequestInfo): DnsAnswer | undefined;
  /** The full answer, resolving upstream when it must. Called after cached() missed; such work counts against the in-flight bound. */
  resolve(message: Buffer, info: DnsRequestInfo): Promise<DnsAnswer>;
}

interface DnsServerOptions {
  /** An IP literal. */
  readonly host: string;
  /** 0 picks a port that is free for both UDP and TCP. */
  readonly port: number;
  readonly handler: DnsHandler;
  /** Called once a second while running (the synthetic pool's sweep); its errors are reported, not thrown. */
  readonly onTick?: () => void;
  readonly tickIntervalMs?: number;
  readonly tcpIdleTimeoutMs?: number;
  readonly maxUdpInFlight?: number;
  /** Handler failures and socket errors; the server keeps serving. */
  readonly onError?: (err: unknown) => void;
  /** Called as each UDP datagram arrives, before it is served, queued or dropped: tests wait on it instead of polling stats(). Its errors are reported, not thrown. */
  readonly onUdpReceived?: () => void;
  /**
   * false: in a node:cluster worker, share the primary's sockets (every worker reads the one UDP socket; Node 20's
   * dgram has no SO_REUSEPORT). Only bench/dns-cluster.ts uses it, to measure multi-core scaling. Default true.
   */
  readonly exclusive?: boolean;
}

interface DnsServerStats {
  readonly udpReceived: number;
  readonly udpDropped: number;
  readonly udpInFlight: number;
  readonly tcpConnections: number;
  readonly errors: number;
}

export interface DnsServer {
  start(): Promise<void>;
  close(): Promise<void>;
  address(): { readonly host: string; readonly port: number };
  stats(): DnsServerStats;
}

export function createDnsServer(options: DnsServerOptions): DnsServer {
  const ip = parseIp(options.host);
  if (ip === undefined) throw new BoundaryError('ADDRESS_INVALID', `DNS listen host ${JSON.stringify(options.host)} must be an IP literal`);
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65_535) {
    throw new BoundaryError('ADDRESS_INVALID', `DNS listen port ${options.port} must be 0-65535`);
  }
  const family = ip.family;
  const { handler } = options;
  const maxInFlight = options.maxUdpInFlight ?? MAX_UDP_IN_FLIGHT;
  const idleMs = options.tcpIdleTimeoutMs ?? TCP_IDLE_TIMEOUT_MS;
  const report = options.onError ?? (() => {});
  const exclusive = options.exclusive ?? true;
  let udp: UdpSocket | undefined;
  let tcp: Server | undefined;
  let tick: NodeJS.Timeout | undefined;
  let boundPort = 0;
  let starting: Promise<void> | undefined;
  let closing: Promise<void> | undefined;
  const connections = new Set<Socket>();
  const queue: [Buffer, RemoteInfo][] = [];
  let inFlight = 0;
  let udpReceived = 0;
  let udpDropped = 0;
  let errors = 0;

  function fault(err: unknown): void {
    errors++;
    try {
      report(err);
    } catch {
      // A failing reporter must not take the server down.
    }
  }

  function reply(socket: UdpSocket, response: Buffer, rinfo: RemoteInfo): void {
    try {
      socket.send(response, rinfo.port, rinfo.address);
    } catch (err) {
      // A socket closed under an in-flight answer throws here; that must never become an unhandled rejection.
      fault(err);
    }
  }

  function serveUdp(socket: UdpSocket, message: Buffer, rinfo: RemoteInfo): void {
    const info: DnsRequestInfo = { transport: 'udp', remote: { ip: rinfo.address, port: rinfo.port } };
    let pending: Promise<DnsAnswer>;
    try {
      const out = handler.cached(message, info);
      if (out !== undefined) {
        if (out !== NO_RESPONSE) reply(socket, out, rinfo);
        return;
      }
      pending = handler.resolve(message, info);
    } catch (err) {
      fault(err);
      return;
    }
    inFlight++;
    pending.then(
      (response) => {
        if (response !== NO_RESPONSE && udp === socket) reply(socket, response, rinfo);
      },
      fault,
    ).finally(() => {
      inFlight--;
      while (inFlight < maxInFlight && queue.length > 0 && udp === socket) {
        const [m, r] = queue.shift()!;
        serveUdp(socket, m, r);
      }
    });
  }

  function onTcpConnection(socket: Socket): void {
    if (connections.size >= MAX_TCP_CONNECTIONS || closing !== undefined) {
      socket.destroy();
      return;
    }
    connections.add(socket);
    socket.setNoDelay(true);
    socket.setTimeout(idleMs, () => socket.destroy());
    socket.on('error', () => {});
    socket.on('close', () => connections.delete(socket));
    const remote = { ip: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 };
    let buffered: Buffer = Buffer.alloc(0);
    const pending: Buffer[] = [];
    let busy = false;
    const pump = async () => {
      if (busy) return;
      busy = true;
      // One query at a time per connection: answers leave in the order the queries arrived (DN-18).
      while (pending.length > 0 && !socket.destroyed) {
        const message = pending.shift()!;
        try {
          const info: DnsRequestInfo = { transport: 'tcp', remote };
          const out = handler.cached(message, info) ?? (await handler.resolve(message, info));
          if (out !== NO_RESPONSE && !socket.destroyed) {
            const prefix = Buffer.allocUnsafe(2);
            prefix.writeUInt16BE(out.length);
            socket.write(Buffer.concat([prefix, out]));
          }
        } catch (err) {
          fault(err);
        }
      }
      busy = false;
    };
    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2) {
        const length = buffered.readUInt16BE(0);
        // A zero prefix can never be a query, and a larger one than we accept would only be buffered to be refused.
        if (length === 0 || length > MAX_DNS_MESSAGE_BYTES || pending.length >= MAX_TCP_PIPELINED) {
          socket.destroy();
          return;
        }
        if (buffered.length < 2 + length) break;
        pending.push(Buffer.from(buffered.subarray(2, 2 + length)));
        buffered = buffered.subarray(2 + length);
      }
      void pump();
    });
  }

  async function bindBoth(port: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const socket = createSocket({
        type: family === 6 ? 'udp6' : 'udp4',
        recvBufferSize: UDP_RECEIVE_BUFFER_BYTES,
        // Replies go to the IP literal the query came from: skip dns.lookup on every send.
        lookup: (address, _options, callback) => callback(null, address, family),
      });
      await new Promise<void>((resolve, reject) => {
        socket.once('error', reject);
        socket.bind({ port, address: options.host, exclusive }, () => {
          socket.off('error', reject);
          resolve();
        });
      });
      const udpPort = socket.address().port;
      const server = createServer({ noDelay: true }, onTcpConnection);
      try {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen({ port: udpPort, host: options.host, exclusive }, () => {
            server.off('error', reject);
            resolve();
          });
        });
      } catch (err) {
        socket.close();
        if (port !== 0 || attempt >= MAX_BIND_ATTEMPTS) throw err;
        continue;
      }
      socket.on('error', fault);
      socket.on('message', (message, rinfo) => {
        udpReceived++;
        try {
          options.onUdpReceived?.();
        } catch (err) {
          fault(err);
        }
        if (inFlight >= maxInFlight) {
          if (queue.length < MAX_UDP_QUEUED) queue.push([message, rinfo]);
          else udpDropped++;
          return;
        }
        serveUdp(socket, message, rinfo);
      });
      server.on('error', fault);
      udp = socket;
      tcp = server;
      boundPort = udpPort;
      return;
    }
  }

  return {
    start() {
      starting ??= bindBoth(options.port).then(() => {
        if (options.onTick !== undefined) {
          const onTick = options.onTick;
          tick = setInterval(() => {
            try {
              onTick();
            } catch (err) {
              fault(err);
            }
          }, options.tickIntervalMs ?? TICK_INTERVAL_MS);
          tick.unref();
        }
      });
      return starting;
    },
    close() {
      closing ??= (async () => {
        await starting?.catch(() => {});
        if (tick !== undefined) clearInterval(tick);
        const socket = udp;
        const server = tcp;
        udp = undefined;
        tcp = undefined;
        queue.length = 0;
        for (const connection of connections) connection.destroy();
        await Promise.all([
          socket === undefined ? undefined : new Promise<void>((resolve) => socket.close(() => resolve())),
          server === undefined ? undefined : new Promise<void>((resolve) => server.close(() => resolve())),
        ]);
      })();
      return closing;
    },
    address() {
      return { host: options.host, port: boundPort };
    },
    stats() {
      return { udpReceived, udpDropped, udpInFlight: inFlight, tcpConnections: connections.size, errors };
    },
  };
}
