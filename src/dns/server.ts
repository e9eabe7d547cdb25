// The DNS transport: UDP and TCP on one address and port, bytes in and bytes out through one handler.
// Owns sockets, bounds and the sweep timer; never parses DNS beyond TCP length prefixes and never decides.

import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { SECOND_TICK, type Timers } from '../shared/timers.js';
import { parseIp } from '../net/ip.js';
import { MAX_DNS_MESSAGE_BYTES } from './answer.js';
import { createUdpReplies } from './udp-replies.js';

/** Queries whose answer is still being worked out (upstream); the rest wait in the queue below. */
export const MAX_UDP_IN_FLIGHT = 64;
const MAX_UDP_QUEUED = 1_024;
/**
 * TCP connections open at once. At the limit a new client takes the place of the connection idle longest (RFC 7766
 * §6.2.3: servers reclaim idle connections under resource pressure); with none idle, it is accepted and closed at once.
 */
export const MAX_TCP_CONNECTIONS = 128;
/** Complete queries waiting on one TCP connection; a client that pipelines more is disconnected. */
const MAX_TCP_PIPELINED = 16;
/**
 * A TCP connection with no query in progress is closed after this long (RFC 7766 §6.2.3: idle timeouts of the order of
 * seconds). Counted from the accept or the last answer; the bytes of an unfinished query do not reset it, so a client
 * that trickles a query is as idle as one that sends nothing.
 */
export const TCP_IDLE_TIMEOUT_MS = 10_000;
/** Answers written to a TCP client that does not read them; beyond it the connection is closed. */
const MAX_TCP_UNSENT_BYTES = 65_536;
/** Why boundary closed a DNS-over-TCP connection: idle past the timeout, idle when a new client needed its place, or new at the limit. */
export const TCP_CLOSE_REASONS = ['idle', 'reclaimed', 'over-limit'] as const;
export type TcpCloseReason = (typeof TCP_CLOSE_REASONS)[number];
/** Bursts of small datagrams (benchmarks, parallel stub lookups) must not overflow the kernel queue. */
export const UDP_RECEIVE_BUFFER_BYTES = 4 * 1_048_576;
/** Binding TCP to the port the kernel picked for UDP can collide; try a few times. */
const MAX_BIND_ATTEMPTS = 8;

export interface DnsRequestInfo {
  readonly transport: 'udp' | 'tcp';
  readonly remote: { readonly ip: string; readonly port: number };
  /** The replay worker that passed the query on (dns/workers.ts); undefined when it reached the main thread's socket. */
  readonly worker?: number;
}

/** The handler chose to send nothing (a runt or other undecodable datagram). */
export const NO_RESPONSE: unique symbol = Symbol('no-response');
/** One query's response bytes, or NO_RESPONSE. */
export type DnsAnswer = Buffer | typeof NO_RESPONSE;

/** One query in, one answer out. */
export interface DnsHandler {
  /**
   * The answer: now, from what is known (cache hits, local answers, malformed queries), or a promise when it must be
   * resolved upstream. Only promised answers count against the in-flight bound.
   */
  answer(message: Buffer, info: DnsRequestInfo): DnsAnswer | Promise<DnsAnswer>;
}

interface DnsServerOptions {
  /** An IP literal. */
  readonly host: string;
  /** 0 picks a port that is free for both UDP and TCP. */
  readonly port: number;
  readonly handler: DnsHandler;
  /** Called once a second while running (the synthetic pool's sweep), on the process's SecondTick; its errors are
   *  reported, not thrown. */
  readonly onTick?: () => void;
  readonly tcpIdleTimeoutMs?: number;
  readonly maxTcpConnections?: number;
  readonly maxUdpInFlight?: number;
  /** Each TCP connection boundary closed, by reason (a metric); its errors are reported, not thrown. */
  readonly onTcpClosed?: (reason: TcpCloseReason) => void;
  /** Handler failures and socket errors; the server keeps serving. */
  readonly onError?: (err: unknown) => void;
  /** Called as each UDP datagram arrives, before it is served, queued or dropped: tests wait on it instead of polling stats(). Its errors are reported, not thrown. */
  readonly onUdpReceived?: () => void;
  /**
   * false: in a node:cluster worker, share the primary's sockets (every worker reads the one UDP socket; Node 20's
   * dgram has no SO_REUSEPORT). Only bench/dns-cluster.ts uses it, to measure multi-core scaling. Default true.
   */
  readonly exclusive?: boolean;
  /**
   * Bind UDP with SO_REUSEPORT, so policy DNS's replay workers (dns/workers.ts) can bind the same address and port.
   * Only a Node whose dgram has `reusePort` honours it (dns/reuse-port.ts checks that first). Default false.
   */
  readonly reusePort?: boolean;
  /** The clock and timers held UDP answers are timed on (udp-replies.ts). Default: the global ones. */
  readonly timers?: Timers;
}

interface DnsServerStats {
  readonly udpReceived: number;
  readonly udpDropped: number;
  readonly udpInFlight: number;
  readonly tcpConnections: number;
  readonly tcpClosed: Readonly<Record<TcpCloseReason, number>>;
  readonly errors: number;
}

export interface DnsServer {
  start(): Promise<void>;
  close(): Promise<void>;
  address(): { readonly host: string; readonly port: number };
  stats(): DnsServerStats;
  /**
   * Serves a UDP query that reached another socket of the same port (a replay worker passed it on), exactly as if
   * it had arrived on this server's own: same bounds, answered from this socket to the asker's address and port.
   */
  serveDatagram(message: Buffer, remote: { readonly ip: string; readonly port: number }, worker: number): void;
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
  const maxTcp = options.maxTcpConnections ?? MAX_TCP_CONNECTIONS;
  const report = options.onError ?? (() => {});
  const exclusive = options.exclusive ?? true;
  let udp: UdpSocket | undefined;
  let tcp: Server | undefined;
  let stopTick: (() => void) | undefined;
  let boundPort = 0;
  let starting: Promise<void> | undefined;
  let closing: Promise<void> | undefined;
  /** Open TCP connections; `idleSince` orders the idle ones (0 while a query is in progress). */
  const connections = new Map<Socket, { idleSince: number; timer: NodeJS.Timeout | undefined }>();
  let idleCount = 0;
  const tcpClosed: Record<TcpCloseReason, number> = { idle: 0, reclaimed: 0, 'over-limit': 0 };
  const queue: [Buffer, RemoteInfo, number | undefined][] = [];
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

  // A socket closed under a held answer throws when it is sent; that is a fault, never an unhandled rejection.
  const replies = createUdpReplies(fault, options.timers);

  function reply(socket: UdpSocket, response: Buffer, rinfo: RemoteInfo): void {
    replies.send(socket, response, rinfo.port, rinfo.address);
  }

  function serveUdp(socket: UdpSocket, message: Buffer, rinfo: RemoteInfo, worker: number | undefined): void {
    const remote = { ip: rinfo.address, port: rinfo.port };
    const info: DnsRequestInfo = worker === undefined ? { transport: 'udp', remote } : { transport: 'udp', remote, worker };
    let pending: Promise<DnsAnswer>;
    try {
      const out = handler.answer(message, info);
      if (!(out instanceof Promise)) {
        if (out !== NO_RESPONSE) reply(socket, out, rinfo);
        return;
      }
      pending = out;
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
        const [m, r, w] = queue.shift()!;
        serveUdp(socket, m, r, w);
      }
    });
  }

  function closeTcp(socket: Socket, reason: TcpCloseReason): void {
    tcpClosed[reason]++;
    socket.destroy();
    try {
      options.onTcpClosed?.(reason);
    } catch (err) {
      fault(err);
    }
  }

  /** Closes the connection idle longest to make room; false when every connection has a query in progress. */
  function reclaimIdle(): boolean {
    let oldest: Socket | undefined;
    let since = Number.POSITIVE_INFINITY;
    for (const [socket, state] of connections) {
      if (state.idleSince > 0 && state.idleSince < since) {
        oldest = socket;
        since = state.idleSince;
      }
    }
    if (oldest === undefined) return false;
    connections.delete(oldest);
    closeTcp(oldest, 'reclaimed');
    return true;
  }

  function onTcpConnection(socket: Socket): void {
    socket.on('error', () => {});
    if (closing !== undefined) {
      socket.destroy();
      return;
    }
    // Accepted and closed at once, never left in the backlog: the listener keeps accepting whatever its clients do.
    if (connections.size >= maxTcp && !reclaimIdle()) {
      closeTcp(socket, 'over-limit');
      return;
    }
    const state: { idleSince: number; timer: NodeJS.Timeout | undefined } = { idleSince: 0, timer: undefined };
    connections.set(socket, state);
    const idle = (): void => {
      if (state.idleSince !== 0) return;
      state.idleSince = ++idleCount;
      state.timer = setTimeout(() => closeTcp(socket, 'idle'), idleMs);
      state.timer.unref();
    };
    const busy = (): void => {
      state.idleSince = 0;
      clearTimeout(state.timer);
      state.timer = undefined;
    };
    idle();
    socket.setNoDelay(true);
    socket.on('close', () => {
      clearTimeout(state.timer);
      if (connections.get(socket) === state) connections.delete(socket);
    });
    const remote = { ip: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 };
    let buffered: Buffer = Buffer.alloc(0);
    const pending: Buffer[] = [];
    let working = false;
    const pump = async () => {
      if (working) return;
      working = true;
      // One query at a time per connection: answers leave in the order the queries arrived (DN-18).
      while (pending.length > 0 && !socket.destroyed) {
        const message = pending.shift()!;
        try {
          const info: DnsRequestInfo = { transport: 'tcp', remote };
          const out = await handler.answer(message, info);
          if (out !== NO_RESPONSE && !socket.destroyed) {
            const prefix = Buffer.allocUnsafe(2);
            prefix.writeUInt16BE(out.length);
            socket.write(Buffer.concat([prefix, out]));
            // A client that asks and never reads would have its answers buffered here without end.
            if (socket.writableLength > MAX_TCP_UNSENT_BYTES) socket.destroy();
          }
        } catch (err) {
          fault(err);
        }
      }
      working = false;
      if (!socket.destroyed && pending.length === 0) idle();
    };
    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const queued = pending.length;
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
        busy();
      }
      // Only a complete query is activity: a partial one leaves the idle timer running.
      if (pending.length > queued) void pump();
    });
  }

  function received(socket: UdpSocket, message: Buffer, rinfo: RemoteInfo, worker?: number): void {
    udpReceived++;
    try {
      options.onUdpReceived?.();
    } catch (err) {
      fault(err);
    }
    if (inFlight >= maxInFlight) {
      if (queue.length < MAX_UDP_QUEUED) queue.push([message, rinfo, worker]);
      else udpDropped++;
      return;
    }
    serveUdp(socket, message, rinfo, worker);
  }

  async function bindBoth(port: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const socket = createSocket({
        type: family === 6 ? 'udp6' : 'udp4',
        recvBufferSize: UDP_RECEIVE_BUFFER_BYTES,
        // Replies go to the IP literal the query came from: skip dns.lookup on every send.
        lookup: (address, _options, callback) => callback(null, address, family),
        // Node 20's SocketOptions type has no reusePort; Node 22.12+ honours it.
        ...(options.reusePort === true ? ({ reusePort: true } as object) : {}),
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
      socket.on('message', (message, rinfo) => received(socket, message, rinfo));
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
          stopTick = SECOND_TICK.add(() => {
            try {
              onTick();
            } catch (err) {
              fault(err);
            }
          });
        }
      });
      return starting;
    },
    close() {
      closing ??= (async () => {
        await starting?.catch(() => {});
        stopTick?.();
        const socket = udp;
        const server = tcp;
        udp = undefined;
        tcp = undefined;
        queue.length = 0;
        replies.flush();
        for (const connection of connections.keys()) connection.destroy();
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
      return { udpReceived, udpDropped, udpInFlight: inFlight, tcpConnections: connections.size, tcpClosed: { ...tcpClosed }, errors };
    },
    serveDatagram(message, remote, worker) {
      if (udp === undefined) return;
      // Only the fields serveUdp and reply read: the asker's address, port and family.
      const rinfo: RemoteInfo = { address: remote.ip, port: remote.port, family: family === 6 ? 'IPv6' : 'IPv4', size: message.length };
      received(udp, message, rinfo, worker);
    },
  };
}
